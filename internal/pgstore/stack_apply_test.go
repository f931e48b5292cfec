package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// stackEvent is the event of a stack of codes for customer "7" on an order
// of 20,000, each member's discount 1,000.
func stackEvent(orderID string, codes ...string) voucher.ReservedEvent {
	members := make([]voucher.StackEventMember, len(codes))
	left := int64(20_000)
	for i, code := range codes {
		members[i] = voucher.StackEventMember{Code: code, CustomerID: "7", OrderID: voucher.StackMemberOrderID(orderID, i+1),
			OrderAmount: left, DiscountAmount: 1_000}
		left -= 1_000
	}
	return voucher.ReservedEvent{
		Version: voucher.EventVersionStack, Code: codes[0], CustomerID: "7", OrderID: orderID, OrderAmount: 20_000,
		DiscountAmount: 1_000, ReservedAt: now, ExpiresAt: now.Add(ttl), Members: members, StackCustomerID: "7",
	}
}

// A stack's event writes every member and the stack's rows in one
// transaction, or nothing; a redelivery changes nothing.
func TestApplyStackEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	stackable := func(v *voucher.Voucher) { v.Stacking = voucher.Stacking{Stackable: true} }
	newVoucher(t, s, "SA", 10, 5, stackable)
	newVoucher(t, s, "SB", 2, 5, stackable)

	batch := []voucher.ReservedEvent{event("SB", 1, "single-1"), stackEvent("stack-1", "SB", "SA"), event("SA", 2, "single-2")}
	results, err := s.ApplyReserved(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.Applied, voucher.Applied, voucher.Applied}, outcomes(results))
	st, err := s.Stack(ctx, "stack-1")
	require.NoError(t, err)
	require.Equal(t, "7", st.CustomerID)
	require.Equal(t, int64(20_000), st.OrderAmount)
	require.Len(t, st.Items, 2)
	for i, code := range []string{"SB", "SA"} {
		it := st.Items[i]
		require.Equal(t, code, it.Code)
		require.Equal(t, voucher.StackMemberOrderID("stack-1", i+1), it.Redemption.OrderID)
		require.Equal(t, int64(1_000), it.Redemption.DiscountAmount, "the gate's discount")
		require.Equal(t, voucher.StatusReserved, it.Redemption.Status)
	}
	a, b := readCounts(t, s, "SA"), readCounts(t, s, "SB")
	require.Equal(t, int32(2), a.UsedCount)
	require.Equal(t, int32(2), b.UsedCount)

	// Redelivered, alone and in a batch: nothing changes.
	results, err = s.ApplyReserved(ctx, batch[1:2])
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.AlreadyApplied}, outcomes(results))
	results, err = s.ApplyReserved(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.AlreadyApplied, voucher.AlreadyApplied, voucher.AlreadyApplied}, outcomes(results))
	require.Equal(t, a, readCounts(t, s, "SA"), "a redelivery changes nothing")
	require.Equal(t, b, readCounts(t, s, "SB"), "a redelivery changes nothing")

	// The same orderId with other codes: a conflict, nothing written.
	results, err = s.ApplyReserved(ctx, []voucher.ReservedEvent{stackEvent("stack-1", "SA", "SB")})
	require.NoError(t, err)
	require.Equal(t, voucher.Rejected, results[0].Outcome)
	require.Contains(t, results[0].Reason, "order_conflict")

	// SB is sold out: the stack is refused whole, SA keeps its count.
	results, err = s.ApplyReserved(ctx, []voucher.ReservedEvent{stackEvent("stack-2", "SA", "SB")})
	require.NoError(t, err)
	require.Equal(t, voucher.Rejected, results[0].Outcome)
	require.Contains(t, results[0].Reason, "stack of SA,SB: ")
	require.Equal(t, a, readCounts(t, s, "SA"), "all or none")
	_, err = s.Stack(ctx, "stack-2")
	require.True(t, voucher.IsCode(err, voucher.CodeReservationNotFound), "%v", err)
	_, err = s.Redemption(ctx, "SA", "stack-2")
	require.True(t, voucher.IsCode(err, voucher.CodeReservationNotFound), "%v", err)

	// A member whose orderId the store knows already (a fenced member):
	// the stack is refused whole.
	fenced := stackEvent("stack-3", "SA", "SA2")
	newVoucher(t, s, "SA2", 10, 5, stackable)
	results, err = s.ApplyReserved(ctx, []voucher.ReservedEvent{event("SA2", 7, fenced.Members[1].OrderID)})
	require.NoError(t, err)
	require.Equal(t, voucher.Applied, results[0].Outcome)
	_, _, err = s.Release(ctx, "SA2", fenced.Members[1].OrderID, now)
	require.NoError(t, err)
	results, err = s.ApplyReserved(ctx, []voucher.ReservedEvent{fenced})
	require.NoError(t, err)
	require.Equal(t, voucher.Rejected, results[0].Outcome)
	require.Equal(t, a, readCounts(t, s, "SA"), "all or none")
	_, err = s.Stack(ctx, "stack-3")
	require.True(t, voucher.IsCode(err, voucher.CodeReservationNotFound), "%v", err)
	for _, code := range []string{"SA", "SB", "SA2"} {
		assertConsistent(t, s, code)
	}
}

