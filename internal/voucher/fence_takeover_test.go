package voucher

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fenceHold takes another instance's pending hold over in the gate before
// it fences the order in the store, so that the hold's writer, resumed
// after a stall, cannot commit it and answer 201 in between: a hold the
// writer made durable first stands (kept, no fence); a taken-over hold, or
// one the gate no longer holds for either, is fenced as before. A hold of
// this instance, or a durable one, is not taken over.
func TestFenceHoldTakesAnotherWritersPendingHoldOverFirst(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name     string
		owner    string
		pending  bool
		answer   GateTakeOver
		takeover bool // TakeOver asked
		kept     bool
	}{
		{name: "taken over", owner: "writer", pending: true, answer: GateTakenOver, takeover: true},
		{name: "made durable by its writer first", owner: "writer", pending: true, answer: GateHoldDurable, takeover: true, kept: true},
		{name: "gone from the gate", owner: "writer", pending: true, answer: GateHoldGone, takeover: true},
		{name: "this instance's", owner: "fencer", pending: true},
		{name: "durable when read", owner: "writer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			answer := tc.answer
			g := &fakeGate{takeOver: &answer}
			st := &fakeStore{voucher: flashVoucher()}
			svc, err := NewService(ServiceConfig{Store: st, Gate: g, Events: &fakeLog{}, FlashWrites: FlashKafka, Instance: "fencer"})
			require.NoError(t, err)
			h := Hold{OrderID: "o-1", CustomerID: "7", OrderAmount: 100, DiscountAmount: 1, ReservedAt: now,
				ExpiresAt: now.Add(time.Hour), Owner: tc.owner, Pending: tc.pending}
			kept, err := svc.fenceHold(context.Background(), "SALE", h)
			require.NoError(t, err)
			require.Equal(t, tc.kept, kept)
			require.Equal(t, tc.takeover, g.takeovers == 1, "TakeOver asked")
			if tc.kept {
				require.Empty(t, st.abandoned, "a durable hold is not fenced")
				require.Empty(t, g.releases)
			} else {
				require.Equal(t, []string{"o-1"}, st.abandoned, "fenced in the store")
				require.Equal(t, []ReleaseMode{ReleaseMark}, g.releases, "given back in the gate")
			}
		})
	}
}
