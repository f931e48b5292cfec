package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/voucher"
)

func budgetRequest(code string, customer int64, orderID string, amount int64) voucher.ReserveRequest {
	r := request(code, customer, orderID)
	r.OrderAmount = amount
	return r
}

func requireBudget(t *testing.T, s *pgstore.Store, code string, want voucher.Budget) {
	t.Helper()
	v, err := s.Voucher(context.Background(), code)
	require.NoError(t, err)
	require.Equal(t, want, v.Budget)
	assertConsistent(t, s, code)
}

// A fixed 3,000 with a budget of 10,000: three holds fit, the fourth is
// refused with 1,000 left; a release gives its 3,000 back; a refund of a
// confirmed one too.
func TestBudgetFixed(t *testing.T) {
	t.Parallel()
	forEachCombining(t, func(t *testing.T, s *pgstore.Store) {
		ctx := context.Background()
		newVoucher(t, s, "BUDGET", 100, 5, func(v *voucher.Voucher) {
			v.DiscountAmount, v.Budget.Amount = 3_000, 10_000
		})
		requireBudget(t, s, "BUDGET", voucher.Budget{Amount: 10_000})
		for i := range 3 {
			res, err := s.Reserve(ctx, request("BUDGET", 1, fmt.Sprintf("b-%d", i)), now, ttl)
			require.NoError(t, err)
			require.Equal(t, int64(3_000), res.DiscountAmount)
		}
		_, err := s.Reserve(ctx, request("BUDGET", 2, "b-3"), now, ttl)
		ve := requireCode(t, err, voucher.CodeBudgetExceeded)
		require.Equal(t, voucher.LimitBudget, ve.Limit)
		require.Equal(t, int64(1_000), ve.BudgetRemaining)
		require.Equal(t, ttl, ve.RetryAfter, "RESERVED holds may free some")
		require.Equal(t, "BUDGET_EXCEEDED: the discount does not fit the budget of voucher BUDGET: 1000 left", ve.Error())
		requireBudget(t, s, "BUDGET", voucher.Budget{Amount: 10_000, Held: 9_000, Reserved: 9_000})

		_, released, err := s.Release(ctx, "BUDGET", "b-0", now)
		require.NoError(t, err)
		require.True(t, released)
		requireBudget(t, s, "BUDGET", voucher.Budget{Amount: 10_000, Held: 6_000, Reserved: 6_000})

		_, err = s.Confirm(ctx, "BUDGET", "b-1", now)
		require.NoError(t, err)
		requireBudget(t, s, "BUDGET", voucher.Budget{Amount: 10_000, Held: 6_000, Reserved: 3_000, Confirmed: 3_000})
		_, err = s.Reserve(ctx, request("BUDGET", 2, "b-4"), now, ttl)
		require.NoError(t, err)
		// Every hold CONFIRMED or ours: no retryAfter.
		_, err = s.Confirm(ctx, "BUDGET", "b-2", now)
		require.NoError(t, err)
		_, err = s.Confirm(ctx, "BUDGET", "b-4", now)
		require.NoError(t, err)
		_, err = s.Reserve(ctx, request("BUDGET", 3, "b-5"), now, ttl)
		ve = requireCode(t, err, voucher.CodeBudgetExceeded)
		require.Zero(t, ve.RetryAfter)

		// A refund (release of a CONFIRMED hold) gives the stored amount back.
		_, _, err = s.Release(ctx, "BUDGET", "b-1", now)
		require.NoError(t, err)
		requireBudget(t, s, "BUDGET", voucher.Budget{Amount: 10_000, Held: 6_000, Confirmed: 6_000})
		// An expired hold too.
		_, err = s.Reserve(ctx, request("BUDGET", 3, "b-6"), now, ttl)
		require.NoError(t, err)
		_, err = s.ExpireDue(ctx, now.Add(ttl), 100)
		require.NoError(t, err)
		requireBudget(t, s, "BUDGET", voucher.Budget{Amount: 10_000, Held: 6_000, Confirmed: 6_000})
	})
}

