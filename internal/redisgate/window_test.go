package redisgate

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// windowCount reads the gate's count of the occurrence starting at w.
func windowCount(t *testing.T, g *Gate, code string, w time.Time) int64 {
	t.Helper()
	c := rawClient(t, g)
	n, err := c.Do(context.Background(), c.B().Hget().Key(keysFor(g.cfg.KeyPrefix, code).budget).Field("w:"+windowArg(w)).Build()).AsInt64()
	if err != nil {
		require.True(t, rueidis.IsRedisNil(err), "%v", err)
		return 0
	}
	return n
}

func windowHold(orderID string, customer int64, w time.Time, limit int32) voucher.Hold {
	h := testHold(orderID, customer)
	h.Window, h.WindowLimit = w, limit
	return h
}

// A quota of 2 per occurrence: two takes, the third refused (nothing
// taken, the voucher not cached as sold out); another occurrence has its
// own quota; a release gives the use back to the hold's occurrence, a
// replacement moves it; validate.lua answers the same; a load counts the
// snapshot's holds per occurrence.
func TestReserveWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("WIN", 100, 10)
	loadEmpty(t, g, v)
	w1 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	w2 := w1.Add(24 * time.Hour)
	for i := range 2 {
		d, err := g.Reserve(ctx, "WIN", 10, windowHold(orderID(i), 1, w1, 2))
		require.NoError(t, err)
		require.Equal(t, voucher.GateTaken, d.Outcome)
	}
	d, err := g.Reserve(ctx, "WIN", 10, windowHold(orderID(2), 1, w1, 2))
	require.NoError(t, err)
	require.Equal(t, voucher.GateWindowFull, d.Outcome)
	require.Equal(t, int64(98), d.Remaining, "nothing taken")
	require.Nil(t, g.soldOut.get("WIN"), "a full occurrence is not a sold-out voucher")
	vd, err := g.Validate(ctx, "WIN", 10, "", "1", "", voucher.TakeLimits{WindowLimit: 2, Window: w1})
	require.NoError(t, err)
	require.Equal(t, voucher.GateWindowFull, vd.Outcome)
	vd, err = g.Validate(ctx, "WIN", 10, "", "1", "", voucher.TakeLimits{WindowLimit: 2, Window: w2})
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, vd.Outcome)

	d, err = g.Reserve(ctx, "WIN", 10, windowHold(orderID(3), 1, w2, 2))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	require.Equal(t, []int64{2, 1}, []int64{windowCount(t, g, "WIN", w1), windowCount(t, g, "WIN", w2)})
	h, found, err := g.Lookup(ctx, "WIN", orderID(0))
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, w1, h.Window, "the hold keeps its occurrence")

	// Released during the second occurrence: back to the first.
	released, err := g.Release(ctx, "WIN", orderID(0), voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, released)
	require.Equal(t, []int64{1, 1}, []int64{windowCount(t, g, "WIN", w1), windowCount(t, g, "WIN", w2)})

	// A replacement in the second occurrence of a hold of the first: the
	// first gets its use back, the second takes one; one in the same full
	// occurrence keeps it.
	d, err = g.Replace(ctx, "WIN", windowHold(orderID(4), 1, w2, 2), orderID(1))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	require.Equal(t, []int64{0, 2}, []int64{windowCount(t, g, "WIN", w1), windowCount(t, g, "WIN", w2)})
	d, err = g.Replace(ctx, "WIN", windowHold(orderID(5), 1, w2, 2), orderID(4))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	d, err = g.Reserve(ctx, "WIN", 10, windowHold(orderID(6), 2, w2, 2))
	require.NoError(t, err)
	require.Equal(t, voucher.GateWindowFull, d.Outcome)

	// A load counts the snapshot's held redemptions per occurrence.
	at := time.Now().UTC().Truncate(time.Millisecond)
	snap := voucher.Snapshot{Voucher: testVoucher("WLOAD", 100, 10), Held: 3, Customers: map[string]int32{"1": 3}}
	for i, w := range []time.Time{w1, w2, w2} {
		snap.Orders = append(snap.Orders, voucher.Redemption{OrderID: fmt.Sprintf("l-%d", i), VoucherCode: "WLOAD", CustomerID: "1",
			OrderAmount: 1, DiscountAmount: 1, Status: voucher.StatusReserved, CreatedAt: at, ExpiresAt: at.Add(time.Hour), Window: w})
	}
	snap.Orders = append(snap.Orders, voucher.Redemption{OrderID: "l-r", VoucherCode: "WLOAD", CustomerID: "1",
		Status: voucher.StatusReleased, CreatedAt: at, ExpiresAt: at, Window: w1})
	wrote, err := g.Load(ctx, snap)
	require.NoError(t, err)
	require.True(t, wrote)
	require.Equal(t, []int64{1, 2}, []int64{windowCount(t, g, "WLOAD", w1), windowCount(t, g, "WLOAD", w2)})
	d, err = g.Reserve(ctx, "WLOAD", 10, windowHold("l-4", 1, w2, 2))
	require.NoError(t, err)
	require.Equal(t, voucher.GateWindowFull, d.Outcome)
	require.Positive(t, rawTTL(t, g, keysFor(g.cfg.KeyPrefix, "WLOAD").budget))
}

// 64 clients race for a quota of 100 per occurrence of a 1,000-use
// voucher: exactly 100 takes.
func TestReserveWindowRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	loadEmpty(t, g, testVoucher("WRACE", 1000, 1000))
	w := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for c := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				d, err := g.Reserve(ctx, "WRACE", 1000, windowHold(fmt.Sprintf("r-%d-%d", c, i), int64(c+1), w, 100))
				require.NoError(t, err)
				if d.Outcome == voucher.GateTaken {
					mu.Lock()
					taken++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 100, taken)
	require.Equal(t, int64(100), windowCount(t, g, "WRACE", w))
	require.Positive(t, rawTTL(t, g, keysFor(g.cfg.KeyPrefix, "WRACE").budget), "the counters leave with the sale")
}
