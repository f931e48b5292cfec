package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Write combining.
//
// Every reservation of a voucher updates the voucher's one row, and a
// transaction holds that row's lock until its commit is flushed to the WAL,
// so a hot voucher takes one use per WAL flush, whatever the number of
// clients. The combiner queues the reservations of a voucher that arrive
// while a write for it is in flight and writes them together in the next
// transaction (voucherd_reserve_batch): one hot-row update and one flush for
// the whole batch, and one answer per reservation, the one it would have got
// alone. The write in flight is the batching window: a reservation that finds
// no write in flight is sent at once, unless its voucher's writer regroups.
//
// Regrouping. Under load the callers of one batch come back together with
// their next orders. Sent as they arrive, the first one back finds no write
// in flight and goes alone, and the others queue behind it: the callers
// split into two cohorts of chance sizes that stay apart batch after batch
// (1 and 63 of 64 clients, or 20 and 44), two transactions where one would
// do, each with its fixed cost (docs/storage.md, "Batches that fill"). So
// when a batch ends, its writer waits, before the next batch, until the
// next cohort is queued, at most as long as that batch's write took and at
// most CombinerConfig.Regroup: the callers who queue meanwhile would have
// waited about that long behind a write of the first one anyway.
//
// Cohorts (unless CombinerConfig.SingleCohort). The callers a voucher's
// writer has seen together (the batch it wrote last and the queue behind
// it when the write ended, or more seen lately) are one cohort while they
// are fewer than 2*minCohort: one transaction per round. From 2*minCohort
// on they are split into two cohorts of half each (splitCohorts), so that
// one is written while the other is answered, served by Redis and sent
// again, and the writer does not wait for a whole round of callers to come
// back: more takes a second on a hot voucher, for more PostgreSQL CPU per
// take (docs/storage.md, "Two cohorts").

// DefaultMaxBatch is the default of CombinerConfig.MaxBatch.
const DefaultMaxBatch = 64

// DefaultRegroup is the default of CombinerConfig.Regroup.
const DefaultRegroup = 20 * time.Millisecond

// minCohort is the smallest cohort regrouping splits a voucher's callers
// into: the smaller a batch, the more of its fixed cost each reservation
// pays (docs/storage.md, "Two cohorts").
const minCohort = 32

// CombinerConfig configures write combining. Zero values mean the defaults.
type CombinerConfig struct {
	// Disabled turns combining off: every reservation is its own transaction
	// (voucherd_reserve_one), which is the baseline to compare against.
	Disabled bool
	// MaxBatch bounds the reservations written in one transaction (default
	// DefaultMaxBatch).
	MaxBatch int
	// MaxWait, when positive, lets a batch that queued behind a write wait up
	// to this long for more reservations before it is sent (default 0: the
	// write in flight is the only wait). It never delays the first
	// reservation of a voucher whose writer is idle (Regroup may).
	MaxWait time.Duration
	// Regroup bounds how long a voucher's writer, when a batch ends, waits
	// until as many reservations are queued as that batch and the queue
	// behind it held together before it sends the next batch; the wait is
	// also at most as long as that batch's write took (default
	// DefaultRegroup; negative: no wait, the next batch goes as soon as the
	// write before it ends). A lone reservation with none queued behind it
	// never makes the next one wait, so a voucher without concurrent
	// reservations is written as before.
	Regroup time.Duration
	// SingleCohort keeps a voucher's callers in one cohort however many
	// its writer sees together (see "Cohorts" above): fewer transactions
	// and less PostgreSQL CPU per reservation, fewer reservations a second
	// on a hot voucher. Without regrouping there are no cohorts either.
	SingleCohort bool
	// Writers bounds the batches of one voucher in flight at once (default
	// 1). With more than one, a reservation that finds every write of its
	// voucher in flight starts another; the batches then meet at the
	// voucher's row lock, as the writes of several instances do
	// (docs/storage.md weighs the choice).
	Writers int
}