// 10% with a budget of 5,000 on orders of 30,000, 30,000 and 20,000: the
// second does not fit (2,000 left), the third does; with clip the second
// gets the 2,000 left and the third is refused.
func TestBudgetPercent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	percent := func(clip bool) func(v *voucher.Voucher) {
		return func(v *voucher.Voucher) {
			v.DiscountAmount, v.DiscountPercentBP, v.Budget = 0, 1_000, voucher.Budget{Amount: 5_000, Clip: clip}
		}
	}
	newVoucher(t, s, "PCT", 100, 5, percent(false))
	newVoucher(t, s, "CLIP", 100, 5, percent(true))

	res, err := s.Reserve(ctx, budgetRequest("PCT", 1, "p-1", 30_000), now, ttl)
	require.NoError(t, err)
	require.Equal(t, int64(3_000), res.DiscountAmount)
	_, err = s.Reserve(ctx, budgetRequest("PCT", 1, "p-2", 30_000), now, ttl)
	require.Equal(t, int64(2_000), requireCode(t, err, voucher.CodeBudgetExceeded).BudgetRemaining)
	res, err = s.Reserve(ctx, budgetRequest("PCT", 1, "p-3", 20_000), now, ttl)
	require.NoError(t, err)
	require.Equal(t, int64(2_000), res.DiscountAmount)
	requireBudget(t, s, "PCT", voucher.Budget{Amount: 5_000, Held: 5_000, Reserved: 5_000})

	res, err = s.Reserve(ctx, budgetRequest("CLIP", 1, "c-1", 30_000), now, ttl)
	require.NoError(t, err)
	require.Equal(t, int64(3_000), res.DiscountAmount)
	res, err = s.Reserve(ctx, budgetRequest("CLIP", 1, "c-2", 30_000), now, ttl)
	require.NoError(t, err)
	require.Equal(t, int64(2_000), res.DiscountAmount)
	_, err = s.Reserve(ctx, budgetRequest("CLIP", 1, "c-3", 20_000), now, ttl)
	require.Equal(t, int64(0), requireCode(t, err, voucher.CodeBudgetExceeded).BudgetRemaining)
	// A replay answers the stored (clipped) amount.
	res, err = s.Reserve(ctx, budgetRequest("CLIP", 1, "c-2", 30_000), now, ttl)
	require.NoError(t, err)
	require.True(t, res.Replay)
	require.Equal(t, int64(2_000), res.DiscountAmount)
	requireBudget(t, s, "CLIP", voucher.Budget{Amount: 5_000, Held: 5_000, Clip: true, Reserved: 5_000})

	// A replacement gives the replaced hold's stored amount back first.
	r := budgetRequest("CLIP", 1, "c-4", 10_000)
	r.ReplacesOrderID = "c-2"
	res, err = s.Reserve(ctx, r, now, ttl)
	require.NoError(t, err)
	require.Equal(t, int64(1_000), res.DiscountAmount)
	requireBudget(t, s, "CLIP", voucher.Budget{Amount: 5_000, Held: 4_000, Clip: true, Reserved: 4_000})
}

// PATCH may change budgetAmount, never below what is held.
func TestBudgetPatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "PATCHB", 100, 5, func(v *voucher.Voucher) { v.DiscountAmount, v.Budget.Amount = 3_000, 10_000 })
	newVoucher(t, s, "NOBUDGET", 100, 5)
	for i := range 2 {
		_, err := s.Reserve(ctx, request("PATCHB", 1, fmt.Sprintf("pb-%d", i)), now, ttl)
		require.NoError(t, err)
	}
	amount := func(n int64) voucher.Patch { return voucher.Patch{BudgetAmount: &n} }
	_, _, err := s.PatchVoucher(ctx, "PATCHB", amount(5_999))
	ve := requireCode(t, err, voucher.CodeLimitBelowHeld)
	require.Equal(t, voucher.LimitBudget, ve.Limit)
	requireBudget(t, s, "PATCHB", voucher.Budget{Amount: 10_000, Held: 6_000, Reserved: 6_000})

	before, after, err := s.PatchVoucher(ctx, "PATCHB", amount(6_000))
	require.NoError(t, err)
	require.Equal(t, int64(10_000), before.Budget.Amount)
	require.Equal(t, voucher.Budget{Amount: 6_000, Held: 6_000, Reserved: 6_000}, after.Budget)
	_, err = s.Reserve(ctx, request("PATCHB", 1, "pb-9"), now, ttl)
	require.Equal(t, int64(0), requireCode(t, err, voucher.CodeBudgetExceeded).BudgetRemaining)

	_, _, err = s.PatchVoucher(ctx, "NOBUDGET", amount(6_000))
	requireCode(t, err, voucher.CodeBudgetNotSet)
	_, _, err = s.PatchVoucher(ctx, "ABSENT", amount(6_000))
	requireCode(t, err, voucher.CodeVoucherNotFound)
}

