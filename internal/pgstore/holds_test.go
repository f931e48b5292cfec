package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

const maxHold = time.Hour

// Extend pushes a RESERVED hold's expiry forward, never back, never past
// creation + maxHold, and refuses the other states.
func TestExtend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "EXT", 10, 10)
	res, err := s.Reserve(ctx, request("EXT", 1, "o-1"), now, ttl)
	require.NoError(t, err)
	require.Equal(t, now.Add(ttl), res.ExpiresAt)

	// Within the maximum: to until.
	at := now.Add(time.Minute)
	r, err := s.Extend(ctx, "EXT", "o-1", at.Add(30*time.Minute), at, maxHold)
	require.NoError(t, err)
	require.Equal(t, voucher.StatusReserved, r.Status)
	require.Equal(t, at.Add(30*time.Minute), r.ExpiresAt)
	require.Equal(t, at, r.UpdatedAt)

	// The same request again changes nothing; an earlier target never
	// shortens the hold.
	again, err := s.Extend(ctx, "EXT", "o-1", at.Add(30*time.Minute), at, maxHold)
	require.NoError(t, err)
	require.Equal(t, r, again)
	shorter, err := s.Extend(ctx, "EXT", "o-1", at.Add(5*time.Minute), at.Add(time.Second), maxHold)
	require.NoError(t, err)
	require.Equal(t, r, shorter)

	// Beyond the maximum: capped at creation + maxHold, and stays there.
	r, err = s.Extend(ctx, "EXT", "o-1", at.Add(5*time.Hour), at, maxHold)
	require.NoError(t, err)
	require.Equal(t, now.Add(maxHold), r.ExpiresAt)
	r, err = s.Extend(ctx, "EXT", "o-1", at.Add(5*time.Hour), at.Add(50*time.Minute), maxHold)
	require.NoError(t, err)
	require.Equal(t, now.Add(maxHold), r.ExpiresAt)

	// The expiry sweep honours the new expiry.
	swept, err := s.ExpireDue(ctx, now.Add(maxHold-time.Second), 10)
	require.NoError(t, err)
	require.Empty(t, swept)

	// Confirmed, released, unknown.
	_, err = s.Confirm(ctx, "EXT", "o-1", at)
	require.NoError(t, err)
	_, err = s.Extend(ctx, "EXT", "o-1", at.Add(time.Minute), at, maxHold)
	requireCode(t, err, voucher.CodeReservationConfirmed)
	_, _, err = s.Release(ctx, "EXT", "o-1", at)
	require.NoError(t, err)
	_, err = s.Extend(ctx, "EXT", "o-1", at.Add(time.Minute), at, maxHold)
	requireCode(t, err, voucher.CodeReservationReleased)
	_, err = s.Extend(ctx, "EXT", "nope", at.Add(time.Minute), at, maxHold)
	requireCode(t, err, voucher.CodeReservationNotFound)
	_, err = s.Extend(ctx, "OTHER", "o-1", at.Add(time.Minute), at, maxHold)
	requireCode(t, err, voucher.CodeReservationNotFound)

	// A hold past its expiry is released by the extension itself, its use
	// given back.
	res, err = s.Reserve(ctx, request("EXT", 2, "o-2"), now, ttl)
	require.NoError(t, err)
	before := readCounts(t, s, "EXT")
	_, err = s.Extend(ctx, "EXT", "o-2", res.ExpiresAt.Add(time.Hour), res.ExpiresAt, maxHold)
	requireCode(t, err, voucher.CodeReservationReleased)
	final, err := s.Redemption(ctx, "EXT", "o-2")
	require.NoError(t, err)
	require.Equal(t, voucher.StatusReleased, final.Status)
	require.Equal(t, before.UsedCount-1, readCounts(t, s, "EXT").UsedCount)
	assertConsistent(t, s, "EXT")
}

