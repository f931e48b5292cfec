package pgstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

func event(code string, customer int64, orderID string) voucher.ReservedEvent {
	return voucher.EventFromHold(code, voucher.Hold{
		OrderID: orderID, CustomerID: strconv.FormatInt(customer, 10), OrderAmount: 250_000, DiscountAmount: 100_000,
		ReservedAt: now, ExpiresAt: now.Add(ttl),
	})
}

func outcomes(results []voucher.ApplyResult) []voucher.ApplyOutcome {
	out := make([]voucher.ApplyOutcome, len(results))
	for i, r := range results {
		out[i] = r.Outcome
	}
	return out
}

func TestApplyReservedBatchAndRedelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "KAFKA", 10, 2)

	batch := []voucher.ReservedEvent{
		event("KAFKA", 1, "o-1"), event("KAFKA", 1, "o-2"), event("KAFKA", 2, "o-3"),
		event("KAFKA", 3, "o-4"), event("KAFKA", 4, "o-5"),
	}
	results, err := s.ApplyReserved(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.Applied, voucher.Applied, voucher.Applied, voucher.Applied, voucher.Applied}, outcomes(results))
	after := readCounts(t, s, "KAFKA")
	require.Equal(t, counts{UsedCount: 5, Held: 5, Rows: 5, UsageRows: 4, CustomerSum: 5}, after)
	assertConsistent(t, s, "KAFKA")

	r, err := s.Redemption(ctx, "KAFKA", "o-1")
	require.NoError(t, err)
	require.Equal(t, batch[0].Redemption(), r, "the redemption is the event's, timestamps included")

	// Redelivery of the batch, and of one event within a new batch.
	results, err = s.ApplyReserved(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.AlreadyApplied, voucher.AlreadyApplied, voucher.AlreadyApplied, voucher.AlreadyApplied, voucher.AlreadyApplied}, outcomes(results))
	require.Equal(t, after, readCounts(t, s, "KAFKA"), "a redelivery changes nothing")

	results, err = s.ApplyReserved(ctx, []voucher.ReservedEvent{event("KAFKA", 5, "o-6"), batch[2], event("KAFKA", 5, "o-6")})
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.Applied, voucher.AlreadyApplied, voucher.AlreadyApplied}, outcomes(results),
		"a repeat within one batch counts once")
	require.Equal(t, int32(6), readCounts(t, s, "KAFKA").UsedCount)

	// A released orderId stays released.
	_, _, err = s.Release(ctx, "KAFKA", "o-1", now)
	require.NoError(t, err)
	results, err = s.ApplyReserved(ctx, batch[:1])
	require.NoError(t, err)
	require.Equal(t, voucher.AlreadyApplied, results[0].Outcome)
	got, err := s.Redemption(ctx, "KAFKA", "o-1")
	require.NoError(t, err)
	require.Equal(t, voucher.StatusReleased, got.Status)
	assertConsistent(t, s, "KAFKA")

	results, err = s.ApplyReserved(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, results)
}

