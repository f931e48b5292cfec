package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// lostStackReplaceGate is a gate whose Replace of any member of the stack
// orderID runs in Redis and then loses its answer (lostReplaceGate for a
// stack's members).
type lostStackReplaceGate struct {
	voucher.Gate
	orderID string
}

func (g *lostStackReplaceGate) Replace(ctx context.Context, code string, h voucher.Hold, replaces string) (voucher.GateDecision, error) {
	dec, err := g.Gate.Replace(ctx, code, h, replaces)
	if err != nil || !isStackMember(g.orderID, h.OrderID) {
		return dec, err
	}
	return voucher.GateDecision{}, voucher.Unavailable(fmt.Errorf("%w: %w", voucher.ErrGateUnanswered, context.DeadlineExceeded),
		"redis replace %s", code)
}

// isStackMember reports whether memberID is the orderId of a member of
// the stack orderID.
func isStackMember(orderID, memberID string) bool {
	for i := 1; i <= voucher.MaxStackCodes; i++ {
		if voucher.StackMemberOrderID(orderID, i) == memberID {
			return true
		}
	}
	return false
}

// TestRetryOfAConfirmedStackWhileAReplacementOfItIsUndone: in flash-sync
// mode a stack replacing the customer's CONFIRMED stack takes its members'
// uses over in Redis (Gate.Replace) and marks them released there until
// the replacement is undone (Gate.Unreplace): after the store refused its
// write, or by the instance's settle a second or more after a take whose
// answer was lost. A retry of the confirmed stack meanwhile is answered
// from the store, a replay of the CONFIRMED stack (it was ORDER_RELEASED
// from the gate's mark); once the replacement is undone the gate holds the
// stack's uses again and agrees with PostgreSQL.
func TestRetryOfAConfirmedStackWhileAReplacementOfItIsUndone(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"take's answer lost", "write refused late"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := newStack(t, stackOptions{flash: true})
			a := s.createStackableAs("A", map[string]any{"discountAmount": 1000}, 3, stackable)
			b := s.createStackableAs("B", map[string]any{"discountAmount": 500}, 3, stackable)
			r := s.reserveStack("7", "old-1", 20000, a, b)
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			r = s.do(http.MethodPost, "/reservations/old-1/confirm", nil)
			require.Equal(t, http.StatusOK, r.status, string(r.raw))
			first := s.do(http.MethodGet, "/reservations/old-1", nil)
			require.Equal(t, "CONFIRMED", first.str("status"), string(first.raw))

			// Another instance replaces old-1 by new-1, of the same codes.
			req := voucher.StackRequest{CustomerID: "7", OrderID: "new-1", OrderAmount: 20000, Codes: []string{a, b}, ReplacesOrderID: "old-1"}
			var gate voucher.Gate = s.app.gate
			var store voucher.Store = s.app.store
			held := newHeldWriteStore(s.app.store, "new-1")
			if how == "take's answer lost" {
				gate = &lostStackReplaceGate{Gate: s.app.gate, orderID: "new-1"}
			} else {
				store = held
			}
			other, err := voucher.NewService(voucher.ServiceConfig{Store: store, Gate: gate, FlashWrites: voucher.FlashSync,
				WriteTimeout: time.Minute, Instance: "other-instance"})
			require.NoError(t, err)
			answered := make(chan error, 1)
			go func() {
				_, err := other.ReserveStack(ctx, req)
				answered <- err
			}()
			// The first code's member (code order) is marked released in
			// the gate; the second's too when the write is held back.
			marked := []string{a}
			if how == "take's answer lost" {
				err = <-answered
				require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), "%v", err)
			} else {
				marked = append(marked, b)
				select {
				case <-held.entered:
				case err := <-answered:
					t.Fatalf("the replacement was answered before its write: %v", err)
				}
			}
			for i, code := range marked {
				h, found, err := s.app.gate.Lookup(ctx, code, voucher.StackMemberOrderID("old-1", i+1))
				require.NoError(t, err)
				require.True(t, found && h.Released, "the gate let the replacement take %s's use over: %+v", code, h)
			}

			// The customer retries old-1 on this instance.
			r = s.reserveStack("7", "old-1", 20000, a, b)
			require.Equal(t, http.StatusCreated, r.status, "the store holds old-1 CONFIRMED: %s", r.raw)
			require.Equal(t, "CONFIRMED", r.str("status"), string(r.raw))
			require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
			require.Equal(t, first.items(), r.items())
			// Another customer's retry of the orderId is still a conflict.
			r = s.reserveStack("8", "old-1", 20000, a, b)
			require.Equal(t, "ORDER_CONFLICT", r.str("error"), string(r.raw))

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
			for i, code := range []string{a, b} {
				h, found, err := s.app.gate.Lookup(ctx, code, voucher.StackMemberOrderID("old-1", i+1))
				require.NoError(t, err)
				require.True(t, found && !h.Released, "old-1 holds %s's use in the gate again: %+v", code, h)
				_, found, err = s.app.gate.Lookup(ctx, code, voucher.StackMemberOrderID("new-1", i+1))
				require.NoError(t, err)
				require.False(t, found, "new-1 is forgotten")
				st := s.state(code)
				require.Equal(t, int64(st.totalLimit-st.usedCount), s.gateRemaining(code), "%+v", st)
				s.assertConsistentAfterReconcile(code)
			}
			r = s.do(http.MethodGet, "/reservations/old-1", nil)
			require.Equal(t, "CONFIRMED", r.str("status"), string(r.raw))
		})
	}
}
