package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/voucher"
)

func TestReserve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	v := newVoucher(t, s, "FIRST", 10, 1)

	res, err := s.Reserve(ctx, request("FIRST", 42, "order-42"), now, ttl)
	require.NoError(t, err)
	require.False(t, res.Replay)
	require.Equal(t, voucher.Redemption{
		OrderID: "order-42", VoucherCode: "FIRST", CustomerID: "42", OrderAmount: 250_000,
		DiscountAmount: v.DiscountAmount, Status: voucher.StatusReserved,
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(ttl),
	}, res.Redemption)

	got, err := s.Redemption(ctx, "FIRST", "order-42")
	require.NoError(t, err)
	require.Equal(t, res.Redemption, got)

	live, err := s.Voucher(ctx, "FIRST")
	require.NoError(t, err)
	require.Equal(t, int32(1), live.UsedCount)
	require.Equal(t, int32(1), live.Reserved)
	require.Equal(t, int32(0), live.Confirmed)
	require.Equal(t, int32(9), live.Remaining())
	assertConsistent(t, s, "FIRST")

	for _, bad := range []string{"", "a b", strings.Repeat("c", 65), "a|b"} {
		_, err = s.Reserve(ctx, voucher.ReserveRequest{Code: "FIRST", CustomerID: bad, OrderID: "bad", OrderAmount: 250_000}, now, ttl)
		requireCode(t, err, voucher.CodeInvalidRequest)
	}
	_, err = s.Reserve(ctx, request("FIRST", 1, "o"), now, 0)
	requireCode(t, err, voucher.CodeInvalidRequest)
}

// 200 customers race for a 10-use voucher: exactly 10 win.
func TestReserveConcurrentNeverOversells(t *testing.T) {
	t.Parallel()
	forEachCombining(t, func(t *testing.T, s *pgstore.Store) {
		ctx := context.Background()
		newVoucher(t, s, "FLASH10", 10, 1)

		results := concurrently(200, func(i int) reserveResult {
			res, err := s.Reserve(ctx, request("FLASH10", int64(i+1), fmt.Sprintf("order-%d", i)), now, ttl)
			return reserveResult{res, err}
		})
		var ok, out int
		remaining := map[int64]bool{}
		for _, r := range results {
			switch {
			case r.err == nil:
				ok++
				require.False(t, r.res.Replay)
				require.NotNil(t, r.res.Taken)
				require.Equal(t, int32(10), r.res.Taken.TotalLimit)
				remaining[r.res.Taken.Remaining] = true
			case voucher.IsCode(r.err, voucher.CodeHeldOut):
				// Every use is RESERVED: held out, until the earliest
				// hold expires.
				out++
				require.Equal(t, "HELD_OUT: voucher FLASH10 has no free uses; some are held by reservations that may still be released", r.err.Error())
				var ve *voucher.Error
				require.ErrorAs(t, r.err, &ve)
				require.Equal(t, ttl, ve.RetryAfter)
			default:
				t.Fatalf("unexpected error: %v", r.err)
			}
		}
		require.Equal(t, 10, ok)
		require.Equal(t, 190, out)
		// Each take saw its own count under the row lock: 9, 8, ..., 0 left.
		require.Len(t, remaining, 10)
		for i := int64(0); i < 10; i++ {
			require.True(t, remaining[i], "no take left %d", i)
		}
		c := readCounts(t, s, "FLASH10")
		require.Equal(t, int32(10), c.UsedCount)
		require.Equal(t, int32(10), c.Rows, "rejected reservations leave no rows")
		require.Equal(t, int32(10), c.UsageRows, "rejected reservations leave no customer counters")
		assertConsistent(t, s, "FLASH10")
	})
}

// The same orderId 50 times at once takes one use; every answer is the same
// redemption.
func TestReserveSameOrderConcurrentIsIdempotent(t *testing.T) {
	t.Parallel()
	forEachCombining(t, func(t *testing.T, s *pgstore.Store) {
		ctx := context.Background()
		newVoucher(t, s, "ONCE", 100, 5)

		results := concurrently(50, func(int) reserveResult {
			res, err := s.Reserve(ctx, request("ONCE", 7, "order-7"), now, ttl)
			return reserveResult{res, err}
		})
		replays := 0
		for _, r := range results {
			require.NoError(t, r.err)
			require.Equal(t, results[0].res.Redemption, r.res.Redemption)
			if r.res.Replay {
				replays++
			}
		}
		require.Equal(t, 49, replays)
		c := readCounts(t, s, "ONCE")
		require.Equal(t, counts{UsedCount: 1, Held: 1, Rows: 1, UsageRows: 1, CustomerSum: 1}, c)
		assertConsistent(t, s, "ONCE")
	})
}

