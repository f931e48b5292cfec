package pgstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// campaignEvent is the event of a use of flash campaign id taken with code.
func campaignEvent(id, code string, customer int64, orderID string) voucher.ReservedEvent {
	return voucher.EventFromHold(id, voucher.Hold{
		OrderID: orderID, CustomerID: strconv.FormatInt(customer, 10), OrderAmount: 250_000, DiscountAmount: 5_000,
		ReservedAt: now, ExpiresAt: now.Add(ttl), Code: code,
	})
}

// The consumer's apply of a flash campaign's events records each code on
// its redemption, answers redeliveries, and refuses a code of another
// campaign, a use of the budget without a code and a code a live order
// holds; the snapshot the gate loads names each order's code.
func TestCampaignApplyReserved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	_, codes := newCampaign(t, s, "cmp_APPLY", "AP-", 5, 10, 2)
	_, other := newCampaign(t, s, "cmp_OTHER", "OT-", 1, 10, 2)

	batch := []voucher.ReservedEvent{
		campaignEvent("cmp_APPLY", codes[0], 1, "a-1"),
		campaignEvent("cmp_APPLY", codes[1], 1, "a-2"),
		campaignEvent("cmp_APPLY", codes[2], 2, "a-3"),
	}
	results, err := s.ApplyReserved(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.Applied, voucher.Applied, voucher.Applied}, outcomes(results))
	r, err := s.Redemption(ctx, codes[0], "a-1")
	require.NoError(t, err)
	require.Equal(t, batch[0].Redemption(), r, "found and answered by its code")
	results, err = s.ApplyReserved(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.AlreadyApplied, voucher.AlreadyApplied, voucher.AlreadyApplied}, outcomes(results))

	mixed := []voucher.ReservedEvent{
		campaignEvent("cmp_APPLY", other[0], 3, "a-4"),
		event("cmp_APPLY", 3, "a-5"),
		campaignEvent("cmp_APPLY", codes[0], 3, "a-6"),
		campaignEvent("cmp_APPLY", codes[3], 3, "a-7"),
	}
	results, err = s.ApplyReserved(ctx, mixed)
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.Rejected, voucher.Rejected, voucher.Rejected, voucher.Applied}, outcomes(results))
	require.Contains(t, results[0].Reason, "voucher_redemption_code_campaign")
	require.Contains(t, results[1].Reason, "voucher_redemption_code_campaign")
	require.Contains(t, results[2].Reason, "code_used")
	assertConsistent(t, s, "cmp_APPLY")

	// A released order frees its code for the next event.
	_, _, err = s.Release(ctx, codes[0], "a-1", now)
	require.NoError(t, err)
	results, err = s.ApplyReserved(ctx, []voucher.ReservedEvent{campaignEvent("cmp_APPLY", codes[0], 4, "a-8")})
	require.NoError(t, err)
	require.Equal(t, voucher.Applied, results[0].Outcome)

	snap, err := s.GateSnapshot(ctx, "cmp_APPLY")
	require.NoError(t, err)
	require.True(t, snap.Voucher.Campaign)
	byOrder := map[string]string{}
	for _, o := range snap.Orders {
		byOrder[o.OrderID] = o.VoucherCode
	}
	require.Equal(t, map[string]string{"a-1": codes[0], "a-2": codes[1], "a-3": codes[2], "a-7": codes[3], "a-8": codes[0]}, byOrder)
	require.EqualValues(t, 4, snap.Held)
	assertConsistent(t, s, "cmp_APPLY")
}

