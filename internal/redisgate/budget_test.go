package redisgate

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// budgetHeld reads the gate's budget counter of code: cap and held.
func budgetHeld(t *testing.T, g *Gate, code string) (amount, held int64) {
	t.Helper()
	c := rawClient(t, g)
	v, err := c.Do(context.Background(), c.B().Hmget().Key(keysFor(g.cfg.KeyPrefix, code).budget).Field("cap", "held").Build()).ToArray()
	require.NoError(t, err)
	amount, err = v[0].AsInt64()
	require.NoError(t, err)
	held, err = v[1].AsInt64()
	require.NoError(t, err)
	return amount, held
}

func budgetHold(orderID string, customer int64, discount int64, b voucher.Budget) voucher.Hold {
	h := testHold(orderID, customer)
	h.DiscountAmount, h.Budget = discount, b
	return h
}

// A budget of 10,000 for fixed 3,000: three takes, the fourth refused with
// 1,000 left; a release gives the 3,000 back; a replacement gives the
// replaced discount back before fitting its own.
func TestReserveBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("BUDGET", 100, 10)
	v.Budget = voucher.Budget{Amount: 10_000}
	loadEmpty(t, g, v)
	b := voucher.Budget{Amount: 10_000}
	for i := range 3 {
		d, err := g.Reserve(ctx, "BUDGET", 10, budgetHold(orderID(i), 1, 3_000, b))
		require.NoError(t, err)
		require.Equal(t, voucher.GateTaken, d.Outcome)
		require.Zero(t, d.Discount)
	}
	d, err := g.Reserve(ctx, "BUDGET", 10, budgetHold(orderID(3), 1, 3_000, b))
	require.NoError(t, err)
	require.Equal(t, voucher.GateBudgetExceeded, d.Outcome)
	require.Equal(t, int64(1_000), d.BudgetLeft)
	require.Equal(t, int64(97), d.Remaining, "nothing taken")

	released, err := g.Release(ctx, "BUDGET", orderID(0), voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, released)
	_, held := budgetHeld(t, g, "BUDGET")
	require.Equal(t, int64(6_000), held)

	// A replacement of a 3,000 hold by a 4,000 one fits 4,000 of the 7,000.
	r := budgetHold(orderID(4), 1, 4_000, b)
	d, err = g.Replace(ctx, "BUDGET", r, orderID(1))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	_, held = budgetHeld(t, g, "BUDGET")
	require.Equal(t, int64(7_000), held)
	r = budgetHold(orderID(5), 1, 8_000, b)
	d, err = g.Replace(ctx, "BUDGET", r, orderID(2))
	require.NoError(t, err)
	require.Equal(t, voucher.GateBudgetExceeded, d.Outcome)
	require.Equal(t, int64(6_000), d.BudgetLeft, "3,000 left and the replaced 3,000")

	// A voucher with a budget whose budget key is gone is not loaded.
	c := rawClient(t, g)
	require.NoError(t, c.Do(ctx, c.B().Del().Key(keysFor(g.cfg.KeyPrefix, "BUDGET").budget).Build()).Error())
	d, err = g.Reserve(ctx, "BUDGET", 10, budgetHold(orderID(6), 1, 10, b))
	require.NoError(t, err)
	require.Equal(t, voucher.GateNotLoaded, d.Outcome)
}

