package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// ResolveCode reads in one statement what a reservation needs first of a
// code not cached: the voucher it names, or its campaign's budget and
// whether another order holds it, or nothing; and the orderId's row.
func TestResolveCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	v := newVoucher(t, s, "RESOLVE1", 10, 1)
	_, codes := newCampaign(t, s, "cmp_RESOLVE", "RS-", 2, 10, 1)
	_, err := s.Reserve(ctx, request(codes[0], 1, "rs-1"), now, ttl)
	require.NoError(t, err)
	held, err := s.Order(ctx, "rs-1")
	require.NoError(t, err)

	r, err := s.ResolveCode(ctx, "RS-NOSUCHCODE", "rs-1")
	require.NoError(t, err)
	require.Equal(t, voucher.Resolution{HasOrder: true, Order: held}, r, "nothing found; the orderId's row all the same")

	r, err = s.ResolveCode(ctx, v.Code, "")
	require.NoError(t, err)
	want, err := s.Voucher(ctx, v.Code)
	require.NoError(t, err)
	want.Reserved, want.Confirmed = 0, 0
	require.Equal(t, voucher.Resolution{Voucher: want, Found: true}, r)

	r, err = s.ResolveCode(ctx, codes[0], "rs-2")
	require.NoError(t, err)
	require.True(t, r.Found && r.ByCampaign && r.CodeHeld && !r.HasOrder, "%+v", r)
	require.Equal(t, "cmp_RESOLVE", r.Voucher.Code)
	require.Equal(t, int32(1), r.Voucher.UsedCount)

	r, err = s.ResolveCode(ctx, codes[1], "rs-1")
	require.NoError(t, err)
	require.True(t, r.Found && r.ByCampaign && !r.CodeHeld && r.HasOrder, "%+v", r)
	require.Equal(t, held, r.Order)

	// A stackable voucher's setting is read with it, as Voucher reads it:
	// the definition cached from this read stands in for the setting while
	// the store does not answer a stack's read of it.
	stackable := newVoucher(t, s, "RESOLVE2", 10, 1, func(v *voucher.Voucher) {
		v.Stacking = voucher.Stacking{Stackable: true, ExclusiveGroup: "seasonal"}
	})
	r, err = s.ResolveCode(ctx, stackable.Code, "")
	require.NoError(t, err)
	require.Equal(t, voucher.Stacking{Stackable: true, ExclusiveGroup: "seasonal"}, r.Voucher.Stacking)

	// The budget by its own id is a voucher row, as Voucher reads it; the
	// reservation function refuses it.
	r, err = s.ResolveCode(ctx, "cmp_RESOLVE", "")
	require.NoError(t, err)
	require.True(t, r.Found && !r.ByCampaign, "%+v", r)
}
