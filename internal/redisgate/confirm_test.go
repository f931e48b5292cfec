package redisgate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// A hold marked confirmed keeps its use, is no longer one a replacement may
// take over, and is still given back by a release (the store's confirmation
// failed and the order was released instead). Confirm answers what it found
// for every other state and changes nothing then.
func TestConfirmMarksHoldAgainstReplacement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	v := testVoucher("CONFIRMG", 3, 2)
	loadEmpty(t, g, v)

	found, err := g.Confirm(ctx, v.Code, "nobody", "")
	require.NoError(t, err)
	require.Equal(t, voucher.GateConfirmUnknown, found, "unknown orderId")
	found, err = g.Confirm(ctx, "NOTLOADED", "a", "")
	require.NoError(t, err)
	require.Equal(t, voucher.GateConfirmUnknown, found, "voucher not loaded")

	d, err := g.Reserve(ctx, v.Code, v.PerUserLimit, testHold("a", 1))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	found, err = g.Confirm(ctx, v.Code, "a", "K-1")
	require.NoError(t, err)
	require.Equal(t, voucher.GateConfirmUnknown, found, "another campaign code")
	before, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	for range 2 {
		found, err = g.Confirm(ctx, v.Code, "a", "")
		require.NoError(t, err)
		require.Equal(t, voucher.GateConfirmMarked, found)
	}
	h, ok, err := g.Lookup(ctx, v.Code, "a")
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, h.Confirmed)
	require.False(t, h.Pending || h.Released)
	after, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.Equal(t, before.Remaining, after.Remaining, "a confirmation keeps the use")
	require.Equal(t, before.Users, after.Users)

	d, err = g.Replace(ctx, v.Code, testHold("b", 1), "a")
	require.NoError(t, err)
	require.Equal(t, voucher.GateNotHeld, d.Outcome, "a confirmed order is not replaced")
	d, err = g.Reserve(ctx, v.Code, v.PerUserLimit, testHold("a", 1))
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome, "a retried reservation of a confirmed order is a replay")

	released, err := g.Release(ctx, v.Code, "a", voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, released, "a confirmed hold's use is given back by a release")
	found, err = g.Confirm(ctx, v.Code, "a", "")
	require.NoError(t, err)
	require.Equal(t, voucher.GateConfirmReleased, found)

	pending := testHold("p", 2)
	pending.Pending = true
	d, err = g.Reserve(ctx, v.Code, v.PerUserLimit, pending)
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	found, err = g.Confirm(ctx, v.Code, "p", "")
	require.NoError(t, err)
	require.Equal(t, voucher.GateConfirmPending, found)
	h, _, err = g.Lookup(ctx, v.Code, "p")
	require.NoError(t, err)
	require.True(t, h.Pending, "a pending hold is left as it is")
}

// A replacement's hold keeps the order it replaced (written to the store
// from the gate, it must be the replacement), and a load from the store
// marks CONFIRMED rows confirmed, so that no replacement takes them over
// after Redis lost the voucher.
func TestReplacementHoldAndConfirmedRowsInTheGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	v := testVoucher("REPLHOLD", 5, 2)
	now := time.Now().UTC().Truncate(time.Millisecond)
	row := func(id string, st voucher.Status) voucher.Redemption {
		return voucher.Redemption{OrderID: id, VoucherCode: v.Code, CustomerID: "1", OrderAmount: 250000,
			DiscountAmount: 100000, Status: st, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(15 * time.Minute)}
	}
	wrote, err := g.Load(ctx, voucher.Snapshot{Voucher: v, Held: 2, Customers: map[string]int32{"1": 2},
		Orders: []voucher.Redemption{row("c", voucher.StatusConfirmed), row("r", voucher.StatusReserved)}})
	require.NoError(t, err)
	require.True(t, wrote)

	d, err := g.Replace(ctx, v.Code, testHold("c2", 1), "c")
	require.NoError(t, err)
	require.Equal(t, voucher.GateNotHeld, d.Outcome, "a CONFIRMED row is loaded confirmed")

	d, err = g.Replace(ctx, v.Code, testHold("r2", 1), "r")
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	h, ok, err := g.Lookup(ctx, v.Code, "r2")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "r", h.Replaces)
}