// replacing is stackEvent of orderID replacing the order replaces, whose
// hold began at heldSince.
func replacing(orderID, replaces string, heldSince time.Time, codes ...string) voucher.ReservedEvent {
	e := stackEvent(orderID, codes...)
	e.ReplacesOrderID, e.HeldSince = replaces, heldSince
	return e
}

// A stack's event that replaces an order releases it (a single, or every
// member of a stack) and writes the new members in one transaction: a
// code in both orders keeps its count, and a refused event changes
// nothing, the replaced order held still.
func TestApplyStackEventReplacing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	stackable := func(v *voucher.Voucher) { v.Stacking = voucher.Stacking{Stackable: true} }
	newVoucher(t, s, "RA", 1, 5, stackable)
	newVoucher(t, s, "RB", 1, 5, stackable)
	newVoucher(t, s, "RC", 2, 5, stackable)
	newVoucher(t, s, "RD", 1, 5, stackable)
	heldSince := now.Add(-time.Minute)
	apply := func(e voucher.ReservedEvent) voucher.ApplyResult {
		t.Helper()
		results, err := s.ApplyReserved(ctx, []voucher.ReservedEvent{e})
		require.NoError(t, err)
		return results[0]
	}
	status := func(code, orderID string) voucher.Status {
		t.Helper()
		r, err := s.Redemption(ctx, code, orderID)
		require.NoError(t, err)
		return r.Status
	}
	used := func(code string) int32 { t.Helper(); return readCounts(t, s, code).UsedCount }

	// A single replaced by a stack keeping its code (RA, limit 1, full).
	require.Equal(t, voucher.Applied, apply(event("RA", 7, "rs-1")).Outcome)
	require.Equal(t, voucher.Applied, apply(replacing("rs-2", "rs-1", heldSince, "RB", "RA")).Outcome)
	require.Equal(t, voucher.StatusReleased, status("RA", "rs-1"))
	require.Equal(t, int32(1), used("RA"), "the use moved")
	require.Equal(t, int32(1), used("RB"))
	st, err := s.Stack(ctx, "rs-2")
	require.NoError(t, err)
	for _, it := range st.Items {
		require.Equal(t, voucher.StatusReserved, it.Redemption.Status)
		r, err := s.Order(ctx, it.Redemption.OrderID)
		require.NoError(t, err)
		require.True(t, r.HoldStart().Equal(heldSince), "the hold continues the replaced one: %v", r.HoldStart())
	}

	// A stack replaced by a stack: RB kept, RA given back, RC taken.
	second := replacing("rs-3", "rs-2", heldSince, "RC", "RB")
	require.Equal(t, voucher.Applied, apply(second).Outcome)
	for _, it := range st.Items {
		require.Equal(t, voucher.StatusReleased, status(it.Code, it.Redemption.OrderID))
	}
	require.Equal(t, []int32{0, 1, 1}, []int32{used("RA"), used("RB"), used("RC")})

	// Redelivered: nothing changes.
	require.Equal(t, voucher.AlreadyApplied, apply(second).Outcome)
	require.Equal(t, []int32{0, 1, 1}, []int32{used("RA"), used("RB"), used("RC")})

	// Refused (RD sold out to another customer): all or none, the replaced
	// stack held still.
	require.Equal(t, voucher.Applied, apply(event("RD", 8, "rs-other")).Outcome)
	res := apply(replacing("rs-4", "rs-3", heldSince, "RA", "RD"))
	require.Equal(t, voucher.Rejected, res.Outcome)
	require.Contains(t, res.Reason, "stack of RA,RD: ")
	for i, code := range []string{"RC", "RB"} {
		require.Equal(t, voucher.StatusReserved, status(code, voucher.StackMemberOrderID("rs-3", i+1)))
	}
	require.Equal(t, []int32{0, 1, 1, 1}, []int32{used("RA"), used("RB"), used("RC"), used("RD")})

	// The replaced order gave its uses back first (a release): the new
	// members take uses like any event's, under the same limits.
	_, err = s.ReleaseStack(ctx, "rs-3", now)
	require.NoError(t, err)
	require.Equal(t, voucher.Applied, apply(replacing("rs-5", "rs-3", time.Time{}, "RB", "RA")).Outcome)
	require.Equal(t, []int32{1, 1, 0}, []int32{used("RA"), used("RB"), used("RC")})
	for _, code := range []string{"RA", "RB", "RC", "RD"} {
		assertConsistent(t, s, code)
	}
}
