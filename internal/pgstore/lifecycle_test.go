package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

func TestConfirmReleaseStateMachine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "STATES", 10, 2)
	later := now.Add(time.Minute)

	res, err := s.Reserve(ctx, request("STATES", 5, "o-1"), now, ttl)
	require.NoError(t, err)

	// RESERVED -> CONFIRMED, then idempotent.
	confirmed, err := s.Confirm(ctx, "STATES", "o-1", later)
	require.NoError(t, err)
	require.Equal(t, voucher.StatusConfirmed, confirmed.Status)
	require.Equal(t, later, confirmed.UpdatedAt)
	require.Equal(t, res.CreatedAt, confirmed.CreatedAt)
	again, err := s.Confirm(ctx, "STATES", "o-1", later.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, confirmed, again, "a second confirm returns the current state")

	// A confirmed redemption never expires.
	expired, err := s.ExpireDue(ctx, now.Add(24*time.Hour), 100)
	require.NoError(t, err)
	require.Empty(t, expired)

	live, err := s.Voucher(ctx, "STATES")
	require.NoError(t, err)
	require.Equal(t, [3]int32{1, 0, 1}, [3]int32{live.UsedCount, live.Reserved, live.Confirmed})

	// Releasing a CONFIRMED redemption (order refunded) gives the use back.
	rel, released, err := s.Release(ctx, "STATES", "o-1", later)
	require.NoError(t, err)
	require.True(t, released)
	require.Equal(t, voucher.StatusReleased, rel.Status)
	require.Equal(t, counts{UsedCount: 0, Held: 0, Rows: 1, UsageRows: 1, CustomerSum: 0}, readCounts(t, s, "STATES"))

	rel2, released, err := s.Release(ctx, "STATES", "o-1", later.Add(time.Hour))
	require.NoError(t, err)
	require.False(t, released, "a second release changes nothing")
	require.Equal(t, rel, rel2)

	ve := requireCode(t, func() error { _, err := s.Confirm(ctx, "STATES", "o-1", later); return err }(), voucher.CodeReservationReleased)
	require.Equal(t, "reservation o-1 of voucher STATES was released", ve.Message)

	// Unknown orderIds, and known ones asked under another code.
	for _, code := range []string{"STATES", "NOPE"} {
		_, err = s.Confirm(ctx, code, "missing", later)
		requireCode(t, err, voucher.CodeReservationNotFound)
		_, _, err = s.Release(ctx, code, "missing", later)
		requireCode(t, err, voucher.CodeReservationNotFound)
		_, err = s.Redemption(ctx, code, "missing")
		requireCode(t, err, voucher.CodeReservationNotFound)
	}
	newVoucher(t, s, "ELSE", 10, 1)
	_, err = s.Confirm(ctx, "ELSE", "o-1", later)
	requireCode(t, err, voucher.CodeReservationNotFound)

	// Releasing a RESERVED redemption gives the use back too.
	_, err = s.Reserve(ctx, request("STATES", 5, "o-2"), now, ttl)
	require.NoError(t, err)
	_, released, err = s.Release(ctx, "STATES", "o-2", later)
	require.NoError(t, err)
	require.True(t, released)
	require.Equal(t, int32(0), readCounts(t, s, "STATES").UsedCount)
	assertConsistent(t, s, "STATES")

	// The live view's released count: o-1 and o-2, nothing of ELSE.
	n, err := s.ReleasedCount(ctx, "STATES")
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	n, err = s.ReleasedCount(ctx, "ELSE")
	require.NoError(t, err)
	require.Zero(t, n)
}

// Confirming a reservation past its expiry releases it there and then.
func TestConfirmAfterExpiryReleases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "LATE", 10, 1)
	res, err := s.Reserve(ctx, request("LATE", 1, "o-1"), now, time.Second)
	require.NoError(t, err)

	ve := requireCode(t, func() error { _, err := s.Confirm(ctx, "LATE", "o-1", res.ExpiresAt); return err }(), voucher.CodeReservationReleased)
	require.Contains(t, ve.Message, "expired at")
	r, err := s.Redemption(ctx, "LATE", "o-1")
	require.NoError(t, err)
	require.Equal(t, voucher.StatusReleased, r.Status)
	require.Equal(t, counts{Rows: 1, UsageRows: 1}, readCounts(t, s, "LATE"))

	// The sweep has nothing left to do.
	expired, err := s.ExpireDue(ctx, now.Add(time.Hour), 100)
	require.NoError(t, err)
	require.Empty(t, expired)
	assertConsistent(t, s, "LATE")
}

func TestExpireDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "EXP", 10, 2)
	newVoucher(t, s, "EXP2", 10, 2)

	// Reservations 1 s apart, each with a 1 s TTL: o-0 due at now+1s, o-1 at
	// now+2s, ...; o-3 is confirmed and never expires.
	for i := 0; i < 4; i++ {
		code := []string{"EXP", "EXP2"}[i%2]
		_, err := s.Reserve(ctx, request(code, int64(1+i/2), fmt.Sprintf("o-%d", i)), now.Add(time.Duration(i)*time.Second), time.Second)
		require.NoError(t, err)
	}
	_, err := s.Confirm(ctx, "EXP2", "o-3", now.Add(3*time.Second))
	require.NoError(t, err)

	got, err := s.ExpireDue(ctx, now.Add(999*time.Millisecond), 100)
	require.NoError(t, err)
	require.Empty(t, got, "nothing is due before its expiry")

	got, err = s.ExpireDue(ctx, now.Add(2*time.Second), 100)
	require.NoError(t, err)
	require.Len(t, got, 2, "expiry is inclusive: expires_at <= now")
	require.Equal(t, "o-0", got[0].OrderID, "oldest first")
	require.Equal(t, "o-1", got[1].OrderID)
	for _, r := range got {
		require.Equal(t, voucher.StatusReleased, r.Status)
		require.Equal(t, now.Add(2*time.Second), r.UpdatedAt)
	}

	got, err = s.ExpireDue(ctx, now.Add(time.Hour), 0)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "o-2", got[0].OrderID)

	require.Equal(t, int32(0), readCounts(t, s, "EXP").UsedCount)
	require.Equal(t, int32(1), readCounts(t, s, "EXP2").UsedCount, "the confirmed one stays held")
	assertConsistent(t, s, "EXP")
	assertConsistent(t, s, "EXP2")

	// A released use can be taken again by the same customer.
	_, err = s.Reserve(ctx, request("EXP", 1, "o-new"), now.Add(time.Hour), ttl)
	require.NoError(t, err)
	assertConsistent(t, s, "EXP")
}

// Two sweepers at once release every due row exactly once.
func TestExpireDueConcurrentSweepers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	const n = 300
	codes := []string{"SWEEP-A", "SWEEP-B", "SWEEP-C"}
	for _, code := range codes {
		newVoucher(t, s, code, n, 5)
	}
	for i := 0; i < n; i++ {
		// Few customers, so that both sweepers give back to the same
		// counters and voucher rows.
		_, err := s.Reserve(ctx, request(codes[i%3], int64(1+i%60), fmt.Sprintf("o-%d", i)), now, time.Second)
		require.NoError(t, err)
	}

	due := now.Add(2 * time.Second)
	batches := concurrently(2, func(int) []voucher.Redemption {
		var mine []voucher.Redemption
		for {
			got, err := s.ExpireDue(ctx, due, 25)
			if err != nil {
				t.Errorf("ExpireDue: %v", err)
				return mine
			}
			if len(got) == 0 {
				return mine
			}
			mine = append(mine, got...)
		}
	})
	seen := map[string]bool{}
	for _, b := range batches {
		for _, r := range b {
			require.False(t, seen[r.OrderID], "order %s released twice", r.OrderID)
			seen[r.OrderID] = true
		}
	}
	require.Len(t, seen, n)
	for _, code := range codes {
		require.Equal(t, int32(0), readCounts(t, s, code).UsedCount)
		assertConsistent(t, s, code)
	}
}

// A confirm racing the sweep ends in one terminal state with consistent
// counters, whichever wins.
func TestConfirmRacingExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "RACE", 100, 100)

	outcomes := map[string]int{}
	for i := 0; i < 50; i++ {
		orderID := fmt.Sprintf("o-%d", i)
		res, err := s.Reserve(ctx, request("RACE", int64(i+1), orderID), now, time.Second)
		require.NoError(t, err)

		// Even rounds confirm just before the expiry (valid if it wins the
		// lock); odd rounds confirm after it (both sides try to release).
		confirmAt := res.ExpiresAt.Add(-time.Millisecond)
		if i%2 == 1 {
			confirmAt = res.ExpiresAt.Add(time.Millisecond)
		}
		var confirmErr error
		var swept []voucher.Redemption
		concurrently(2, func(k int) struct{} {
			if k == 0 {
				_, confirmErr = s.Confirm(ctx, "RACE", orderID, confirmAt)
			} else {
				var err error
				if swept, err = s.ExpireDue(ctx, res.ExpiresAt.Add(time.Second), 10); err != nil {
					t.Errorf("ExpireDue: %v", err)
				}
			}
			return struct{}{}
		})

		final, err := s.Redemption(ctx, "RACE", orderID)
		require.NoError(t, err)
		switch {
		case confirmErr == nil:
			require.Equal(t, voucher.StatusConfirmed, final.Status)
			require.Empty(t, swept)
			outcomes["confirmed"]++
		case voucher.IsCode(confirmErr, voucher.CodeReservationReleased):
			require.Equal(t, voucher.StatusReleased, final.Status)
			require.LessOrEqual(t, len(swept), 1)
			if len(swept) == 1 {
				outcomes["swept"]++
			} else {
				outcomes["released by confirm"]++
			}
		default:
			t.Fatalf("round %d: unexpected confirm error: %v", i, confirmErr)
		}
		assertConsistent(t, s, "RACE")
	}
	t.Logf("outcomes: %v", outcomes)
	c := readCounts(t, s, "RACE")
	require.Equal(t, int32(outcomes["confirmed"]), c.UsedCount)
}