// Many customers race for a budget of 100 fixed discounts (totalLimit
// 1,000): exactly 100 win and their discounts sum to the budget; with clip
// on a percentage the sum is exactly the budget too.
func TestBudgetConcurrentNeverOverspends(t *testing.T) {
	t.Parallel()
	forEachCombining(t, func(t *testing.T, s *pgstore.Store) {
		ctx := context.Background()
		newVoucher(t, s, "RACE", 1_000, 1, func(v *voucher.Voucher) { v.DiscountAmount, v.Budget.Amount = 1_000, 100_000 })
		newVoucher(t, s, "RACECLIP", 1_000, 1, func(v *voucher.Voucher) {
			v.DiscountAmount, v.DiscountPercentBP, v.Budget = 0, 1_000, voucher.Budget{Amount: 100_001, Clip: true}
		})
		for _, code := range []string{"RACE", "RACECLIP"} {
			results := concurrently(200, func(i int) reserveResult {
				res, err := s.Reserve(ctx, budgetRequest(code, int64(i+1), fmt.Sprintf("%s-%d", code, i), 12_340+int64(i)), now, ttl)
				return reserveResult{res, err}
			})
			var ok int
			var sum int64
			for _, r := range results {
				if r.err == nil {
					ok++
					sum += r.res.DiscountAmount
					require.Positive(t, r.res.DiscountAmount)
					continue
				}
				ve := requireCode(t, r.err, voucher.CodeBudgetExceeded)
				require.Equal(t, voucher.LimitBudget, ve.Limit)
			}
			want := int64(100_000)
			if code == "RACE" {
				require.Equal(t, 100, ok)
			} else {
				want = 100_001
			}
			require.Equal(t, want, sum, code)
			assertConsistent(t, s, code)
		}
	})
}

// The batch function decides a budget in one go: the grants in arrival
// order, each refusal with what is left (and a retry time while holds are
// RESERVED), the placeholders of refused elements gone, clipped discounts
// stored, and one update of the counter.
func TestBudgetBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "BATCHB", 10, 1, func(v *voucher.Voucher) { v.DiscountAmount, v.Budget.Amount = 3_000, 10_000 })
	newVoucher(t, s, "BATCHC", 10, 1, func(v *voucher.Voucher) {
		v.DiscountAmount, v.DiscountPercentBP, v.Budget = 0, 1_000, voucher.Budget{Amount: 5_000, Clip: true}
	})
	elems := func(prefix string, amounts ...int64) []elem {
		out := make([]elem, len(amounts))
		for i, a := range amounts {
			out[i] = elem{customer: fmt.Sprint(i + 1), order: fmt.Sprintf("%s-%d", prefix, i), amount: a}
		}
		return out
	}
	answers, err := reserveBatchSQL(ctx, s, "BATCHB", now, elems("bb", 50_000, 50_000, 50_000, 50_000, 50_000))
	require.NoError(t, err)
	for i, a := range answers {
		if i < 3 {
			require.Empty(t, a.Code, "element %d", i)
			require.Equal(t, int64(3_000), a.Redemption.DiscountAmount)
			continue
		}
		require.Equal(t, voucher.CodeBudgetExceeded, a.Code, "element %d", i)
		require.Equal(t, "the discount does not fit the budget of voucher BATCHB: 1000 left", a.Message)
		require.Equal(t, ttl, a.RetryAfter)
	}
	requireBudget(t, s, "BATCHB", voucher.Budget{Amount: 10_000, Held: 9_000, Reserved: 9_000})

	answers, err = reserveBatchSQL(ctx, s, "BATCHC", now, elems("bc", 30_000, 30_000, 20_000))
	require.NoError(t, err)
	require.Empty(t, answers[0].Code)
	require.Equal(t, int64(3_000), answers[0].Redemption.DiscountAmount)
	require.Empty(t, answers[1].Code)
	require.Equal(t, int64(2_000), answers[1].Redemption.DiscountAmount)
	require.Equal(t, voucher.CodeBudgetExceeded, answers[2].Code)
	requireBudget(t, s, "BATCHC", voucher.Budget{Amount: 5_000, Held: 5_000, Clip: true, Reserved: 5_000})
	r, err := s.Redemption(ctx, "BATCHC", "bc-1")
	require.NoError(t, err)
	require.Equal(t, int64(2_000), r.DiscountAmount, "the stored discount is the clipped one")
}

