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

// everyDay is a schedule with one window a day from..to (UTC).
func everyDay(from, to string) *voucher.Schedule {
	return &voucher.Schedule{TimeZone: "UTC", Windows: []voucher.Window{{
		Days: []string{"MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"}, From: from, To: to}}}
}

// windowRequest is a reservation at at, in the occurrence of v covering it.
func windowRequest(v voucher.Voucher, customer int64, orderID string, at time.Time) voucher.ReserveRequest {
	r := request(v.Code, customer, orderID)
	r.Window = v.Occurrence(at).Start
	return r
}

func requireWindow(t *testing.T, s *pgstore.Store, code string, start time.Time, held int32) {
	t.Helper()
	v, err := s.Voucher(context.Background(), code)
	require.NoError(t, err)
	require.Equal(t, voucher.WindowCount{Start: start.UTC(), Held: held}, v.LatestWindow)
	assertConsistent(t, s, code)
}

// A quota of 2 per daily occurrence: two holds in one occurrence, the third
// refused HELD_OUT (then OUT_OF_STOCK) naming the window; the next
// occurrence has its own quota; a hold released after its occurrence ended
// gives its use back to that occurrence, not to the current one; outside
// every window OUTSIDE_WINDOW, with nothing taken.
func TestTakeLimitsPerOccurrence(t *testing.T) {
	t.Parallel()
	forEachCombining(t, func(t *testing.T, s *pgstore.Store) {
		ctx := context.Background()
		v := newVoucher(t, s, "WINDOW", 100, 5, func(v *voucher.Voucher) {
			v.Schedule, v.WindowLimit = everyDay("09:00", "10:00"), 2
		})
		require.Equal(t, 2, int(v.WindowLimit))
		day1 := time.Date(base.Year(), base.Month(), base.Day()+1, 9, 15, 0, 0, time.UTC)
		day2 := day1.Add(24 * time.Hour)
		o1 := v.Occurrence(day1)
		require.False(t, o1.Zero())

		for i := range 2 {
			_, err := s.Reserve(ctx, windowRequest(v, int64(i), fmt.Sprintf("w1-%d", i), day1), day1, ttl)
			require.NoError(t, err)
		}
		requireWindow(t, s, "WINDOW", o1.Start, 2)
		_, err := s.Reserve(ctx, windowRequest(v, 7, "w1-x", day1), day1, ttl)
		ve := requireCode(t, err, voucher.CodeHeldOut)
		require.Equal(t, voucher.LimitWindow, ve.Limit)
		require.Equal(t, ttl, ve.RetryAfter)
		_, err = s.Validate(ctx, voucher.ValidateRequest{Code: "WINDOW", CustomerID: "7", OrderAmount: 250_000, Window: o1.Start}, day1)
		require.Equal(t, voucher.LimitWindow, requireCode(t, err, voucher.CodeHeldOut).Limit)
		for i := range 2 {
			_, err := s.Confirm(ctx, "WINDOW", fmt.Sprintf("w1-%d", i), day1)
			require.NoError(t, err)
		}
		_, err = s.Reserve(ctx, windowRequest(v, 7, "w1-y", day1), day1, ttl)
		require.Equal(t, voucher.LimitWindow, requireCode(t, err, voucher.CodeOutOfStock).Limit)

		// Outside: refused, nothing taken.
		outside := day1.Add(2 * time.Hour)
		_, err = s.Reserve(ctx, windowRequest(v, 8, "w-out", outside), outside, ttl)
		ve = requireCode(t, err, voucher.CodeNotEligible)
		require.Equal(t, voucher.ReasonOutsideWindow, ve.Reason)
		_, err = s.Validate(ctx, voucher.ValidateRequest{Code: "WINDOW", CustomerID: "8", OrderAmount: 250_000}, outside)
		require.Equal(t, voucher.ReasonOutsideWindow, requireCode(t, err, voucher.CodeNotEligible).Reason)
		_, err = s.Redemption(ctx, "WINDOW", "w-out")
		requireCode(t, err, voucher.CodeReservationNotFound)

		// The next occurrence has its own quota; a hold of the first,
		// refunded now, goes back to the first.
		o2 := v.Occurrence(day2)
		_, err = s.Reserve(ctx, windowRequest(v, 9, "w2-0", day2), day2, ttl)
		require.NoError(t, err)
		requireWindow(t, s, "WINDOW", o2.Start, 1)
		_, _, err = s.Release(ctx, "WINDOW", "w1-0", day2)
		require.NoError(t, err)
		requireWindow(t, s, "WINDOW", o2.Start, 1)
		_, err = s.Reserve(ctx, windowRequest(v, 10, "w2-1", day2), day2, ttl)
		require.NoError(t, err)
		_, err = s.Reserve(ctx, windowRequest(v, 11, "w2-2", day2), day2, ttl)
		require.Equal(t, voucher.LimitWindow, requireCode(t, err, voucher.CodeHeldOut).Limit)
		// A hold of the second occurrence expiring later gives back to it.
		_, err = s.ExpireDue(ctx, day2.Add(ttl), 100)
		require.NoError(t, err)
		requireWindow(t, s, "WINDOW", o2.Start, 0)
		// The first occurrence's counter: w1-1 only.
		_, err = s.Reserve(ctx, windowRequest(v, 12, "w1-late", day1.Add(time.Minute)), day1.Add(time.Minute), ttl)
		require.NoError(t, err, "w1-0's use came back to the first occurrence")
	})
}

