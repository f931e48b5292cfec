package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// lostReplaceGate is a gate whose Replace of orderID runs in Redis and then
// loses its answer, as a call does whose reply a Redis hang held back past
// the call's timeout.
type lostReplaceGate struct {
	voucher.Gate
	orderID string
}

func (g *lostReplaceGate) Replace(ctx context.Context, code string, h voucher.Hold, replaces string) (voucher.GateDecision, error) {
	dec, err := g.Gate.Replace(ctx, code, h, replaces)
	if err != nil || h.OrderID != g.orderID {
		return dec, err
	}
	return voucher.GateDecision{}, voucher.Unavailable(fmt.Errorf("%w: %w", voucher.ErrGateUnanswered, context.DeadlineExceeded),
		"redis replace %s", code)
}

// heldWriteStore is a store whose Reserve or ReserveStack of orderID waits
// until release is closed: a durable write that is slow to come.
type heldWriteStore struct {
	voucher.Store
	orderID string
	entered chan struct{} // closed when the write of orderID starts waiting
	release chan struct{}
	once    sync.Once
}

func newHeldWriteStore(store voucher.Store, orderID string) *heldWriteStore {
	return &heldWriteStore{Store: store, orderID: orderID, entered: make(chan struct{}), release: make(chan struct{})}
}

// hold waits until release is closed when orderID is the held one.
func (s *heldWriteStore) hold(ctx context.Context, orderID string) error {
	if orderID != s.orderID {
		return nil
	}
	s.once.Do(func() { close(s.entered) })
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *heldWriteStore) Reserve(ctx context.Context, r voucher.ReserveRequest, now time.Time, ttl time.Duration) (voucher.Reservation, error) {
	if err := s.hold(ctx, r.OrderID); err != nil {
		return voucher.Reservation{}, err
	}
	return s.Store.Reserve(ctx, r, now, ttl)
}

func (s *heldWriteStore) ReserveStack(ctx context.Context, r voucher.StackRequest, now time.Time, ttl time.Duration) (voucher.Stack, error) {
	if err := s.hold(ctx, r.OrderID); err != nil {
		return voucher.Stack{}, err
	}
	return s.Store.ReserveStack(ctx, r, now, ttl)
}

// TestRetryOfAConfirmedOrderWhileAReplacementOfItIsUndone: in flash-sync
// mode the gate is not told of confirmations, so a replacement naming the
// customer's CONFIRMED order takes its use over in Redis and marks it
// released there until the replacement is undone (Gate.Unreplace): after
// the store refused its write, or, when the take's answer was lost (a
// Redis hang), by the instance's settle a second or more later. A retry of
// the confirmed order on another instance meanwhile was answered
// ORDER_RELEASED from that mark (the fault suite's
// TestFaults/sync/budget/seed=680591, 0.3 s after a Redis hang healed),
// for an order PostgreSQL holds CONFIRMED. The store answers it now: a
// replay of the confirmed order; and once the replacement is undone the
// gate holds the order's use again and agrees with PostgreSQL.
func TestRetryOfAConfirmedOrderWhileAReplacementOfItIsUndone(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"take's answer lost", "write refused late"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := newStack(t, stackOptions{flash: true})
			code := s.createVoucher(voucherSpec{TotalLimit: 3, PerUserLimit: 1})
			r := s.reserve(code, 7, "old-1", 5000)
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			s.confirm(code, "old-1")

			// Another instance replaces old-1 by new-1.
			req := voucher.ReserveRequest{Code: code, CustomerID: "7", OrderID: "new-1", OrderAmount: 5000, ReplacesOrderID: "old-1"}
			var gate voucher.Gate = s.app.gate
			var store voucher.Store = s.app.store
			held := newHeldWriteStore(s.app.store, "new-1")
			if how == "take's answer lost" {
				gate = &lostReplaceGate{Gate: s.app.gate, orderID: "new-1"}
			} else {
				store = held
			}
			other, err := voucher.NewService(voucher.ServiceConfig{Store: store, Gate: gate, FlashWrites: voucher.FlashSync,
				WriteTimeout: time.Minute, Instance: "other-instance"})
			require.NoError(t, err)
			answered := make(chan error, 1)
			go func() {
				_, err := other.Reserve(ctx, req)
				answered <- err
			}()
			if how == "take's answer lost" {
				err = <-answered
				require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), "%v", err)
			} else {
				select {
				case <-held.entered:
				case err := <-answered:
					t.Fatalf("the replacement was answered before its write: %v", err)
				}
			}
			h, found, err := s.app.gate.Lookup(ctx, code, "old-1")
			require.NoError(t, err)
			require.True(t, found && h.Released, "the gate let the replacement take old-1's use over: %+v", h)

			// The customer retries old-1 on this instance.
			r = s.reserve(code, 7, "old-1", 5000)
			require.Equal(t, http.StatusCreated, r.status, "the store holds old-1 CONFIRMED: %s", r.raw)
			require.Equal(t, "CONFIRMED", r.str("status"), string(r.raw))

			// The replacement is undone.
			if how == "take's answer lost" {
				time.Sleep(1100 * time.Millisecond)
				n, err := other.SettleUnknown(ctx)
				require.NoError(t, err)
				require.Equal(t, 1, n)
			} else {
				close(held.release)
				err := <-answered
				require.True(t, voucher.IsCode(err, voucher.CodeReplacedOrderNotHeld), "%v", err)
			}
			h, found, err = s.app.gate.Lookup(ctx, code, "old-1")
			require.NoError(t, err)
			require.True(t, found && !h.Released, "old-1 holds its use in the gate again: %+v", h)
			_, found, err = s.app.gate.Lookup(ctx, code, "new-1")
			require.NoError(t, err)
			require.False(t, found, "new-1 is forgotten")
			st := s.state(code)
			require.Equal(t, int64(st.totalLimit-st.usedCount), s.gateRemaining(code), "%+v", st)
			s.assertConsistentAfterReconcile(code)
		})
	}
}