// The Kafka consumer stores each event's discount, which the trigger counts:
// an event past the budget is refused for good (the gate never sends one;
// the CHECK is the last line of defence), the others of its batch applied,
// and a replacement gives the replaced discount back first.
func TestBudgetApplyReserved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "KBUDGET", 10, 5, func(v *voucher.Voucher) { v.DiscountAmount, v.Budget.Amount = 2_000, 5_000 })
	ev := func(customer int64, order string, discount int64) voucher.ReservedEvent {
		e := event("KBUDGET", customer, order)
		e.DiscountAmount = discount
		return e
	}
	results, err := s.ApplyReserved(ctx, []voucher.ReservedEvent{ev(1, "k-1", 2_000), ev(2, "k-2", 2_000), ev(3, "k-3", 2_000)})
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.Applied, voucher.Applied, voucher.Rejected}, outcomes(results))
	require.Equal(t, "check_violation: voucher_limit_held_le_cap", results[2].Reason)
	requireBudget(t, s, "KBUDGET", voucher.Budget{Amount: 5_000, Held: 4_000, Reserved: 4_000})

	r := ev(1, "k-4", 3_000)
	r.ReplacesOrderID = "k-1"
	results, err = s.ApplyReserved(ctx, []voucher.ReservedEvent{r, ev(3, "k-5", 1_000)})
	require.NoError(t, err)
	require.Equal(t, []voucher.ApplyOutcome{voucher.Applied, voucher.Rejected}, outcomes(results))
	requireBudget(t, s, "KBUDGET", voucher.Budget{Amount: 5_000, Held: 5_000, Reserved: 5_000})
}

// A confirmation or an extension that finds its hold expired releases it and
// gives its discount back; an extension in time keeps it.
func TestBudgetLateConfirmAndExtend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "LATEB", 10, 5, func(v *voucher.Voucher) { v.DiscountAmount, v.Budget.Amount = 1_000, 5_000 })
	for _, o := range []string{"l-1", "l-2", "l-3"} {
		_, err := s.Reserve(ctx, request("LATEB", 1, o), now, ttl)
		require.NoError(t, err)
	}
	_, err := s.Confirm(ctx, "LATEB", "l-1", now.Add(ttl))
	requireCode(t, err, voucher.CodeReservationReleased)
	requireBudget(t, s, "LATEB", voucher.Budget{Amount: 5_000, Held: 2_000, Reserved: 2_000})
	_, err = s.Extend(ctx, "LATEB", "l-2", now.Add(ttl+time.Minute), now.Add(ttl), time.Hour)
	requireCode(t, err, voucher.CodeReservationReleased)
	requireBudget(t, s, "LATEB", voucher.Budget{Amount: 5_000, Held: 1_000, Reserved: 1_000})
	_, err = s.Extend(ctx, "LATEB", "l-3", now.Add(ttl+time.Minute), now, time.Hour)
	require.NoError(t, err)
	requireBudget(t, s, "LATEB", voucher.Budget{Amount: 5_000, Held: 1_000, Reserved: 1_000})
}

// One sweep expiring the holds of several budgeted vouchers gives each its
// discounts back.
func TestBudgetExpirySweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	for _, code := range []string{"SWEEPA", "SWEEPB"} {
		newVoucher(t, s, code, 10, 5, func(v *voucher.Voucher) { v.DiscountAmount, v.Budget.Amount = 1_000, 5_000 })
	}
	newVoucher(t, s, "SWEEPC", 10, 5)
	for i := range 3 {
		for _, code := range []string{"SWEEPB", "SWEEPA", "SWEEPC"} {
			_, err := s.Reserve(ctx, request(code, 1, fmt.Sprintf("%s-%d", code, i)), now.Add(time.Duration(i)*time.Second), ttl)
			require.NoError(t, err)
		}
	}
	expired, err := s.ExpireDue(ctx, now.Add(ttl+time.Second), 100)
	require.NoError(t, err)
	require.Len(t, expired, 6, "two of each voucher")
	requireBudget(t, s, "SWEEPA", voucher.Budget{Amount: 5_000, Held: 1_000, Reserved: 1_000})
	requireBudget(t, s, "SWEEPB", voucher.Budget{Amount: 5_000, Held: 1_000, Reserved: 1_000})
	assertConsistent(t, s, "SWEEPC")
	// A release after the sweep is counted by the trigger again.
	_, _, err = s.Release(ctx, "SWEEPA", "SWEEPA-2", now)
	require.NoError(t, err)
	requireBudget(t, s, "SWEEPA", voucher.Budget{Amount: 5_000})
}
