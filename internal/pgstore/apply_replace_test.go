package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

func replacement(code string, customer int64, orderID, replaces string) voucher.ReservedEvent {
	e := event(code, customer, orderID)
	e.ReplacesOrderID = replaces
	return e
}

// The consumer applies a replacement event in order with the batch: the
// replaced order RELEASED and the new one RESERVED in one transaction with
// the counts unchanged; a redelivery changes nothing; when the replaced
// order gave its use back meanwhile (expiry, release) the new order takes
// a use under the limits, and is refused past them.
func TestApplyReservedReplacements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "SWAP", 2, 1)

	batch := []voucher.ReservedEvent{event("SWAP", 1, "s-1"), replacement("SWAP", 1, "s-2", "s-1"), event("SWAP", 2, "s-3")}
	results, err := s.ApplyReserved(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.Applied, voucher.Applied, voucher.Applied}, outcomes(results))
	require.Equal(t, int32(2), readCounts(t, s, "SWAP").UsedCount)
	old, err := s.Redemption(ctx, "SWAP", "s-1")
	require.NoError(t, err)
	require.Equal(t, voucher.StatusReleased, old.Status)
	assertConsistent(t, s, "SWAP")

	results, err = s.ApplyReserved(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.AlreadyApplied, voucher.AlreadyApplied, voucher.AlreadyApplied}, outcomes(results))
	require.Equal(t, int32(2), readCounts(t, s, "SWAP").UsedCount)

	// s-2 released before its replacement's event arrives: s-4 takes a use.
	_, _, err = s.Release(ctx, "SWAP", "s-2", now)
	require.NoError(t, err)
	results, err = s.ApplyReserved(ctx, []voucher.ReservedEvent{replacement("SWAP", 1, "s-4", "s-2")})
	require.NoError(t, err)
	require.Equal(t, voucher.Applied, results[0].Outcome)
	require.Equal(t, int32(2), readCounts(t, s, "SWAP").UsedCount)
	assertConsistent(t, s, "SWAP")

	// Nothing to take over and no use free: refused, nothing changes.
	results, err = s.ApplyReserved(ctx, []voucher.ReservedEvent{replacement("SWAP", 3, "s-5", "s-9")})
	require.NoError(t, err)
	require.Equal(t, voucher.Rejected, results[0].Outcome, results[0].Reason)
	require.Equal(t, int32(2), readCounts(t, s, "SWAP").UsedCount)
	assertConsistent(t, s, "SWAP")
}
