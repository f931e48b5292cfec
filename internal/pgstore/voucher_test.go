package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/voucher"
)

func TestCreateAndGetVoucher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	v := voucher.Voucher{
		Code: "FLASH100", DiscountAmount: 100_000, MinOrderAmount: 50_000, TotalLimit: 1000, PerUserLimit: 2,
		StartsAt: base, EndsAt: base.AddDate(0, 0, 30), FlashSale: true,
		UsedCount: 99, // ignored: a new voucher has no uses
	}
	created, err := s.CreateVoucher(ctx, v)
	require.NoError(t, err)
	require.Equal(t, int32(0), created.UsedCount)
	require.False(t, created.CreatedAt.IsZero())
	want := v
	want.UsedCount, want.CreatedAt, want.UpdatedAt = 0, created.CreatedAt, created.UpdatedAt
	want.CustomerIDNormalization = voucher.NormalizeNone // the zero value, as stored
	require.Equal(t, want, created)

	got, err := s.Voucher(ctx, "FLASH100")
	require.NoError(t, err)
	require.Equal(t, created, got)

	_, err = s.CreateVoucher(ctx, v)
	ve := requireCode(t, err, voucher.CodeVoucherExists)
	require.Equal(t, "voucher FLASH100 already exists", ve.Message)
	_, err = s.Voucher(ctx, "flash100")
	requireCode(t, err, voucher.CodeVoucherNotFound) // codes are case-sensitive

	bad := v
	bad.Code, bad.EndsAt = "BAD", bad.StartsAt
	_, err = s.CreateVoucher(ctx, bad)
	requireCode(t, err, voucher.CodeInvalidRequest)
}

func TestVoucherLiveCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "LIVE", 10, 1)
	for i := 1; i <= 5; i++ {
		_, err := s.Reserve(ctx, request("LIVE", int64(i), fmt.Sprintf("o-%d", i)), now, ttl)
		require.NoError(t, err)
	}
	for _, o := range []string{"o-1", "o-2"} {
		_, err := s.Confirm(ctx, "LIVE", o, now)
		require.NoError(t, err)
	}
	_, _, err := s.Release(ctx, "LIVE", "o-3", now)
	require.NoError(t, err)

	v, err := s.Voucher(ctx, "LIVE")
	require.NoError(t, err)
	require.Equal(t, int32(2), v.Reserved)
	require.Equal(t, int32(2), v.Confirmed)
	require.Equal(t, int32(4), v.UsedCount)
	require.Equal(t, int32(6), v.Remaining())
}

func TestPatchVoucher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "PATCH", 5, 3)
	// Customer 1 holds 2 uses, customer 2 holds 1; one of customer 1's is
	// confirmed.
	for i, customer := range []int64{1, 1, 2} {
		_, err := s.Reserve(ctx, request("PATCH", customer, fmt.Sprintf("o-%d", i)), now, ttl)
		require.NoError(t, err)
	}
	_, err := s.Confirm(ctx, "PATCH", "o-0", now)
	require.NoError(t, err)

	i32 := func(n int32) *int32 { return &n }

	// Raise the total limit and change other fields.
	discount := int64(5_000)
	before, after, err := s.PatchVoucher(ctx, "PATCH", voucher.Patch{TotalLimit: i32(8), DiscountAmount: &discount})
	require.NoError(t, err)
	require.Equal(t, int32(5), before.TotalLimit)
	require.Equal(t, int32(8), after.TotalLimit)
	require.Equal(t, int64(5_000), after.DiscountAmount)
	require.Equal(t, int32(3), after.UsedCount)
	require.Equal(t, [2]int32{2, 1}, [2]int32{after.Reserved, after.Confirmed})
	require.Equal(t, before.CreatedAt, after.CreatedAt)

	// Down to exactly what is held is allowed; below it is not.
	_, after, err = s.PatchVoucher(ctx, "PATCH", voucher.Patch{TotalLimit: i32(3), PerUserLimit: i32(2)})
	require.NoError(t, err)
	require.Equal(t, [2]int32{3, 2}, [2]int32{after.TotalLimit, after.PerUserLimit})

	_, _, err = s.PatchVoucher(ctx, "PATCH", voucher.Patch{TotalLimit: i32(2)})
	ve := requireCode(t, err, voucher.CodeLimitBelowHeld)
	require.Equal(t, "totalLimit 2 is below the 3 uses held of voucher PATCH", ve.Message)
	require.Equal(t, voucher.LimitTotal, ve.Limit)
	_, _, err = s.PatchVoucher(ctx, "PATCH", voucher.Patch{PerUserLimit: i32(1)})
	ve = requireCode(t, err, voucher.CodeLimitBelowHeld)
	require.Equal(t, "perUserLimit 1 is below the 2 uses customer 1 holds of voucher PATCH", ve.Message)
	require.Equal(t, voucher.LimitPerUser, ve.Limit)

	// A refused patch changes nothing.
	v, err := s.Voucher(ctx, "PATCH")
	require.NoError(t, err)
	require.Equal(t, [2]int32{3, 2}, [2]int32{v.TotalLimit, v.PerUserLimit})

	// Invalid values and unknown vouchers.
	end := base.Add(-time.Hour)
	_, _, err = s.PatchVoucher(ctx, "PATCH", voucher.Patch{EndsAt: &end})
	requireCode(t, err, voucher.CodeInvalidRequest)
	_, _, err = s.PatchVoucher(ctx, "NOPE", voucher.Patch{TotalLimit: i32(10)})
	requireCode(t, err, voucher.CodeVoucherNotFound)

	// An empty patch returns the voucher unchanged.
	before, after, err = s.PatchVoucher(ctx, "PATCH", voucher.Patch{})
	require.NoError(t, err)
	require.Equal(t, before, after)

	// The new limits apply to the next reservations.
	_, err = s.Reserve(ctx, request("PATCH", 3, "o-x"), now, ttl)
	requireCode(t, err, voucher.CodeHeldOut)
	assertConsistent(t, s, "PATCH")
}

