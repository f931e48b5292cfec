package kafkalog

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// waveQueue sends the reservation events of a Log with Config.SendWhenIdle:
// the events published while a flight (the produce requests of the events
// gathered before it) awaits its acknowledgements wait in the queue and
// leave together as the next flight once it is answered, as the store's
// write combining uses the write in flight as its batching window. No
// linger is waited out: an event published while nothing flies leaves at
// once. The client is made with kgo.ManualFlushing, so only a flight's
// Flush sends. mu guards waiting and flying; one goroutine (fly) runs the
// flights while flying is true.
type waveQueue struct {
	cl      *kgo.Client
	timeout time.Duration

	mu      sync.Mutex
	waiting []*waveRecord
	flying  bool
}

// waveRecord is one event waiting for its flight; result receives the
// client's verdict once.
type waveRecord struct {
	rec    *kgo.Record
	ctx    context.Context // the record's context: it expires after the timeout
	cancel context.CancelFunc
	result chan error
}

// publish queues rec and waits for its acknowledgement, at most timeout, as
// produceWait does: the record's context expires after timeout, so that a
// record not yet sent by then (still queued, or buffered in the client) is
// failed by the client and never written later, and a wait that ends first
// is ErrOutcomeUnknown.
func (q *waveQueue) publish(ctx context.Context, rec *kgo.Record) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.timeout)
	w := &waveRecord{rec: rec, ctx: rctx, cancel: cancel, result: make(chan error, 1)}
	q.mu.Lock()
	q.waiting = append(q.waiting, w)
	start := !q.flying
	q.flying = true
	q.mu.Unlock()
	if start {
		go q.fly() //nolint:gosec // G118: the flights serve every caller queued, not only the one that started them, so they outlive its context
	}
	timer := time.NewTimer(q.timeout)
	defer timer.Stop()
	select {
	case err := <-w.result:
		return err
	case <-timer.C:
		return fmt.Errorf("%w (waited %s)", ErrOutcomeUnknown, q.timeout)
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
	}
}

// fly sends the waiting records, a flight at a time, until none is left.
// A flight hands its records to the client and flushes them: Flush sends
// them at once and returns when each has its verdict (or after the
// timeout, when a sent record's answer is late; such a record keeps its
// promise, and the next flight's Flush waits for it too).
func (q *waveQueue) fly() {
	for {
		q.mu.Lock()
		flight := q.waiting
		q.waiting = nil
		if len(flight) == 0 {
			q.flying = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		for _, w := range flight {
			q.cl.TryProduce(w.ctx, w.rec, func(_ *kgo.Record, err error) {
				w.cancel()
				w.result <- err
			})
		}
		ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
		_ = q.cl.Flush(ctx)
		cancel()
	}
}