// A fence of a flash campaign's hold records its code, as every redemption
// of a campaign does, and takes nothing.
func TestCampaignAbandonOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	_, codes := newCampaign(t, s, "cmp_FENCE", "FE-", 2, 10, 1)
	h := voucher.Hold{OrderID: "f-1", CustomerID: "1", OrderAmount: 250_000, DiscountAmount: 5_000,
		ReservedAt: now, ExpiresAt: now.Add(ttl), Pending: true, Code: codes[0]}
	row, inserted, err := s.AbandonOrder(ctx, "cmp_FENCE", h, now)
	require.NoError(t, err)
	require.True(t, inserted)
	require.Equal(t, voucher.StatusReleased, row.Status)
	require.Equal(t, "cmp_FENCE", row.VoucherCode)
	got, err := s.Redemption(ctx, codes[0], "f-1")
	require.NoError(t, err)
	require.Equal(t, voucher.StatusReleased, got.Status)
	results, err := s.ApplyReserved(ctx, []voucher.ReservedEvent{voucher.EventFromHold("cmp_FENCE", h)})
	require.NoError(t, err)
	require.Equal(t, voucher.AlreadyApplied, results[0].Outcome, "the late event takes nothing")
	assertConsistent(t, s, "cmp_FENCE")
}

// A replacement on a campaign code (voucherd_replace, in standard and
// flash-sync mode; voucherd_apply_replace_code from a Kafka event) frees
// the replaced order's code and holds the new order's, the same code or
// another; a code another order holds is CODE_USED and leaves the replaced
// order held.
func TestCampaignReplace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	_, codes := newCampaign(t, s, "cmp_REPL", "RE-", 4, 10, 1)
	replace := func(code string, customer int64, orderID, replaces string) (voucher.Reservation, error) {
		r := request(code, customer, orderID)
		r.ReplacesOrderID = replaces
		return s.Reserve(ctx, r, now, ttl)
	}
	_, err := s.Reserve(ctx, request(codes[0], 1, "r-1"), now, ttl)
	require.NoError(t, err)
	_, err = s.Reserve(ctx, request(codes[3], 2, "r-9"), now, ttl)
	require.NoError(t, err)

	res, err := replace(codes[0], 1, "r-2", "r-1")
	require.NoError(t, err, "the same code")
	require.Equal(t, codes[0], res.VoucherCode)
	res, err = replace(codes[1], 1, "r-3", "r-2")
	require.NoError(t, err, "another code")
	require.Equal(t, codes[1], res.VoucherCode)
	_, err = replace(codes[3], 1, "r-4", "r-3")
	ve := requireCode(t, err, voucher.CodeAlreadyUsed)
	require.Equal(t, voucher.ReasonCodeUsed, ve.Reason)
	got, err := s.Redemption(ctx, codes[1], "r-3")
	require.NoError(t, err)
	require.Equal(t, voucher.StatusReserved, got.Status, "still held")
	res, err = replace(codes[1], 1, "r-3", "r-2")
	require.NoError(t, err)
	require.True(t, res.Replay)
	_, err = replace(codes[0], 1, "r-3", "r-2")
	requireCode(t, err, voucher.CodeOrderConflict)
	_, err = s.Reserve(ctx, request(codes[0], 3, "r-5"), now, ttl)
	require.NoError(t, err, "the first code is free again")
	assertConsistent(t, s, "cmp_REPL")

	// The Kafka path: a replacement event with its campaign code.
	e := campaignEvent("cmp_REPL", codes[2], 1, "r-6")
	e.ReplacesOrderID = "r-3"
	results, err := s.ApplyReserved(ctx, []voucher.ReservedEvent{e})
	require.NoError(t, err)
	require.Equal(t, voucher.Applied, results[0].Outcome, results[0].Reason)
	got, err = s.Redemption(ctx, codes[1], "r-3")
	require.NoError(t, err)
	require.Equal(t, voucher.StatusReleased, got.Status)
	got, err = s.Redemption(ctx, codes[2], "r-6")
	require.NoError(t, err)
	require.Equal(t, voucher.StatusReserved, got.Status)
	results, err = s.ApplyReserved(ctx, []voucher.ReservedEvent{e})
	require.NoError(t, err)
	require.Equal(t, voucher.AlreadyApplied, results[0].Outcome)
	assertConsistent(t, s, "cmp_REPL")
}