// Reservations keep their answers right while limits are patched under them.
func TestPatchVoucherWhileReserving(t *testing.T) {
	t.Parallel()
	forEachCombining(t, func(t *testing.T, s *pgstore.Store) {
		ctx := context.Background()
		newVoucher(t, s, "MOVING", 20, 1)

		results := concurrently(60, func(i int) error {
			if i%10 == 0 {
				limit := int32(20 + i)
				_, _, err := s.PatchVoucher(ctx, "MOVING", voucher.Patch{TotalLimit: &limit})
				if voucher.IsCode(err, voucher.CodeLimitBelowHeld) {
					return nil // patches race each other too
				}
				return err
			}
			_, err := s.Reserve(ctx, request("MOVING", int64(i), fmt.Sprintf("o-%d", i)), now, ttl)
			if voucher.IsCode(err, voucher.CodeOutOfStock) || voucher.IsCode(err, voucher.CodeHeldOut) {
				return nil
			}
			return err
		})
		for _, err := range results {
			require.NoError(t, err)
		}
		assertConsistent(t, s, "MOVING")
	})
}

func TestGateSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "SNAP", 10, 2)
	newVoucher(t, s, "EMPTY", 10, 2)
	orders := []struct {
		customer int64
		order    string
	}{{1, "o-a"}, {1, "o-b"}, {2, "o-c"}, {3, "o-d"}}
	for i, o := range orders {
		_, err := s.Reserve(ctx, request("SNAP", o.customer, o.order), now.Add(time.Duration(i)*time.Second), ttl)
		require.NoError(t, err)
	}
	_, err := s.Confirm(ctx, "SNAP", "o-a", now)
	require.NoError(t, err)
	_, _, err = s.Release(ctx, "SNAP", "o-d", now)
	require.NoError(t, err)

	snap, err := s.GateSnapshot(ctx, "SNAP")
	require.NoError(t, err)
	require.Equal(t, "SNAP", snap.Voucher.Code)
	require.Equal(t, int32(3), snap.Held)
	require.Equal(t, int64(7), snap.Remaining())
	require.Equal(t, map[string]int32{"1": 2, "2": 1}, snap.Customers, "only held uses count")
	require.Len(t, snap.Orders, 4, "held and released orderIds")
	status := map[string]voucher.Status{}
	for _, r := range snap.Orders {
		status[r.OrderID] = r.Status
	}
	require.Equal(t, map[string]voucher.Status{
		"o-a": voucher.StatusConfirmed, "o-b": voucher.StatusReserved,
		"o-c": voucher.StatusReserved, "o-d": voucher.StatusReleased,
	}, status)
	require.Equal(t, snap.Held, snap.Voucher.UsedCount)

	empty, err := s.GateSnapshot(ctx, "EMPTY")
	require.NoError(t, err)
	require.Equal(t, int32(0), empty.Held)
	require.Empty(t, empty.Customers)
	require.Empty(t, empty.Orders)

	_, err = s.GateSnapshot(ctx, "NOPE")
	requireCode(t, err, voucher.CodeVoucherNotFound)
}

func TestFlashVouchers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	flash := func(v *voucher.Voucher) { v.FlashSale = true }
	newVoucher(t, s, "F-LIVE", 10, 1, flash)
	newVoucher(t, s, "F-OLD", 10, 1, flash, func(v *voucher.Voucher) { v.EndsAt = base.Add(time.Hour) })
	newVoucher(t, s, "PLAIN", 10, 1)

	codes, err := s.FlashVouchers(ctx, base.Add(2*time.Hour))
	require.NoError(t, err)
	require.Equal(t, []string{"F-LIVE"}, codes)
	codes, err = s.FlashVouchers(ctx, base.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, []string{"F-LIVE", "F-OLD"}, codes, "a window ending at since has not ended before it")

	// Switching a voucher to flash mode makes it listed.
	on := true
	_, _, err = s.PatchVoucher(ctx, "PLAIN", voucher.Patch{FlashSale: &on})
	require.NoError(t, err)
	codes, err = s.FlashVouchers(ctx, base)
	require.NoError(t, err)
	require.Equal(t, []string{"F-LIVE", "F-OLD", "PLAIN"}, codes)
}

// A voucher's customerIdNormalization is stored and read back.
func TestVoucherCustomerIDNormalization(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	v := newVoucher(t, s, "MAILS", 10, 1, func(v *voucher.Voucher) { v.CustomerIDNormalization = voucher.NormalizeEmail })
	require.Equal(t, voucher.NormalizeEmail, v.CustomerIDNormalization)
	got, err := s.Voucher(ctx, "MAILS")
	require.NoError(t, err)
	require.Equal(t, voucher.NormalizeEmail, got.CustomerIDNormalization)
	_, err = s.CreateVoucher(ctx, voucher.Voucher{Code: "BAD", DiscountAmount: 1, TotalLimit: 1, PerUserLimit: 1,
		StartsAt: base, EndsAt: base.AddDate(0, 0, 1), CustomerIDNormalization: "phone"})
	requireCode(t, err, voucher.CodeInvalidRequest)
}
