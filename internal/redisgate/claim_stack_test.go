package redisgate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// TestClaimStack: a stack's claim of an orderId and a code's exclude each
// other; the record reads back whole (a replacing stack's with the order
// it replaces); it is dropped only by its own value.
func TestClaimStack(t *testing.T) {
	t.Parallel()
	g := newGate(t, Config{})
	ctx := t.Context()
	until := time.Now().Add(time.Hour)
	rec := voucher.StackRecord{OrderID: "st-1", CustomerID: "C 7", OrderAmount: 20000, Codes: []string{"B", "A"},
		At: time.Now().UTC().Truncate(time.Millisecond)}

	owner, err := g.OrderOwner(ctx, "st-1")
	require.NoError(t, err)
	require.Equal(t, voucher.OrderOwner{}, owner, "nothing claims it yet")
	owner, err = g.ClaimStack(ctx, "st-1", rec, until)
	require.NoError(t, err)
	require.Equal(t, &rec, owner.Stack)
	owner, err = g.OrderOwner(ctx, "st-1")
	require.NoError(t, err)
	require.Equal(t, voucher.OrderOwner{Stack: &rec}, owner)

	code, err := g.ClaimOrder(ctx, "st-1", "A", until)
	require.NoError(t, err)
	require.Empty(t, code, "a code's claim of a stack's orderId names no voucher")
	other := rec
	other.Codes = []string{"A"}
	owner, err = g.ClaimStack(ctx, "st-1", other, until)
	require.NoError(t, err)
	require.True(t, owner.Stack.Same(rec), "the first claim stands")

	require.NoError(t, g.UnclaimStack(ctx, "st-1", other))
	owner, err = g.OrderOwner(ctx, "st-1")
	require.NoError(t, err)
	require.NotNil(t, owner.Stack, "another record's unclaim drops nothing")
	require.NoError(t, g.UnclaimStack(ctx, "st-1", rec))
	owner, err = g.OrderOwner(ctx, "st-1")
	require.NoError(t, err)
	require.Equal(t, voucher.OrderOwner{}, owner)

	code, err = g.ClaimOrder(ctx, "single-1", "A", until)
	require.NoError(t, err)
	require.Equal(t, "A", code)
	owner, err = g.ClaimStack(ctx, "single-1", rec, until)
	require.NoError(t, err)
	require.Equal(t, voucher.OrderOwner{Code: "A"}, owner, "a code's claim stands against a stack")

	// A replacing stack's record reads back with the order it replaces.
	replacing := rec
	replacing.OrderID, replacing.Replaces = "st-2", "st-1"
	owner, err = g.ClaimStack(ctx, "st-2", replacing, until)
	require.NoError(t, err)
	require.Equal(t, &replacing, owner.Stack)
	owner, err = g.OrderOwner(ctx, "st-2")
	require.NoError(t, err)
	require.Equal(t, "st-1", owner.Stack.Replaces)
	require.NoError(t, g.UnclaimStack(ctx, "st-2", replacing))
	owner, err = g.OrderOwner(ctx, "st-2")
	require.NoError(t, err)
	require.Equal(t, voucher.OrderOwner{}, owner)
}
