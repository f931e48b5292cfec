package redisgate

import (
	"context"
	"errors"
	"sync"

	"github.com/voucherd/voucherd/internal/voucher"
)

// maxCommits bounds the holds one commit.lua call marks durable.
const maxCommits = 256

// commitQueues combines concurrent Commit calls per voucher: the commits of
// a voucher that arrive while one commit.lua call of that voucher is in
// flight are made together by the next call, so that a Kafka-mode sale pays
// one script call per batch of acknowledged events rather than one per
// reservation. The script decides each hold on its own, so a combined call
// answers every hold as a call of its own would. At most one call per
// voucher is in flight; mu guards queues and everything in them.
type commitQueues struct {
	mu     sync.Mutex
	queues map[string]*commitQueue // by voucher code; dropped when empty
}

// commitQueue is the commits of one voucher waiting for a call.
type commitQueue struct {
	waiting []*commitReq
}

// commitReq is one caller's commit; done is closed once committed and err
// are set.
type commitReq struct {
	orderID   string
	owner     string // the hold's owner, the instance committing it
	done      chan struct{}
	committed bool
	err       error
}

// errCommitReply is the error of a commit.lua reply that is not one integer
// per orderId.
var errCommitReply = errors.New("commit.lua answered an unexpected reply")

// commit queues the commit of orderID's hold, owned by owner, for code and
// waits for its answer, or for ctx to end (the commit may then still be
// made).
func (g *Gate) commit(ctx context.Context, code, orderID, owner string) (bool, error) {
	r := &commitReq{orderID: orderID, owner: owner, done: make(chan struct{})}
	c := &g.commits
	c.mu.Lock()
	if c.queues == nil {
		c.queues = make(map[string]*commitQueue)
	}
	q, running := c.queues[code]
	if !running {
		q = &commitQueue{}
		c.queues[code] = q
	}
	q.waiting = append(q.waiting, r)
	c.mu.Unlock()
	if !running {
		go g.runCommits(code, q)
	}
	select {
	case <-r.done:
		return r.committed, r.err
	case <-ctx.Done():
		return false, voucher.Unavailable(ctx.Err(), "waiting for Redis to mark order %s durable", orderID)
	}
}

// runCommits makes the waiting commits of code, a batch per call, until
// none is left; then it drops the queue.
func (g *Gate) runCommits(code string, q *commitQueue) {
	c := &g.commits
	for {
		c.mu.Lock()
		batch := q.waiting[:min(len(q.waiting), maxCommits)]
		q.waiting = q.waiting[len(batch):]
		if len(batch) == 0 {
			delete(c.queues, code)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		g.commitBatch(code, batch)
	}
}

// commitBatch makes batch's commits with one commit.lua call. It runs
// detached from the callers, each of which stops waiting when its own
// context ends, bounded by Config.Timeout.
func (g *Gate) commitBatch(code string, batch []*commitReq) {
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	fail := func(err error) {
		err = interpretError(err, "commit", code)
		for _, r := range batch {
			r.err = err
		}
	}
	client, err := g.conn()
	if err != nil {
		fail(err)
		return
	}
	ids := make([]string, len(batch))
	for i, r := range batch {
		ids[i] = r.orderID + "|" + r.owner
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(context.Background())
	defer cancel()
	res, err := commitScript.Exec(ctx, client, []string{k.orders, k.version, k.codes, k.freed}, ids).ToArray()
	if err == nil && len(res) != len(batch) {
		err = errCommitReply
	}
	if err != nil {
		fail(err)
		return
	}
	for i, r := range batch {
		n, err := res[i].AsInt64()
		r.committed, r.err = n == 1, err
		if err != nil {
			r.err = interpretError(err, "commit", code)
		}
	}
}