// perUserLimit 3: one customer with 20 distinct orders at once gets 3.
func TestReservePerUserLimitConcurrent(t *testing.T) {
	t.Parallel()
	forEachCombining(t, func(t *testing.T, s *pgstore.Store) {
		ctx := context.Background()
		newVoucher(t, s, "THREE", 100, 3)

		results := concurrently(20, func(i int) reserveResult {
			res, err := s.Reserve(ctx, request("THREE", 9, fmt.Sprintf("order-%d", i)), now, ttl)
			return reserveResult{res, err}
		})
		var ok, used int
		for _, r := range results {
			switch {
			case r.err == nil:
				ok++
			case voucher.IsCode(r.err, voucher.CodeAlreadyUsed):
				used++
				require.Contains(t, r.err.Error(), "customer 9 already holds 3 use(s) of voucher THREE")
			default:
				t.Fatalf("unexpected error: %v", r.err)
			}
		}
		require.Equal(t, 3, ok)
		require.Equal(t, 17, used)
		c := readCounts(t, s, "THREE")
		require.Equal(t, counts{UsedCount: 3, Held: 3, Rows: 3, UsageRows: 1, CustomerSum: 3}, c)
		assertConsistent(t, s, "THREE")
	})
}

func TestReserveOrderReuse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "REUSE", 10, 1)
	newVoucher(t, s, "OTHER", 10, 1)

	first, err := s.Reserve(ctx, request("REUSE", 1, "order-a"), now, ttl)
	require.NoError(t, err)

	// The customer's quota is held...
	_, err = s.Reserve(ctx, request("REUSE", 1, "order-b"), now, ttl)
	requireCode(t, err, voucher.CodeAlreadyUsed)
	// ...a retry is a replay...
	again, err := s.Reserve(ctx, request("REUSE", 1, "order-a"), now.Add(time.Minute), ttl)
	require.NoError(t, err)
	require.True(t, again.Replay)
	require.Equal(t, first.Redemption, again.Redemption)
	// ...and the orderId cannot be taken by another customer or voucher.
	_, err = s.Reserve(ctx, request("REUSE", 2, "order-a"), now, ttl)
	requireCode(t, err, voucher.CodeOrderConflict)
	ve := requireCode(t, func() error { _, err := s.Reserve(ctx, request("OTHER", 1, "order-a"), now, ttl); return err }(), voucher.CodeOrderConflict)
	require.Equal(t, "order order-a already uses voucher REUSE", ve.Message)

	// Released: the quota is free again for a new orderId, not for the old one.
	_, released, err := s.Release(ctx, "REUSE", "order-a", now)
	require.NoError(t, err)
	require.True(t, released)
	_, err = s.Reserve(ctx, request("REUSE", 1, "order-a"), now, ttl)
	requireCode(t, err, voucher.CodeOrderReleased)
	res, err := s.Reserve(ctx, request("REUSE", 1, "order-b"), now, ttl)
	require.NoError(t, err)
	require.False(t, res.Replay)

	// Conflict checks come before the stock check and take nothing.
	_, err = s.Reserve(ctx, request("OTHER", 1, "order-b"), now, ttl)
	requireCode(t, err, voucher.CodeOrderConflict)
	require.Equal(t, counts{}, readCounts(t, s, "OTHER"))

	c := readCounts(t, s, "REUSE")
	require.Equal(t, counts{UsedCount: 1, Held: 1, Rows: 2, UsageRows: 1, CustomerSum: 1}, c)
	assertConsistent(t, s, "REUSE")
}

