package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/voucher"
)

// retryBehindFirstAttempt runs firstSQL, a reservation's first attempt, in
// a transaction it leaves open, sends req (its retry) through the store,
// waits until the retry waits for a lock in a statement matching waiting,
// commits the first attempt, and returns the retry's answer.
func retryBehindFirstAttempt(t *testing.T, s *pgstore.Store, firstSQL string, req voucher.ReserveRequest, waiting string) (voucher.Reservation, error) {
	t.Helper()
	ctx := context.Background()
	first, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = first.Rollback(ctx) })
	var replay bool
	require.NoError(t, first.QueryRow(ctx, firstSQL, now).Scan(&replay))
	require.False(t, replay)

	type result struct {
		res voucher.Reservation
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := s.Reserve(ctx, req, now, ttl)
		done <- result{res, err}
	}()
	eventually(t, "the retry waiting for its first attempt's lock", func() bool {
		var n int
		err := s.Pool().QueryRow(ctx, `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`, "%"+waiting+"%").Scan(&n)
		require.NoError(t, err)
		return n > 0
	})
	require.NoError(t, first.Commit(ctx))
	got := <-done
	return got.res, got.err
}

// A retry of a replacement sent while its first attempt is still
// committing (the client gave up waiting) waits for the first attempt's
// lock on the replaced order; once granted, the replaced order is RELEASED
// and the new order known: the retry answers the replay, not
// REPLACED_ORDER_NOT_HELD (which told the client the replacement failed
// while its new order held the use; found by the fault suite).
func TestReplaceRetryBehindItsFirstAttemptIsAReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
	newVoucher(t, s, "RACE", 1, 1)
	_, err := s.Reserve(ctx, request("RACE", 10, "race-old"), now, ttl)
	require.NoError(t, err)

	req := request("RACE", 10, "race-new")
	req.ReplacesOrderID = "race-old"
	res, err := retryBehindFirstAttempt(t, s,
		`SELECT replay FROM voucherd_replace('RACE', '10', 'race-new', 'race-old', 250000, $1, interval '15 minutes')`,
		req, "voucherd_replace($1")
	require.NoError(t, err)
	require.True(t, res.Replay)
	require.Equal(t, "race-new", res.OrderID)
	require.Equal(t, voucher.StatusReserved, res.Status)
}

// The same for a reservation of a voucher with a money budget: a retry
// sent while its first attempt is committing waits for the budget's lock,
// and once granted the first attempt has spent the budget and the orderId is
// known: the retry answers the replay, not BUDGET_EXCEEDED (found by the
// fault suite's budget scenario).
func TestReserveRetryBehindItsFirstAttemptIsAReplayUnderABudget(t *testing.T) {
	t.Parallel()
	s := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
	newVoucher(t, s, "BRACE", 10, 1, func(v *voucher.Voucher) { v.DiscountAmount, v.Budget.Amount = 1_000, 1_000 })

	res, err := retryBehindFirstAttempt(t, s,
		`SELECT replay FROM voucherd_reserve_one('BRACE', '10', 'brace-1', 250000, $1, interval '15 minutes')`,
		request("BRACE", 10, "brace-1"), "voucherd_reserve_one($1")
	require.NoError(t, err)
	require.True(t, res.Replay)
	require.Equal(t, "brace-1", res.OrderID)
	require.Equal(t, int64(1_000), res.DiscountAmount)
}
