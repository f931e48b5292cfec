package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// The consumer's batch counts each event in its own occurrence: a batch
// mixing a windowed voucher's events with another voucher's creates and
// counts the occurrence's counter, a batch without any occurrence (sent
// with no windows at all) leaves the counters alone, and an event past its
// occurrence's quota is refused alone.
func TestApplyReservedWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	v := newVoucher(t, s, "KWIN", 10, 5, func(v *voucher.Voucher) {
		v.Schedule, v.WindowLimit = everyDay("00:30", "02:00"), 2
	})
	newVoucher(t, s, "KPLAIN", 10, 5)
	o := v.Occurrence(now)
	require.False(t, o.Zero())
	windowed := func(customer int64, orderID string) voucher.ReservedEvent {
		e := event("KWIN", customer, orderID)
		e.Window = o.Start
		return e
	}

	results, err := s.ApplyReserved(ctx, []voucher.ReservedEvent{event("KPLAIN", 1, "p-1"), windowed(1, "w-1"), event("KPLAIN", 2, "p-2")})
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.Applied, voucher.Applied, voucher.Applied}, outcomes(results))
	requireWindow(t, s, "KWIN", o.Start, 1)

	results, err = s.ApplyReserved(ctx, []voucher.ReservedEvent{event("KPLAIN", 3, "p-3"), event("KPLAIN", 4, "p-4")})
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.Applied, voucher.Applied}, outcomes(results))
	require.Equal(t, int32(4), readCounts(t, s, "KPLAIN").UsedCount)
	requireWindow(t, s, "KWIN", o.Start, 1)

	results, err = s.ApplyReserved(ctx, []voucher.ReservedEvent{windowed(2, "w-2"), windowed(3, "w-3"), event("KPLAIN", 5, "p-5")})
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.Applied, voucher.Rejected, voucher.Applied}, outcomes(results))
	requireWindow(t, s, "KWIN", o.Start, 2)
	assertConsistent(t, s, "KPLAIN")
}