// A rejected reservation changes nothing and says why, in the words of
// voucher.CheckEligible.
func TestReserveEligibility(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	v := newVoucher(t, s, "RULES", 10, 1, func(v *voucher.Voucher) { v.MinOrderAmount = 100_000 })
	// One use held, so that "nothing changed" is checked on non-zero counts.
	_, err := s.Reserve(ctx, voucher.ReserveRequest{Code: "RULES", CustomerID: "1", OrderID: "held", OrderAmount: 100_000}, now, ttl)
	require.NoError(t, err)
	before := readCounts(t, s, "RULES")

	tests := []struct {
		name   string
		code   string
		amount int64
		at     time.Time
		want   voucher.ErrorCode
		reason voucher.Reason
	}{
		{"not started", "RULES", 250_000, base.Add(-time.Second), voucher.CodeNotEligible, voucher.ReasonNotStarted},
		{"ended", "RULES", 250_000, v.EndsAt, voucher.CodeNotEligible, voucher.ReasonExpired},
		{"amount too low", "RULES", 99_999, now, voucher.CodeNotEligible, voucher.ReasonOrderAmountTooLow},
		{"unknown code", "NOPE", 250_000, now, voucher.CodeVoucherNotFound, ""},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := voucher.ReserveRequest{Code: tc.code, CustomerID: "2", OrderID: fmt.Sprintf("o-%d", i), OrderAmount: tc.amount}
			_, err := s.Reserve(ctx, req, tc.at, ttl)
			ve := requireCode(t, err, tc.want)
			require.Equal(t, tc.reason, ve.Reason)
			if tc.want == voucher.CodeNotEligible {
				domain := v.CheckEligible(voucher.Purchase{Amount: tc.amount}, tc.at).(*voucher.Error)
				require.Equal(t, domain.Message, ve.Message, "same words as the domain rule")
			} else {
				require.Equal(t, "voucher NOPE not found", ve.Message)
			}
			_, err = s.Redemption(ctx, tc.code, req.OrderID)
			requireCode(t, err, voucher.CodeReservationNotFound)
		})
	}
	require.Equal(t, before, readCounts(t, s, "RULES"), "rejections change nothing")
	assertConsistent(t, s, "RULES")

	// The window is [startsAt, endsAt): its first instant is in.
	_, err = s.Reserve(ctx, voucher.ReserveRequest{Code: "RULES", CustomerID: "3", OrderID: "edge", OrderAmount: 100_000}, base, ttl)
	require.NoError(t, err)
}

// A voucher with no free use answers HELD_OUT while some use is RESERVED,
// with the time until the earliest hold expires, and OUT_OF_STOCK once
// every use is confirmed; raising the limit sells again.
func TestReserveSoldOutThenRaised(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "TWO", 2, 1)
	for i := 1; i <= 2; i++ {
		// o-1 expires first.
		_, err := s.Reserve(ctx, request("TWO", int64(i), fmt.Sprintf("o-%d", i)), now.Add(time.Duration(i)*time.Minute), ttl)
		require.NoError(t, err)
	}
	at := now.Add(5 * time.Minute)
	_, err := s.Reserve(ctx, request("TWO", 3, "o-3"), at, ttl)
	requireCode(t, err, voucher.CodeHeldOut)
	var ve *voucher.Error
	require.ErrorAs(t, err, &ve)
	require.Equal(t, now.Add(time.Minute+ttl).Sub(at), ve.RetryAfter, "until o-1 expires")

	_, err = s.Confirm(ctx, "TWO", "o-1", at)
	require.NoError(t, err)
	_, err = s.Reserve(ctx, request("TWO", 3, "o-3"), at, ttl)
	require.ErrorAs(t, err, &ve)
	require.Equal(t, voucher.CodeHeldOut, ve.Code)
	require.Equal(t, now.Add(2*time.Minute+ttl).Sub(at), ve.RetryAfter, "until o-2 expires")

	_, err = s.Confirm(ctx, "TWO", "o-2", at)
	require.NoError(t, err)
	_, err = s.Reserve(ctx, request("TWO", 3, "o-3"), at, ttl)
	requireCode(t, err, voucher.CodeOutOfStock)
	require.Equal(t, "OUT_OF_STOCK: voucher TWO has no uses left", err.Error())

	limit := int32(3)
	_, after, err := s.PatchVoucher(ctx, "TWO", voucher.Patch{TotalLimit: &limit})
	require.NoError(t, err)
	require.Equal(t, int32(3), after.TotalLimit)
	_, err = s.Reserve(ctx, request("TWO", 3, "o-3"), now, ttl)
	require.NoError(t, err)
	assertConsistent(t, s, "TWO")
}
