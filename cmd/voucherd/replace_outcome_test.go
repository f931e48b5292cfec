package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// TestReplacementLostWriteSettled: in flash-sync mode a replacement (of a
// single by a single or by a stack, of a stack by a stack keeping one
// flash code) whose
// store write ends with an unknown outcome is settled by the instance
// without a retry, and afterwards the gate counts what PostgreSQL holds
// for every code and holds a use for exactly the orders PostgreSQL holds:
// the write committed (its answer lost: the replacement stands, the
// replaced codes it does not keep are given back), it never reached the
// store (fenced: the new order released; a replaced single is released
// with it, as the gate answered it since the move, a replaced stack holds
// every use again), the replaced order confirmed or released before the
// settle. A replaced stack is held or released whole.
func TestReplacementLostWriteSettled(t *testing.T) {
	t.Parallel()
	for _, outcome := range []string{"committed", "not committed", "replaced order confirmed", "replaced order released"} {
		for _, shape := range []string{"single", "stack", "single by stack"} {
			t.Run(shape+"/"+outcome, func(t *testing.T) {
				t.Parallel()
				s, proxy := newProxiedStack(t, stackOptions{flash: true})
				testReplacementLostWrite(t, s, proxy, shape, outcome)
			})
		}
	}
}

// testReplacementLostWrite is one case of TestReplacementLostWriteSettled.
func testReplacementLostWrite(t *testing.T, s *stack, proxy *testenv.Proxy, shape, outcome string) {
	a := s.createStackableAs("A", map[string]any{"discountAmount": 1000}, 5, stackable)
	b := s.createStackableAs("B", map[string]any{"discountAmount": 500}, 5, stackable)
	c := s.createStackableAs("C", map[string]any{"discountAmount": 200}, 5, stackable)
	codes := []string{a, b, c}
	// The orders of each code the test looks at, by the path that names them.
	orders := map[string][]string{}
	var r response
	switch shape {
	case "single":
		r = s.reserve(a, 7, "old-1", 20000)
		orders[a] = []string{"old-1", "new-1"}
	case "single by stack":
		r = s.reserve(a, 7, "old-1", 20000)
		orders[a] = []string{"old-1", voucher.StackMemberOrderID("new-1", 1)}
		orders[c] = []string{voucher.StackMemberOrderID("new-1", 2)}
	default:
		r = s.reserveStack("7", "old-1", 20000, a, b)
		orders[a] = []string{voucher.StackMemberOrderID("old-1", 1), voucher.StackMemberOrderID("new-1", 1)}
		orders[b] = []string{voucher.StackMemberOrderID("old-1", 2)}
		orders[c] = []string{voucher.StackMemberOrderID("new-1", 2)}
	}
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))

	var cut <-chan struct{}
	switch {
	case outcome == "committed" && shape == "single":
		// One statement, committed on its own.
		cut = proxy.CutAnswerContaining([]byte("new-1"), 300*time.Millisecond)
	case outcome == "committed":
		// The stack's transaction: the answer to the first COMMIT after
		// arming (another transaction's would let the stack through: 201,
		// and the test fails rather than pass wrongly).
		cut = proxy.CutAnswerContaining([]byte("COMMIT\x00"), 300*time.Millisecond)
	default:
		cut = proxy.CutRequestContaining([]byte("new-1"))
	}
	if shape == "single" {
		r = s.replace(a, 7, "new-1", "old-1", 20000)
	} else {
		r = s.do(http.MethodPost, "/reservations", map[string]any{"customerId": "7", "orderId": "new-1",
			"orderAmount": 20000, "codes": []string{a, c}, "replacesOrderId": "old-1"})
	}
	testenv.WaitCut(t, cut)
	requireOutcomeUnknown(t, r)
	written := time.Now()

	old, next := "/reservations/old-1", "/reservations/new-1"
	switch shape {
	case "single":
		old, next = "/vouchers/"+a+old, "/vouchers/"+a+next
	case "single by stack":
		old = "/vouchers/" + a + old
	}
	switch outcome {
	case "replaced order confirmed":
		r = s.do(http.MethodPost, old+"/confirm", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
	case "replaced order released":
		r = s.do(http.MethodDelete, old, nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
	}

	// Settled by the instance's liveness job; a call here settles what it
	// has not yet, and none is left once a call past the delay finds none.
	time.Sleep(time.Until(written.Add(1500 * time.Millisecond)))
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := s.app.svc.SettleUnknown(t.Context())
		if err == nil && n == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "not settled within 10s: %v", err)
		time.Sleep(50 * time.Millisecond)
	}

	for _, code := range codes {
		st := s.state(code)
		require.Equal(t, int64(st.totalLimit-st.usedCount), s.gateRemaining(code), "gate and PostgreSQL agree on %s: %+v", code, st)
		s.assertConsistent(code)
		for _, id := range orders[code] {
			row, err := s.app.store.Order(t.Context(), id)
			held := err == nil && row.Status.Held()
			if err != nil {
				require.True(t, voucher.IsCode(err, voucher.CodeReservationNotFound), "%v", err)
			}
			h, found, err := s.app.gate.Lookup(t.Context(), code, id)
			require.NoError(t, err)
			require.Equal(t, held, found && !h.Released, "%s on %s: PostgreSQL %+v, gate %+v", id, code, row, h)
		}
	}
	if shape == "stack" {
		// All or none: the replaced stack is held whole or released whole.
		r = s.do(http.MethodGet, old, nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		for _, it := range r.body["items"].([]any) {
			require.Equal(t, r.str("status"), it.(map[string]any)["status"], "the replaced stack: %s", r.raw)
		}
	}
	if outcome == "committed" {
		r = s.do(http.MethodGet, next, nil)
		require.Equal(t, "RESERVED", r.str("status"), "the replacement stands: %s", r.raw)
	}
}