// The events the database refuses are Rejected with a reason; the others of
// the batch are applied.
func TestApplyReservedMixedBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "TINY", 2, 5)
	newVoucher(t, s, "SOLO", 10, 1)
	_, err := s.Reserve(ctx, request("SOLO", 7, "held-7"), now, ttl)
	require.NoError(t, err)

	batch := []voucher.ReservedEvent{
		event("TINY", 1, "o-1"),
		event("GHOST", 1, "o-2"), // unknown voucher
		event("TINY", 2, "o-3"),
		event("TINY", 3, "o-4"), // third use of a 2-use voucher
		event("SOLO", 8, "o-5"),
		event("SOLO", 7, "o-6"),    // customer 7 already holds SOLO's one use per customer
		event("SOLO", 9, "held-7"), // orderId known with another customer
	}
	results, err := s.ApplyReserved(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{
		voucher.Applied, voucher.Rejected, voucher.Applied, voucher.Rejected,
		voucher.Applied, voucher.Rejected, voucher.Rejected,
	}, outcomes(results))
	require.Equal(t, "unknown voucher GHOST", results[1].Reason)
	require.Equal(t, "check_violation: voucher_used_count_le_total_limit", results[3].Reason)
	require.Contains(t, results[5].Reason, "per_user_limit: customer 7 would hold 2 uses of voucher SOLO")
	require.Contains(t, results[6].Reason, "order_conflict")

	require.Equal(t, counts{UsedCount: 2, Held: 2, Rows: 2, UsageRows: 2, CustomerSum: 2}, readCounts(t, s, "TINY"))
	require.Equal(t, counts{UsedCount: 2, Held: 2, Rows: 2, UsageRows: 2, CustomerSum: 2}, readCounts(t, s, "SOLO"))
	assertConsistent(t, s, "TINY")
	assertConsistent(t, s, "SOLO")

	// The same mixed batch again: the applied ones are known, the rejected
	// ones are still rejected.
	results, err = s.ApplyReserved(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{
		voucher.AlreadyApplied, voucher.Rejected, voucher.AlreadyApplied, voucher.Rejected,
		voucher.AlreadyApplied, voucher.Rejected, voucher.Rejected,
	}, outcomes(results))
}

// Consumers of several partitions applying at once, with expiry running,
// keep the counters right.
func TestApplyReservedConcurrentWithExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	codes := []string{"P-A", "P-B"}
	for _, code := range codes {
		newVoucher(t, s, code, 1000, 100)
	}
	errs := concurrently(6, func(w int) error {
		if w == 5 {
			for i := 0; i < 10; i++ {
				if _, err := s.ExpireDue(ctx, now.Add(time.Hour), 20); err != nil {
					return err
				}
			}
			return nil
		}
		for b := 0; b < 5; b++ {
			var batch []voucher.ReservedEvent
			for i := 0; i < 20; i++ {
				e := event(codes[(w+i)%2], int64(1+i%7), fmt.Sprintf("w%d-b%d-%d", w, b, i))
				if i%3 == 0 {
					e.ExpiresAt = now.Add(-time.Second) // due for the sweep
				}
				batch = append(batch, e)
			}
			results, err := s.ApplyReserved(ctx, batch)
			if err != nil {
				return err
			}
			for _, r := range results {
				if r.Outcome != voucher.Applied {
					return fmt.Errorf("unexpected outcome %v %s", r.Outcome, r.Reason)
				}
			}
		}
		return nil
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	for _, code := range codes {
		assertConsistent(t, s, code)
	}
}

// AbandonOrder fences an orderId whose event has not arrived: a RELEASED row
// that takes no use, so the late event changes nothing; an orderId with a
// row keeps it.
func TestAbandonOrderFencesALateEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "FENCE", 10, 1)
	_, err := s.ApplyReserved(ctx, []voucher.ReservedEvent{event("FENCE", 1, "f-1")})
	require.NoError(t, err)
	before := readCounts(t, s, "FENCE")

	hold := func(customer int64, orderID string) voucher.Hold {
		return voucher.Hold{OrderID: orderID, CustomerID: strconv.FormatInt(customer, 10), OrderAmount: 250_000, DiscountAmount: 100_000,
			ReservedAt: now, ExpiresAt: now.Add(ttl), Pending: true}
	}
	late := event("FENCE", 2, "f-2")
	row, inserted, err := s.AbandonOrder(ctx, "FENCE", hold(2, "f-2"), now)
	require.NoError(t, err)
	require.True(t, inserted)
	require.Equal(t, voucher.StatusReleased, row.Status)
	require.Equal(t, "2", row.CustomerID)
	after := readCounts(t, s, "FENCE")
	require.Equal(t, before.UsedCount, after.UsedCount, "a fence takes no use")
	require.Equal(t, before.CustomerSum, after.CustomerSum)

	results, err := s.ApplyReserved(ctx, []voucher.ReservedEvent{late})
	require.NoError(t, err)
	require.Equal(t, voucher.AlreadyApplied, results[0].Outcome)
	got, err := s.Redemption(ctx, "FENCE", "f-2")
	require.NoError(t, err)
	require.Equal(t, voucher.StatusReleased, got.Status, "the late event changes nothing")
	require.Equal(t, after.UsedCount, readCounts(t, s, "FENCE").UsedCount)

	// Customer 2 may reserve again; an orderId with a row is not fenced.
	_, err = s.ApplyReserved(ctx, []voucher.ReservedEvent{event("FENCE", 2, "f-3")})
	require.NoError(t, err)
	row, inserted, err = s.AbandonOrder(ctx, "FENCE", hold(1, "f-1"), now)
	require.NoError(t, err)
	require.False(t, inserted)
	require.Equal(t, voucher.StatusReserved, row.Status)
	assertConsistent(t, s, "FENCE")
}

