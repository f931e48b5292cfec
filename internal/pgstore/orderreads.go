package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/voucherd/voucherd/internal/voucher"
)

var qOrdersGet = mustQuery("orders_get")

// maxOrderReads bounds the orderIds one combined lookup asks for.
const maxOrderReads = 256

// orderReadTimeout bounds one combined lookup; it runs detached from its
// callers, each of which stops waiting when its own context ends.
const orderReadTimeout = 5 * time.Second

// orderReads combines concurrent Order calls: the lookups that arrive while
// one statement is in flight are answered together by the next, so that a
// Kafka-mode sale asks PostgreSQL once per batch rather than once per
// reservation. At most one statement is in flight; mu guards waiting and
// running.
type orderReads struct {
	mu      sync.Mutex
	waiting []*orderRead
	running bool
}

// orderRead is one caller's lookup; done is closed once row, found and err
// are set.
type orderRead struct {
	id    string
	done  chan struct{}
	row   voucher.Redemption
	found bool
	err   error
}

// lookup queues orderID and waits for its answer.
func (s *Store) lookup(ctx context.Context, orderID string) (voucher.Redemption, bool, error) {
	r := &orderRead{id: orderID, done: make(chan struct{})}
	o := &s.reads
	o.mu.Lock()
	o.waiting = append(o.waiting, r)
	if !o.running {
		o.running = true
		go s.runOrderReads()
	}
	o.mu.Unlock()
	select {
	case <-r.done:
		return r.row, r.found, r.err
	case <-ctx.Done():
		return voucher.Redemption{}, false, voucher.Unavailable(ctx.Err(), "waiting for the database to look order %s up", orderID)
	}
}

// runOrderReads answers the waiting lookups, a batch per statement, until
// none is left.
func (s *Store) runOrderReads() {
	o := &s.reads
	for {
		o.mu.Lock()
		batch := o.waiting[:min(len(o.waiting), maxOrderReads)]
		o.waiting = o.waiting[len(batch):]
		if len(batch) == 0 {
			o.waiting, o.running = nil, false
			o.mu.Unlock()
			return
		}
		o.mu.Unlock()
		s.readOrders(batch)
	}
}

// readOrders answers batch with one statement.
func (s *Store) readOrders(batch []*orderRead) {
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	ids := make([]string, len(batch))
	for i, r := range batch {
		ids[i] = r.id
	}
	ctx, cancel := context.WithTimeout(context.Background(), orderReadTimeout)
	defer cancel()
	// An unnamed statement: PostgreSQL plans it for these ids and the
	// table's current size on each call. A prepared one would soon reuse a
	// generic plan, and one made while the table was nearly empty scans it
	// whole (docs/storage.md).
	rows, err := s.pool.Query(ctx, qOrdersGet, pgx.QueryExecModeCacheDescribe, ids)
	if err != nil {
		s.failReads(batch, err)
		return
	}
	defer rows.Close()
	found := make(map[string]voucher.Redemption, len(batch))
	for rows.Next() {
		var red voucher.Redemption
		var since *time.Time
		if err := scanRedemption(rows, &red, &since); err != nil {
			s.failReads(batch, err)
			return
		}
		red.HeldSince = heldSince(since)
		found[red.OrderID] = red
	}
	if err := rows.Err(); err != nil {
		s.failReads(batch, err)
		return
	}
	for _, r := range batch {
		r.row, r.found = found[r.id]
	}
}

func (s *Store) failReads(batch []*orderRead, err error) {
	err = interpretError(err)
	for _, r := range batch {
		r.err = err
	}
}