// Clip: the last order gets what is left, never 0; a load counts the
// snapshot's held discounts; PATCH's cap reaches the gate.
func TestReserveBudgetClipAndLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("CLIP", 100, 10)
	v.Budget = voucher.Budget{Amount: 5_000, Clip: true}
	snap := voucher.Snapshot{Voucher: v, Held: 1, Customers: map[string]int32{"1": 1}, Orders: []voucher.Redemption{{
		OrderID: "old", VoucherCode: "CLIP", CustomerID: "1", OrderAmount: 30_000, DiscountAmount: 3_000,
		Status: voucher.StatusConfirmed, CreatedAt: v.StartsAt, UpdatedAt: v.StartsAt, ExpiresAt: v.EndsAt,
	}}}
	wrote, err := g.Load(ctx, snap)
	require.NoError(t, err)
	require.True(t, wrote)
	amount, held := budgetHeld(t, g, "CLIP")
	require.Equal(t, []int64{5_000, 3_000}, []int64{amount, held})

	d, err := g.Reserve(ctx, "CLIP", 10, budgetHold("c-1", 2, 3_000, v.Budget))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	require.Equal(t, int64(2_000), d.Discount)
	h, found, err := g.Lookup(ctx, "CLIP", "c-1")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, int64(2_000), h.DiscountAmount, "the hold keeps the clipped discount")
	d, err = g.Reserve(ctx, "CLIP", 10, budgetHold("c-2", 2, 1, v.Budget))
	require.NoError(t, err)
	require.Equal(t, voucher.GateBudgetExceeded, d.Outcome)
	require.Zero(t, d.BudgetLeft)

	v.Budget.Amount = 6_000
	require.NoError(t, g.AdjustLimit(ctx, v, 0))
	d, err = g.Reserve(ctx, "CLIP", 10, budgetHold("c-3", 2, 3_000, v.Budget))
	require.NoError(t, err)
	require.Equal(t, int64(1_000), d.Discount)
	_, held = budgetHeld(t, g, "CLIP")
	require.Equal(t, int64(6_000), held)
}

// 64 clients race for a budget of 100 fixed discounts of a 1,000-use
// voucher: exactly 100 takes; with clip on varying discounts the takes sum
// to the budget exactly.
func TestReserveBudgetRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	for _, clip := range []bool{false, true} {
		code := fmt.Sprintf("RACE%t", clip)
		v := testVoucher(code, 1_000, 1)
		v.Budget = voucher.Budget{Amount: 100_000, Clip: clip}
		loadEmpty(t, g, v)
		var mu sync.Mutex
		var taken int
		var sum int64
		var wg sync.WaitGroup
		for c := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 8 {
					n := c*8 + i
					discount := int64(1_000)
					if clip {
						discount = 777 + int64(n)
					}
					d, err := g.Reserve(ctx, code, 1, budgetHold(orderID(n), int64(n+1), discount, v.Budget))
					require.NoError(t, err)
					mu.Lock()
					switch d.Outcome {
					case voucher.GateTaken:
						taken++
						if d.Discount > 0 {
							discount = d.Discount
						}
						sum += discount
					default:
						require.Equal(t, voucher.GateBudgetExceeded, d.Outcome)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		require.Equal(t, int64(100_000), sum, code)
		if !clip {
			require.Equal(t, 100, taken)
		}
		_, held := budgetHeld(t, g, code)
		require.Equal(t, int64(100_000), held)
	}
}

// A spent budget whose uses remain is answered from the sold-out cache once
// its copy is read, and a release (which gives money back) clears it.
func TestSoldOutCacheSpentBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: time.Minute})
	v := testVoucher("SPENT", 100, 10)
	v.Budget = voucher.Budget{Amount: 2_000}
	loadEmpty(t, g, v)
	for i := range 2 {
		d, err := g.Reserve(ctx, "SPENT", 10, budgetHold(orderID(i), 1, 1_000, v.Budget))
		require.NoError(t, err)
		require.Equal(t, voucher.GateTaken, d.Outcome)
	}
	d, err := g.Reserve(ctx, "SPENT", 10, budgetHold(orderID(2), 1, 1_000, v.Budget))
	require.NoError(t, err)
	require.Equal(t, voucher.GateBudgetExceeded, d.Outcome)
	require.False(t, d.Local)
	require.Eventually(t, func() bool {
		d, err := g.Reserve(ctx, "SPENT", 10, budgetHold(orderID(3), 2, 1_000, v.Budget))
		return err == nil && d.Local && d.Outcome == voucher.GateBudgetExceeded
	}, 5*time.Second, 10*time.Millisecond)
	// A known orderId is still answered from the copy: a replay.
	d, err = g.Reserve(ctx, "SPENT", 10, budgetHold(orderID(0), 1, 1_000, v.Budget))
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome)
	require.True(t, d.Local)

	released, err := g.Release(ctx, "SPENT", orderID(0), voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, released)
	d, err = g.Reserve(ctx, "SPENT", 10, budgetHold(orderID(4), 2, 1_000, v.Budget))
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
}