// An extension racing the sweep ends in one state: extended (and not
// swept) or released (and the extension says so).
func TestExtendRacingExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "XRACE", 100, 100)

	outcomes := map[string]int{}
	for i := 0; i < 50; i++ {
		orderID := fmt.Sprintf("o-%d", i)
		res, err := s.Reserve(ctx, request("XRACE", int64(i+1), orderID), now, time.Second)
		require.NoError(t, err)

		// Even rounds extend just before the expiry (valid if it wins the
		// lock); odd rounds just after it (both sides try to release).
		extendAt := res.ExpiresAt.Add(-time.Millisecond)
		if i%2 == 1 {
			extendAt = res.ExpiresAt.Add(time.Millisecond)
		}
		var extended voucher.Redemption
		var extendErr error
		var swept []voucher.Redemption
		concurrently(2, func(k int) struct{} {
			if k == 0 {
				extended, extendErr = s.Extend(ctx, "XRACE", orderID, extendAt.Add(time.Minute), extendAt, maxHold)
			} else {
				var err error
				if swept, err = s.ExpireDue(ctx, res.ExpiresAt.Add(time.Second), 10); err != nil {
					t.Errorf("ExpireDue: %v", err)
				}
			}
			return struct{}{}
		})

		final, err := s.Redemption(ctx, "XRACE", orderID)
		require.NoError(t, err)
		switch {
		case extendErr == nil:
			require.Equal(t, voucher.StatusReserved, final.Status)
			require.Equal(t, extendAt.Add(time.Minute), final.ExpiresAt)
			require.Equal(t, final, extended)
			require.Empty(t, swept)
			outcomes["extended"]++
			// Settle it so the next rounds' sweeps see only their own row.
			_, _, err = s.Release(ctx, "XRACE", orderID, extendAt)
			require.NoError(t, err)
		case voucher.IsCode(extendErr, voucher.CodeReservationReleased):
			require.Equal(t, voucher.StatusReleased, final.Status)
			require.LessOrEqual(t, len(swept), 1)
			if len(swept) == 1 {
				outcomes["swept"]++
			} else {
				outcomes["released by extend"]++
			}
		default:
			t.Fatalf("round %d: unexpected extend error: %v", i, extendErr)
		}
		assertConsistent(t, s, "XRACE")
	}
	t.Logf("outcomes: %v", outcomes)
	require.Zero(t, readCounts(t, s, "XRACE").UsedCount)
}

// Holds reports the earliest RESERVED expiry, which confirmed and released
// holds do not count in.
func TestHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "HOLDS", 5, 5)

	h, err := s.Holds(ctx, "HOLDS")
	require.NoError(t, err)
	require.Equal(t, voucher.HoldSummary{TotalLimit: 5}, h)

	for i := 1; i <= 3; i++ {
		_, err := s.Reserve(ctx, request("HOLDS", 1, fmt.Sprintf("o-%d", i)), now.Add(time.Duration(i)*time.Minute), ttl)
		require.NoError(t, err)
	}
	h, err = s.Holds(ctx, "HOLDS")
	require.NoError(t, err)
	require.Equal(t, voucher.HoldSummary{TotalLimit: 5, UsedCount: 3, EarliestExpiry: now.Add(time.Minute + ttl)}, h)

	_, err = s.Confirm(ctx, "HOLDS", "o-1", now)
	require.NoError(t, err)
	_, _, err = s.Release(ctx, "HOLDS", "o-2", now)
	require.NoError(t, err)
	h, err = s.Holds(ctx, "HOLDS")
	require.NoError(t, err)
	require.Equal(t, voucher.HoldSummary{TotalLimit: 5, UsedCount: 2, EarliestExpiry: now.Add(3*time.Minute + ttl)}, h)

	_, err = s.Confirm(ctx, "HOLDS", "o-3", now)
	require.NoError(t, err)
	h, err = s.Holds(ctx, "HOLDS")
	require.NoError(t, err)
	require.Equal(t, voucher.HoldSummary{TotalLimit: 5, UsedCount: 2}, h)

	_, err = s.Holds(ctx, "NOPE")
	requireCode(t, err, voucher.CodeVoucherNotFound)
}