func (c CombinerConfig) withDefaults() (CombinerConfig, error) {
	if c.MaxBatch < 0 || c.MaxWait < 0 || c.Writers < 0 {
		return c, errors.New("pgstore: Config.Combining.MaxBatch, MaxWait and Writers must be >= 0")
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.Regroup == 0 {
		c.Regroup = DefaultRegroup
	}
	return c, nil
}

// combiner batches the reservations of each voucher. Up to writers
// goroutines per voucher with a write in flight send the batches, each one
// at a time; each exits when the voucher's queue is empty.
type combiner struct {
	write    func(code string, batch []*pending)
	maxBatch int
	maxWait  time.Duration
	regroup  time.Duration // <= 0: never
	cohorts  bool          // !CombinerConfig.SingleCohort
	writers  int
	// beforeWrite, when set (by tests, before the first reservation), is
	// called with each batch just before it is written.
	beforeWrite func(code string, batch []*pending)

	mu sync.Mutex
	// queues holds the voucher codes whose goroutine runs, with the
	// reservations waiting for the next batch.
	queues map[string]*queue
}

type queue struct {
	waiting []*pending
	// running counts the goroutines sending this queue's batches.
	running int
	// want, when positive, is the number of queued reservations a
	// regrouping writer waits for.
	want int
	// full is signalled when waiting reaches maxBatch (or want), to end a
	// MaxWait or a regrouping early.
	full chan struct{}
	// seen is the number of callers the writer has lately seen together
	// (the batch it wrote last and the queue behind it, or more seen
	// before, decaying by an eighth a batch); cohort, when positive, is the
	// size of the cohorts it splits them into, which bounds the next batch
	// below maxBatch. Both guarded by combiner.mu.
	seen, cohort int
}

// The states of a pending reservation, guarded by combiner.mu.
const (
	stateQueued  = iota // waiting for a batch; its caller may still leave
	stateSent           // in the batch being written; its caller waits for the answer
	stateDropped        // its caller left before it was sent; never written
)

// pending is one reservation in the combiner.
type pending struct {
	ctx   context.Context
	req   voucher.ReserveRequest
	now   time.Time
	ttl   time.Duration
	state int
	// done is closed once res and err hold the answer.
	done chan struct{}
	res  voucher.Reservation
	err  error
}

func newCombiner(cfg CombinerConfig, write func(code string, batch []*pending)) *combiner {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.Writers <= 0 {
		cfg.Writers = 1
	}
	if cfg.Regroup == 0 {
		cfg.Regroup = DefaultRegroup
	}
	return &combiner{write: write, maxBatch: cfg.MaxBatch, maxWait: cfg.MaxWait, regroup: cfg.Regroup,
		cohorts: !cfg.SingleCohort, writers: cfg.Writers, queues: map[string]*queue{}}
}

// reserve queues the reservation and waits for its answer. A caller whose
// context ends while the reservation is queued leaves with CodeUnavailable
// and the reservation is not written; once it is sent, the caller waits for
// the answer, so that the answer says what happened.
func (c *combiner) reserve(ctx context.Context, req voucher.ReserveRequest, now time.Time, ttl time.Duration) (voucher.Reservation, error) {
	if err := ctx.Err(); err != nil {
		return voucher.Reservation{}, interpretError(err)
	}
	p := &pending{ctx: ctx, req: req, now: now, ttl: ttl, done: make(chan struct{})}
	c.mu.Lock()
	q := c.queues[req.Code]
	if q == nil {
		q = &queue{full: make(chan struct{}, 1)}
		c.queues[req.Code] = q
	}
	start := q.running < c.writers
	if start {
		q.running++
	}
	q.waiting = append(q.waiting, p)
	if len(q.waiting) >= c.maxBatch || q.want > 0 && len(q.waiting) >= q.want {
		select {
		case q.full <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
	if start {
		go c.run(req.Code, q)
	}

	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	sent := p.state == stateSent
	if !sent {
		p.state = stateDropped
	}
	c.mu.Unlock()
	if sent {
		<-p.done
		return p.res, p.err
	}
	return voucher.Reservation{}, interpretError(ctx.Err())
}

// run sends the batches of one voucher until its queue is empty (after
// regrouping, when its last batch had several reservations).
func (c *combiner) run(code string, q *queue) {
	// last counts the reservations of the batch this goroutine wrote last
	// and those queued behind it when it ended: the callers the next batch
	// may regroup.
	var last int
	var took time.Duration
	for first := true; ; first = false {
		if !first && c.maxWait > 0 {
			c.fill(q)
		}
		c.regroupAfter(q, last, took)
		c.mu.Lock()
		batch := c.take(q)
		if len(batch) == 0 {
			if q.running--; q.running == 0 {
				delete(c.queues, code)
			}
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if c.beforeWrite != nil {
			c.beforeWrite(code, batch)
		}
		last, took = 0, 0
		if batch = leftBehind(batch); len(batch) > 0 {
			start := time.Now()
			c.write(code, batch)
			took = time.Since(start)
			c.mu.Lock()
			last = len(batch) + len(q.waiting)
			c.splitCohorts(q, last)
			c.mu.Unlock()
			for _, p := range batch {
				close(p.done)
			}
		}
	}
}

// regroupAfter waits, after a batch whose write took took and that had
// n > 1 reservations with those queued behind it, until n (at most a
// cohort, at most maxBatch) reservations are queued, at most took and at
// most c.regroup.
// Reservations that arrive meanwhile are queued, not sent: q.running still
// counts this goroutine.
func (c *combiner) regroupAfter(q *queue, n int, took time.Duration) {
	if c.regroup <= 0 || n < 2 || took <= 0 {
		return
	}
	c.mu.Lock()
	n = min(n, c.batchLimit(q))
	if len(q.waiting) >= n {
		c.mu.Unlock()
		return
	}
	select {
	case <-q.full: // a signal left from an earlier batch
	default:
	}
	q.want = n
	c.mu.Unlock()
	t := time.NewTimer(min(took, c.regroup))
	select {
	case <-q.full:
	case <-t.C:
	}
	t.Stop()
	c.mu.Lock()
	q.want = 0
	c.mu.Unlock()
}

// leftBehind answers the reservations of the batch whose caller has left
// (its context ended) with CodeUnavailable, without writing them, and
// returns the others. Not sending them is the only way to be sure of their
// outcome: a write cancelled in flight may or may not have committed.
func leftBehind(batch []*pending) []*pending {
	kept := batch[:0]
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.err = interpretError(err)
			close(p.done)
			continue
		}
		kept = append(kept, p)
	}
	return kept
}

// fill waits up to maxWait for the queue to hold a full batch.
func (c *combiner) fill(q *queue) {
	c.mu.Lock()
	n := len(q.waiting)
	c.mu.Unlock()
	if n == 0 || n >= c.maxBatch {
		return
	}
	select {
	case <-q.full: // a signal left from an earlier batch
	default:
	}
	t := time.NewTimer(c.maxWait)
	defer t.Stop()
	select {
	case <-q.full:
	case <-t.C:
	}
}

// take removes the next batch from the queue and marks it sent: up to
// batchLimit reservations with the TTL of the oldest one, in arrival order.
// Reservations whose caller left are dropped. The caller holds c.mu.
func (c *combiner) take(q *queue) []*pending {
	var batch []*pending
	rest := q.waiting[:0]
	for _, p := range q.waiting {
		switch {
		case p.state == stateDropped:
		case p.ctx.Err() != nil:
			// The caller is leaving (or about to); it answers for itself.
			p.state = stateDropped
		case len(batch) < c.batchLimit(q) && (len(batch) == 0 || p.ttl == batch[0].ttl):
			p.state = stateSent
			batch = append(batch, p)
		default:
			rest = append(rest, p)
		}
	}
	clear(q.waiting[len(rest):])
	q.waiting = rest
	return batch
}

// splitCohorts records that a batch of q ended with n reservations
// written and queued behind it, and sets the cohort the next batches are
// bounded by: half of the callers seen together once they are 2*minCohort
// or more, and until they fall below 3*minCohort/2 (so that a batch that
// ends before the other cohort is back does not merge the two); none (one
// cohort) otherwise. With CombinerConfig.SingleCohort or without
// regrouping there are no cohorts. The caller holds c.mu.
func (c *combiner) splitCohorts(q *queue, n int) {
	q.seen = max(n, q.seen-q.seen/8)
	split := q.seen >= 2*minCohort || q.cohort > 0 && q.seen >= 3*minCohort/2
	q.cohort = 0
	if c.cohorts && c.regroup > 0 && split {
		q.cohort = min((q.seen+1)/2, c.maxBatch)
	}
}

// batchLimit bounds q's next batch: its cohort, or maxBatch. The caller
// holds c.mu.
func (c *combiner) batchLimit(q *queue) int {
	if q.cohort > 0 {
		return q.cohort
	}
	return c.maxBatch
}

// waiting returns the number of reservations of code queued for the next
// batch, for tests.
func (c *combiner) waiting(code string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[code]
	if q == nil {
		return 0
	}
	n := 0
	for _, p := range q.waiting {
		if p.state == stateQueued {
			n++
		}
	}
	return n
}

// batchContext returns the context of a batch's write: it ends when the
// contexts of all its reservations have ended, so a write nobody waits for
// any more is cancelled, and one somebody still waits for is not. As with a
// single reservation whose context ends while its statement runs, the
// callers then get CodeUnavailable with OutcomeUnknown: the write may have
// committed, and retrying with the same orderId tells (a replay).
func batchContext(batch []*pending) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var left atomic.Int64
	left.Store(int64(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, p := range batch {
		stops[i] = context.AfterFunc(p.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// flushCounts are the running totals behind CombinerStats.
type flushCounts struct {
	flushes, reservations atomic.Uint64
	nanos                 atomic.Int64
}

// CombinerStats are running totals of the combiner's writes since the store
// was opened: Flushes transactions written (batches, a batch of one
// included), Reservations in them, and FlushTime, the time from sending
// each one to its answer (its commit included). Reservations / Flushes is
// the mean batch size, FlushTime / Flushes the mean write latency.
type CombinerStats struct {
	Flushes      uint64
	Reservations uint64
	FlushTime    time.Duration
}

// CombinerStats returns the combiner's totals (zero with combining off).
func (s *Store) CombinerStats() CombinerStats {
	return CombinerStats{
		Flushes:      s.flushes.flushes.Load(),
		Reservations: s.flushes.reservations.Load(),
		FlushTime:    time.Duration(s.flushes.nanos.Load()),
	}
}

// writeBatch writes the reservations of one voucher, all with the same TTL,
// in one statement (voucherd_reserve_batch) and sets each one's answer. When
// the voucher's rules changed under the batch (VD003) each reservation is
// written on its own instead. A failure of the batch as a whole is every
// reservation's answer. A batch of one is written by voucherd_reserve_one, which
// gives the same answer for less work. A failure after the batch may have
// reached the server is every reservation's OutcomeUnknown answer.
func (s *Store) writeBatch(code string, batch []*pending) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	start := time.Now()
	defer func() {
		s.flushes.flushes.Add(1)
		s.flushes.reservations.Add(uint64(len(batch)))
		s.flushes.nanos.Add(int64(time.Since(start)))
	}()
	if s.batchContext != nil {
		carried := make([]context.Context, len(batch))
		for i, p := range batch {
			carried[i] = p.ctx
		}
		var done func()
		ctx, done = s.batchContext(ctx, carried)
		defer done()
	}
	if len(batch) == 1 {
		p := batch[0]
		p.res, p.err = s.reserveOne(ctx, p.req, p.now, p.ttl)
		return
	}
	err := s.rerunRolledBack(ctx, func() error { return s.reserveBatch(ctx, code, batch) })
	if state, _ := pgCode(err); state == sqlstateBatchRetry {
		for _, p := range batch {
			p.res, p.err = s.reserveOne(ctx, p.req, p.now, p.ttl)
		}
		return
	}
	if err != nil {
		err = interpretWriteError(err)
		for _, p := range batch {
			p.res, p.err = voucher.Reservation{}, err
		}
	}
}

// reserveBatch runs voucherd_reserve_batch and sets the answers; on error
// no answer is set.
func (s *Store) reserveBatch(ctx context.Context, code string, batch []*pending) error {
	n := len(batch)
	var (
		customers = make([]string, n)
		orders    = make([]string, n)
		amounts   = make([]int64, n)
		nows      = make([]time.Time, n)
		curs      = make([]*string, n)
	)
	for i, p := range batch {
		customers[i], orders[i], amounts[i], nows[i] = p.req.CustomerID, p.req.OrderID, p.req.OrderAmount, p.now
		curs[i] = currencyArg(p.req.Currency)
	}
	ttl := pgtype.Interval{Microseconds: batch[0].ttl.Microseconds(), Valid: true}
	conn, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, qReserveBatch, code, customers, orders, amounts, nows, ttl, curs)
	if err != nil {
		return err
	}
	type answer struct {
		res voucher.Reservation
		err error
		set bool
	}
	answers := make([]answer, n)
	for rows.Next() {
		var (
			res                 voucher.Reservation
			code, reason, facts string
			pos                 int32
			retryMS             int64
			used, total         int32
		)
		if err := scanRedemption(rows, &res.Redemption, &res.Replay, &code, &reason, &facts, &pos,
			&retryMS, &used, &total); err != nil {
			rows.Close()
			return err
		}
		if pos < 1 || int(pos) > n || answers[pos-1].set {
			rows.Close()
			return fmt.Errorf("pgstore: voucherd_reserve_batch answered element %d of %d twice or out of range", pos, n)
		}
		a := &answers[pos-1]
		a.set = true
		switch code {
		case "":
			a.res = withTaken(res, used, total)
		default:
			a.err = rejection(code, reason, facts, retryMS)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i, a := range answers {
		if !a.set {
			return fmt.Errorf("pgstore: voucherd_reserve_batch did not answer element %d of %d", i+1, n)
		}
	}
	for i, p := range batch {
		p.res, p.err = answers[i].res, answers[i].err
	}
	return nil
}

// reserveOne takes one use in its own transaction (voucherd_reserve_one). A
// failure after the statement may have reached the server is answered
// OutcomeUnknown (interpretWriteError).
func (s *Store) reserveOne(ctx context.Context, r voucher.ReserveRequest, now time.Time, ttl time.Duration) (voucher.Reservation, error) {
	var res voucher.Reservation
	var used, total int32
	err := s.rerunRolledBack(ctx, func() error {
		conn, err := s.acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		return scanRedemption(conn.QueryRow(ctx, qReserve,
			r.Code, r.CustomerID, r.OrderID, r.OrderAmount, now,
			pgtype.Interval{Microseconds: ttl.Microseconds(), Valid: true}, currencyArg(r.Currency), windowArg(r.Window)), &res.Redemption, &res.Replay, &used, &total)
	})
	if err != nil {
		return voucher.Reservation{}, interpretWriteError(err)
	}
	return withTaken(res, used, total), nil
}

// withTaken fills res.Taken from the counts a reserve function reports
// for a use it took (total is 0 for a replay).
func withTaken(res voucher.Reservation, used, total int32) voucher.Reservation {
	if !res.Replay && total > 0 {
		res.Taken = &voucher.Stock{Remaining: int64(total) - int64(used), TotalLimit: total}
	}
	return res
}
