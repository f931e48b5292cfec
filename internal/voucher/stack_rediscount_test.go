package voucher

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A stack member whose discount the store clipped otherwise than the gate
// gets the store's discount in its gate hold in one step (Gate.Rediscount):
// its use is never given back meanwhile, so no other order can take it.
// A member whose discount agrees, one without a budget, or one this
// attempt did not take is left alone.
func TestStackRediscountKeepsTheUse(t *testing.T) {
	t.Parallel()
	g := &fakeGate{}
	svc, err := NewService(ServiceConfig{Store: &fakeStore{voucher: flashVoucher()}, Gate: g})
	require.NoError(t, err)
	ctx := context.Background()
	now := time.Now()
	budget := route{code: "SALE", v: Voucher{Code: "SALE", FlashSale: true, Budget: Budget{Amount: 5000, Clip: true}}}
	take := stackTake{rt: budget, taken: true, hold: Hold{OrderID: "st-1", CustomerID: "7", OrderAmount: 20000,
		DiscountAmount: 1000, ReservedAt: now, ExpiresAt: now.Add(time.Minute)}}

	svc.stackRediscount(ctx, take, 400)
	require.Equal(t, []string{"st-1=400"}, g.rediscounts)
	require.Empty(t, g.released(), "the use is never given back")

	svc.stackRediscount(ctx, take, 1000)
	noBudget := take
	noBudget.rt.v.Budget = Budget{}
	svc.stackRediscount(ctx, noBudget, 400)
	replay := take
	replay.taken = false
	svc.stackRediscount(ctx, replay, 400)
	require.Equal(t, []string{"st-1=400"}, g.rediscounts, "nothing else to correct")
	require.Empty(t, g.released())
}

// The single flash-sync path corrects a clipped discount the same way: one
// Gate.Rediscount, the use never given back.
func TestSyncRediscountKeepsTheUse(t *testing.T) {
	t.Parallel()
	g := &fakeGate{}
	svc, err := NewService(ServiceConfig{Store: &fakeStore{voucher: flashVoucher()}, Gate: g})
	require.NoError(t, err)
	w, ok := svc.writes.(*syncWrites)
	require.True(t, ok)
	rt := route{code: "SALE", v: Voucher{Code: "SALE", FlashSale: true, Budget: Budget{Amount: 5000, Clip: true}}}
	hold := Hold{OrderID: "o-1", CustomerID: "7", OrderAmount: 20000, DiscountAmount: 1000}
	w.rediscount(context.Background(), rt, hold, Reservation{Redemption: Redemption{DiscountAmount: 600}})
	require.Equal(t, []string{"o-1=600"}, g.rediscounts)
	require.Empty(t, g.released(), "the use is never given back")
}
