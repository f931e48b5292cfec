package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// TestStackLostWriteSettled: in flash-sync mode the gate took both
// members of a stack, then the connection broke right after the store's
// write was sent, so its outcome is unknown. The answer is 503 with
// outcomeUnknown and both uses stay held (not given back blind: the
// write may have committed); without a retry the instance settles each
// member (syncWrites.unsettled): fenced in the store (a RELEASED row under
// the member's orderId) and given back in the gate, so that the stack
// ends with none of its members held.
func TestStackLostWriteSettled(t *testing.T) {
	t.Parallel()
	s, proxy := newProxiedStack(t, stackOptions{flash: true})
	a := s.createStackableAs("A", map[string]any{"discountAmount": 1000}, 5, stackable)
	b := s.createStackableAs("B", map[string]any{"discountAmount": 1000}, 5, stackable)
	r := s.do(http.MethodPost, "/validation", map[string]any{"customerId": "7", "orderAmount": 20000, "codes": []string{a, b}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))

	cut := proxy.CutRequestContaining([]byte("lost-stack-1"))
	r = s.reserveStack("7", "lost-stack-1", 20000, a, b)
	testenv.WaitCut(t, cut)
	requireOutcomeUnknown(t, r)
	require.Equal(t, "", r.str("failedCode"), "an unknown outcome is the stack's, not a code's")
	require.Equal(t, int64(4), s.gateRemaining(a), "A's use stays held until settled")
	require.Equal(t, int64(4), s.gateRemaining(b), "B's use stays held until settled")

	deadline := time.Now().Add(10 * time.Second)
	for s.gateRemaining(a) != 5 || s.gateRemaining(b) != 5 {
		require.True(t, time.Now().Before(deadline), "not settled within 10s: A %d, B %d left", s.gateRemaining(a), s.gateRemaining(b))
		time.Sleep(50 * time.Millisecond)
	}
	for i, code := range []string{a, b} {
		st := s.state(code)
		require.Zero(t, st.reserved, code)
		require.Equal(t, 1, st.released, "%s: the member is fenced in the store", code)
		gs, err := s.app.gate.Inspect(t.Context(), code)
		require.NoError(t, err)
		require.True(t, gs.Orders[voucher.StackMemberOrderID("lost-stack-1", i+1)].Released, "%s: the member is marked released in the gate", code)
		s.assertConsistent(code)
	}
	// A late retry takes nothing: its members' orderIds are fenced.
	r = s.reserveStack("7", "lost-stack-1", 20000, a, b)
	require.Equal(t, http.StatusConflict, r.status, string(r.raw))
	require.Equal(t, "ORDER_RELEASED", r.str("error"), string(r.raw))
	require.Equal(t, int64(5), s.gateRemaining(a))
	require.Equal(t, int64(5), s.gateRemaining(b))
}