// AbandonOrder of a replacement's hold (docs/faults.md, finding 14): the
// gate already marked the replaced order released, so the fence releases
// it too (its use given back), when it is still the customer's RESERVED
// hold; a confirmed one, another customer's, or one the new order's row
// already stands for is left alone. The replacement's late event then
// changes nothing.
func TestAbandonReplacementReleasesTheReplacedOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "FENCER", 10, 1)
	_, err := s.ApplyReserved(ctx, []voucher.ReservedEvent{event("FENCER", 1, "r-1"), event("FENCER", 2, "r-2"),
		event("FENCER", 3, "r-3")})
	require.NoError(t, err)
	_, err = s.Confirm(ctx, "FENCER", "r-3", now)
	require.NoError(t, err)
	replacing := func(customer int64, orderID, replaces string) voucher.Hold {
		return voucher.Hold{OrderID: orderID, CustomerID: strconv.FormatInt(customer, 10), OrderAmount: 250_000,
			DiscountAmount: 100_000, ReservedAt: now, ExpiresAt: now.Add(ttl), Pending: true, Replaces: replaces}
	}
	status := func(orderID string) voucher.Status {
		r, err := s.Redemption(ctx, "FENCER", orderID)
		require.NoError(t, err)
		return r.Status
	}

	row, inserted, err := s.AbandonOrder(ctx, "FENCER", replacing(1, "r-1b", "r-1"), now)
	require.NoError(t, err)
	require.True(t, inserted)
	require.Equal(t, voucher.StatusReleased, row.Status)
	require.Equal(t, voucher.StatusReleased, status("r-1"), "the replaced order is released with the fence")
	require.EqualValues(t, 2, readCounts(t, s, "FENCER").UsedCount, "its use is given back")
	late := voucher.EventFromHold("FENCER", replacing(1, "r-1b", "r-1"))
	results, err := s.ApplyReserved(ctx, []voucher.ReservedEvent{late})
	require.NoError(t, err)
	require.Equal(t, voucher.AlreadyApplied, results[0].Outcome)
	require.Equal(t, voucher.StatusReleased, status("r-1b"), "the late event changes nothing")

	_, inserted, err = s.AbandonOrder(ctx, "FENCER", replacing(1, "r-2b", "r-2"), now)
	require.NoError(t, err)
	require.True(t, inserted)
	require.Equal(t, voucher.StatusReserved, status("r-2"), "another customer's order is not released")
	_, inserted, err = s.AbandonOrder(ctx, "FENCER", replacing(3, "r-3b", "r-3"), now)
	require.NoError(t, err)
	require.True(t, inserted)
	require.Equal(t, voucher.StatusConfirmed, status("r-3"), "a confirmed order is not released")
	_, inserted, err = s.AbandonOrder(ctx, "FENCER", replacing(2, "r-2", "r-2x"), now)
	require.NoError(t, err)
	require.False(t, inserted)
	require.EqualValues(t, 2, readCounts(t, s, "FENCER").UsedCount)
	assertConsistent(t, s, "FENCER")
}