// A replacement in the same occurrence keeps the use; the replaced hold's
// use goes back to its own occurrence.
func TestWindowReplacement(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	v := newVoucher(t, s, "WREPL", 100, 5, func(v *voucher.Voucher) {
		v.Schedule, v.WindowLimit = everyDay("09:00", "10:00"), 1
	})
	day1 := time.Date(base.Year(), base.Month(), base.Day()+1, 9, 15, 0, 0, time.UTC)
	_, err := s.Reserve(ctx, windowRequest(v, 1, "r-0", day1), day1, ttl)
	require.NoError(t, err)
	r := windowRequest(v, 1, "r-1", day1.Add(time.Minute))
	r.ReplacesOrderID = "r-0"
	_, err = s.Reserve(ctx, r, day1.Add(time.Minute), ttl)
	require.NoError(t, err)
	requireWindow(t, s, "WREPL", v.Occurrence(day1).Start, 1)
	// In the next occurrence, replacing the first's hold takes the new
	// occurrence's use and gives the old one back.
	day2 := day1.Add(24 * time.Hour)
	r = windowRequest(v, 1, "r-2", day2)
	r.ReplacesOrderID = "r-1"
	_, err = s.Reserve(ctx, r, day2, ttl)
	require.NoError(t, err)
	requireWindow(t, s, "WREPL", v.Occurrence(day2).Start, 1)
	_, err = s.Reserve(ctx, windowRequest(v, 2, "r-3", day1.Add(2*time.Minute)), day1.Add(2*time.Minute), ttl)
	require.NoError(t, err, "the first occurrence got its use back")
}

// PATCH of windowLimit: raised, lowered no further than the current
// occurrence holds (LIMIT_BELOW_HELD, limit window), refused on a voucher
// created without one; the schedule may change.
func TestWindowPatch(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	v := newVoucher(t, s, "WPATCH", 100, 5, func(v *voucher.Voucher) {
		v.Schedule, v.WindowLimit = everyDay("09:00", "10:00"), 3
	})
	day1 := time.Date(base.Year(), base.Month(), base.Day()+1, 9, 15, 0, 0, time.UTC)
	for i := range 2 {
		_, err := s.Reserve(ctx, windowRequest(v, int64(i), fmt.Sprintf("p-%d", i), day1), day1, ttl)
		require.NoError(t, err)
	}
	one, two := int32(1), int32(2)
	_, _, err := s.PatchVoucher(ctx, "WPATCH", voucher.Patch{WindowLimit: &one, Now: day1})
	ve := requireCode(t, err, voucher.CodeLimitBelowHeld)
	require.Equal(t, voucher.LimitWindow, ve.Limit)
	_, after, err := s.PatchVoucher(ctx, "WPATCH", voucher.Patch{WindowLimit: &two, Now: day1})
	require.NoError(t, err)
	require.Equal(t, int32(2), after.WindowLimit)
	_, err = s.Reserve(ctx, windowRequest(v, 9, "p-2", day1), day1, ttl)
	require.Equal(t, voucher.LimitWindow, requireCode(t, err, voucher.CodeHeldOut).Limit)
	// Lowered below an ended occurrence's holds: that one keeps them.
	_, _, err = s.PatchVoucher(ctx, "WPATCH", voucher.Patch{WindowLimit: &one, Now: day1.Add(24 * time.Hour)})
	require.NoError(t, err)
	sched := everyDay("18:00", "19:00")
	_, after, err = s.PatchVoucher(ctx, "WPATCH", voucher.Patch{Schedule: sched, Now: day1})
	require.NoError(t, err)
	require.Equal(t, sched, after.Schedule)
	got, err := s.Voucher(ctx, "WPATCH")
	require.NoError(t, err)
	require.Equal(t, sched, got.Schedule)
	require.Equal(t, int32(1), got.WindowLimit)
	assertConsistent(t, s, "WPATCH")

	newVoucher(t, s, "WPLAIN", 10, 1)
	_, _, err = s.PatchVoucher(ctx, "WPLAIN", voucher.Patch{WindowLimit: &two, Now: day1})
	requireCode(t, err, voucher.CodeWindowNotSet)
}

// A hold that expires after its occurrence ended gives its use back to that
// occurrence, whoever sweeps it (the expiry job counts the rows itself).
func TestWindowExpiryAfterTheOccurrence(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	v := newVoucher(t, s, "WEXP", 100, 5, func(v *voucher.Voucher) {
		v.Schedule, v.WindowLimit = everyDay("09:00", "10:00"), 1
	})
	late := time.Date(base.Year(), base.Month(), base.Day()+1, 9, 55, 0, 0, time.UTC)
	o := v.Occurrence(late)
	_, err := s.Reserve(ctx, windowRequest(v, 1, "e-1", late), late, ttl)
	require.NoError(t, err)
	requireWindow(t, s, "WEXP", o.Start, 1)
	swept := late.Add(ttl + time.Minute)
	require.True(t, swept.After(o.End), "the hold expires after its occurrence ended")
	n, err := s.ExpireDue(ctx, swept, 100)
	require.NoError(t, err)
	require.Len(t, n, 1)
	requireWindow(t, s, "WEXP", o.Start, 0)
	_, err = s.Reserve(ctx, windowRequest(v, 2, "e-2", late.Add(time.Minute)), late.Add(time.Minute), ttl)
	require.NoError(t, err, "the occurrence has its use again")
}
