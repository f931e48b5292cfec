package redisgate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/voucherd/voucherd/internal/voucher"
)

// maxTakes bounds the takes one reserve.lua call makes, so that a call
// holds Redis for well under a millisecond.
const maxTakes = 64

// takeArgs is the number of ARGV entries of one take in reserve.lua.
const takeArgs = 8

// takeAlone makes r's take with a reserve.lua call of its own, bounded by
// Config.Timeout and ctx: the path of every take unless
// Config.CombineTakes.
func (g *Gate) takeAlone(ctx context.Context, code string, r *takeReq) (voucher.GateDecision, error) {
	epoch := g.soldOut.begin(code)
	client, err := g.conn()
	if err != nil {
		return voucher.GateDecision{}, interpretError(err, "reserve", code)
	}
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	res, err := reserveScript.Exec(ctx, client, g.keys.reserve(g.cfg.KeyPrefix, code), r.args[:]).ToArray()
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("%w: %d replies for 1 take", errTakeReply, len(res))
	}
	if err != nil {
		return voucher.GateDecision{}, interpretTakeError(err, "reserve", code)
	}
	reply, err := res[0].ToArray()
	if err != nil {
		return voucher.GateDecision{}, interpretError(err, "reserve", code)
	}
	return g.decideTake(code, epoch, r.orderID, reply)
}

// takeQueues combines concurrent Reserve calls per voucher (with
// Config.CombineTakes): the takes of a
// voucher that arrive while one reserve.lua call of that voucher is in
// flight are made together by the next call, in the order they arrived,
// so that a rush pays Redis one script call (and this process one round
// trip) per batch of takes rather than one per take. The script makes each
// take as a call of its own would, one after the other, so every take is
// answered as a call of one would answer it had the takes arrived one by
// one in that order. At most one call per voucher is in flight; mu guards
// queues and everything in them.
type takeQueues struct {
	mu     sync.Mutex
	queues map[string]*takeQueue // by voucher code; dropped when empty
}

// takeQueue is the takes of one voucher waiting for a call.
type takeQueue struct {
	waiting []*takeReq
}

// takeReq is one caller's take: its ARGV group and orderId; done is closed
// once dec and err are set. sent (the take is in a call) and abandoned (its
// caller stopped waiting before that) are guarded by takeQueues.mu: a take
// is sent only while its caller waits, as a call of its own would be.
type takeReq struct {
	orderID   string
	args      [takeArgs]string
	done      chan struct{}
	dec       voucher.GateDecision
	err       error
	sent      bool
	abandoned bool
}

// newTakeReq is the take of hold by a customer allowed perUserLimit uses:
// its ARGV group of reserve.lua.
func newTakeReq(perUserLimit int32, hold voucher.Hold) takeReq {
	state := byte(stateHeld)
	if hold.Pending {
		state = statePending
	}
	return takeReq{orderID: hold.OrderID, args: [takeArgs]string{
		hold.OrderID,
		hold.CustomerID,
		strconv.FormatInt(int64(perUserLimit), 10),
		encodeHold(state, hold),
		hold.Code,
		attemptToken(hold),
		budgetMode(hold.Budget),
		windowLimitArg(hold.WindowLimit),
	}}
}

// errTakeReply is the error of a reserve.lua reply that is not one reply
// per take.
var errTakeReply = errors.New("reserve.lua answered an unexpected reply")

// take queues r for code's next reserve.lua call and waits for its answer,
// for at most Config.Timeout or until ctx ends. A take that was not sent by
// then never will be, and took nothing (a plain CodeUnavailable); one that
// was sent may still be made: the error then wraps
// voucher.ErrGateUnanswered, as for a call whose reply was lost.
func (g *Gate) take(ctx context.Context, code string, r *takeReq) (voucher.GateDecision, error) {
	r.done = make(chan struct{})
	q := &g.takes
	q.mu.Lock()
	if q.queues == nil {
		q.queues = make(map[string]*takeQueue)
	}
	tq, running := q.queues[code]
	if !running {
		tq = &takeQueue{}
		q.queues[code] = tq
	}
	tq.waiting = append(tq.waiting, r)
	q.mu.Unlock()
	if !running {
		go g.runTakes(code, tq)
	}
	t := time.NewTimer(g.cfg.Timeout)
	defer t.Stop()
	var err error
	select {
	case <-r.done:
		return r.dec, r.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = context.DeadlineExceeded
	}
	q.mu.Lock()
	sent := r.sent
	r.abandoned = !sent
	q.mu.Unlock()
	if !sent {
		return voucher.GateDecision{}, interpretError(err, "reserve", code)
	}
	return voucher.GateDecision{}, interpretTakeError(err, "reserve", code)
}

// runTakes makes the waiting takes of code, a batch per call, until none is
// left; then it drops the queue.
func (g *Gate) runTakes(code string, tq *takeQueue) {
	q := &g.takes
	for {
		q.mu.Lock()
		batch := make([]*takeReq, 0, min(len(tq.waiting), maxTakes))
		n := 0
		for _, r := range tq.waiting {
			if len(batch) == maxTakes {
				break
			}
			n++
			if r.abandoned {
				close(r.done)
				continue
			}
			r.sent = true
			batch = append(batch, r)
		}
		tq.waiting = tq.waiting[n:]
		if len(batch) == 0 && len(tq.waiting) == 0 {
			delete(q.queues, code)
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		g.takeBatch(code, batch)
	}
}

// takeBatch makes batch's takes with one reserve.lua call and answers each.
// It runs detached from the callers, each of which stops waiting when its
// own context ends, bounded by Config.Timeout.
func (g *Gate) takeBatch(code string, batch []*takeReq) {
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	fail := func(err error) {
		for _, r := range batch {
			r.err = err
		}
	}
	// Taken before the call: a sold-out answer is cached only if nothing
	// cleared the code's entry since (soldOutCache.begin).
	epoch := g.soldOut.begin(code)
	client, err := g.conn()
	if err != nil {
		fail(interpretError(err, "reserve", code))
		return
	}
	args := make([]string, 0, takeArgs*len(batch))
	for _, r := range batch {
		args = append(args, r.args[:]...)
	}
	ctx, cancel := g.withTimeout(context.Background())
	defer cancel()
	res, err := reserveScript.Exec(ctx, client, g.keys.reserve(g.cfg.KeyPrefix, code), args).ToArray()
	if err == nil && len(res) != len(batch) {
		err = fmt.Errorf("%w: %d replies for %d takes", errTakeReply, len(res), len(batch))
	}
	if err != nil {
		if _, isReply := rueidis.IsRedisErr(err); isReply && len(batch) > 1 {
			// The script failed after making the takes before the one that
			// failed: none of them is known to have taken nothing.
			err = fmt.Errorf("%w: %w", voucher.ErrGateUnanswered, err)
		}
		fail(interpretTakeError(err, "reserve", code))
		return
	}
	for i, r := range batch {
		reply, err := res[i].ToArray()
		if err != nil {
			r.err = interpretError(err, "reserve", code)
			continue
		}
		r.dec, r.err = g.decideTake(code, epoch, r.orderID, reply)
	}
}
