package redisgate

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Rediscount rewrites a held order's discount and the budget's held amount
// in one script: the use stays held (remaining unchanged, competing takes
// refused even while it runs again and again); a released, unknown or
// unchanged order is left alone; a voucher without a budget gets none.
func TestRediscount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("REDISC", 1, 10)
	v.Budget = voucher.Budget{Amount: 10_000, Clip: true}
	loadEmpty(t, g, v)
	d, err := g.Reserve(ctx, "REDISC", 10, budgetHold("rd-1", 1, 3_000, v.Budget))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)

	changed, err := g.Rediscount(ctx, "REDISC", "rd-1", 1_000)
	require.NoError(t, err)
	require.True(t, changed)
	_, held := budgetHeld(t, g, "REDISC")
	require.Equal(t, int64(1_000), held)
	h, found, err := g.Lookup(ctx, "REDISC", "rd-1")
	require.NoError(t, err)
	require.True(t, found)
	require.False(t, h.Released)
	require.Equal(t, int64(1_000), h.DiscountAmount)
	st, err := g.Inspect(ctx, "REDISC")
	require.NoError(t, err)
	require.Zero(t, st.Remaining, "the use stays held")
	require.EqualValues(t, 1, st.Held())

	changed, err = g.Rediscount(ctx, "REDISC", "rd-1", 1_000)
	require.NoError(t, err)
	require.False(t, changed, "unchanged")
	changed, err = g.Rediscount(ctx, "REDISC", "nosuch", 500)
	require.NoError(t, err)
	require.False(t, changed, "unknown")
	_, err = g.Rediscount(ctx, "REDISC", "rd-1", -1)
	require.True(t, voucher.IsCode(err, voucher.CodeInvalidRequest), "%v", err)

	// Competing takes meet no free use while the discount moves.
	var taken atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				d, err := g.Reserve(ctx, "REDISC", 10, budgetHold(fmt.Sprintf("rd-c%d-%d", w, i), int64(10+w), 100, v.Budget))
				if err == nil && d.Outcome == voucher.GateTaken {
					taken.Add(1)
				}
			}
		}()
	}
	for i := range 200 {
		_, err := g.Rediscount(ctx, "REDISC", "rd-1", int64(1_000+i%2*500))
		require.NoError(t, err)
	}
	wg.Wait()
	require.Zero(t, taken.Load(), "no competing order took the use")
	_, held = budgetHeld(t, g, "REDISC")
	h, _, err = g.Lookup(ctx, "REDISC", "rd-1")
	require.NoError(t, err)
	require.Equal(t, h.DiscountAmount, held, "the budget holds the hold's discount")

	released, err := g.Release(ctx, "REDISC", "rd-1", voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, released)
	changed, err = g.Rediscount(ctx, "REDISC", "rd-1", 700)
	require.NoError(t, err)
	require.False(t, changed, "released")
	_, held = budgetHeld(t, g, "REDISC")
	require.Zero(t, held)

	// Without a budget only the hold changes.
	plain := testVoucher("REDISCP", 5, 10)
	loadEmpty(t, g, plain)
	d, err = g.Reserve(ctx, "REDISCP", 10, testHold("rp-1", 1))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	changed, err = g.Rediscount(ctx, "REDISCP", "rp-1", 42)
	require.NoError(t, err)
	require.True(t, changed)
	h, _, err = g.Lookup(ctx, "REDISCP", "rp-1")
	require.NoError(t, err)
	require.Equal(t, int64(42), h.DiscountAmount)
	c := rawClient(t, g)
	n, err := c.Do(ctx, c.B().Exists().Key(keysFor(g.cfg.KeyPrefix, "REDISCP").budget).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "no budget created")
}
