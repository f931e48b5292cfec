package redisgate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Extend moves a held or pending hold's expiry later, never earlier, and
// leaves released and unknown orderIds alone; replays answer the new expiry,
// also from the sold-out cache.
func TestExtend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("EXT", 2, 1)
	loadEmpty(t, g, v)

	h1 := testHold("o-1", 1)
	h1.Owner = "1234567890" // an owner of digits follows the expiry
	d, err := g.Reserve(ctx, v.Code, 1, h1)
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)

	later := h1.ExpiresAt.Add(20 * time.Minute)
	changed, err := g.Extend(ctx, v.Code, "o-1", later)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = g.Extend(ctx, v.Code, "o-1", later)
	require.NoError(t, err)
	require.False(t, changed, "the same expiry again")
	changed, err = g.Extend(ctx, v.Code, "o-1", h1.ExpiresAt)
	require.NoError(t, err)
	require.False(t, changed, "never earlier")
	got, found, err := g.Lookup(ctx, v.Code, "o-1")
	require.NoError(t, err)
	require.True(t, found)
	want := h1
	want.ExpiresAt = later
	require.Equal(t, want, got)

	// A pending hold (Kafka mode) keeps its state.
	h2 := testHold("o-2", 2)
	h2.Pending = true
	h2.Owner = "inst-2a"
	_, err = g.Reserve(ctx, v.Code, 1, h2)
	require.NoError(t, err)
	changed, err = g.Extend(ctx, v.Code, "o-2", later)
	require.NoError(t, err)
	require.True(t, changed)
	got, _, err = g.Lookup(ctx, v.Code, "o-2")
	require.NoError(t, err)
	require.True(t, got.Pending)
	require.Equal(t, later, got.ExpiresAt)
	require.Equal(t, "inst-2a", got.Owner, "the owner is kept")

	// Sold out now: a replay answered from the sold-out cache has the new
	// expiry once extended again.
	d, err = g.Reserve(ctx, v.Code, 1, testHold("o-3", 3))
	require.NoError(t, err)
	require.Equal(t, voucher.GateSoldOut, d.Outcome)
	latest := later.Add(time.Minute)
	changed, err = g.Extend(ctx, v.Code, "o-1", latest)
	require.NoError(t, err)
	require.True(t, changed)
	for range 3 {
		d, err = g.Reserve(ctx, v.Code, 1, h1)
		require.NoError(t, err)
		require.Equal(t, voucher.GateReplay, d.Outcome)
		require.Equal(t, latest, d.Hold.ExpiresAt)
	}

	// Released and unknown orderIds are left alone.
	_, err = g.Release(ctx, v.Code, "o-1", voucher.ReleaseMark)
	require.NoError(t, err)
	changed, err = g.Extend(ctx, v.Code, "o-1", latest.Add(time.Hour))
	require.NoError(t, err)
	require.False(t, changed)
	got, _, err = g.Lookup(ctx, v.Code, "o-1")
	require.NoError(t, err)
	require.True(t, got.Released)
	require.Equal(t, latest, got.ExpiresAt)
	changed, err = g.Extend(ctx, v.Code, "nope", latest)
	require.NoError(t, err)
	require.False(t, changed)

	_, err = g.Extend(ctx, "bad code!", "o-1", latest)
	require.True(t, voucher.IsCode(err, voucher.CodeInvalidRequest), "%v", err)
}
