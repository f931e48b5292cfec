package pgstore_test

import (
	"context"
	"testing"

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
