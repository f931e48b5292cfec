package pgstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/voucher"
)

// The facts a stored function answers are worded by voucher.Reject; text
// that is not facts (a function of an older version) is kept as it is.
func TestRejectionWording(t *testing.T) {
	t.Parallel()
	cases := []struct {
		code, reason, facts string
		retryMS             int64
		want                *voucher.Error
	}{
		{"VOUCHER_NOT_FOUND", "", "voucher=NOPE", 0,
			&voucher.Error{Code: voucher.CodeVoucherNotFound, Message: "voucher NOPE not found"}},
		{"ORDER_CONFLICT", "", "voucher=A order=o-1 uses=B", 0,
			&voucher.Error{Code: voucher.CodeOrderConflict, Message: "order o-1 already uses voucher B"}},
		{"ORDER_CONFLICT", "", "voucher=A order=o-1 uses=A", 0,
			&voucher.Error{Code: voucher.CodeOrderConflict, Message: "order o-1 belongs to another customer"}},
		{"ORDER_RELEASED", "", "voucher=A order=o-1 uses=A", 0,
			&voucher.Error{Code: voucher.CodeOrderReleased, Message: "order o-1 was released; start a new attempt with a new orderId"}},
		{"NOT_ELIGIBLE", "NOT_STARTED", "voucher=A starts=2026-12-01T00:00:00Z ends=2026-12-31T00:00:00Z amount=5 min=10", 0,
			&voucher.Error{Code: voucher.CodeNotEligible, Reason: voucher.ReasonNotStarted, Message: "voucher A starts at 2026-12-01T00:00:00Z"}},
		{"NOT_ELIGIBLE", "EXPIRED", "voucher=A starts=2026-12-01T00:00:00Z ends=2026-12-31T00:00:00Z amount=5 min=10", 0,
			&voucher.Error{Code: voucher.CodeNotEligible, Reason: voucher.ReasonExpired, Message: "voucher A ended at 2026-12-31T00:00:00Z"}},
		{"NOT_ELIGIBLE", "ORDER_AMOUNT_TOO_LOW", "voucher=A starts=2026-12-01T00:00:00Z ends=2026-12-31T00:00:00Z amount=5 min=10", 0,
			&voucher.Error{Code: voucher.CodeNotEligible, Reason: voucher.ReasonOrderAmountTooLow, Message: "order amount 5 is below the minimum 10"}},
		{"OUT_OF_STOCK", "", "voucher=A", 0,
			&voucher.Error{Code: voucher.CodeOutOfStock, Limit: voucher.LimitTotal, Message: "voucher A has no uses left"}},
		{"HELD_OUT", "", "voucher=A", 1500, &voucher.Error{Code: voucher.CodeHeldOut, Limit: voucher.LimitTotal, RetryAfter: 1500 * time.Millisecond,
			Message: "voucher A has no free uses; some are held by reservations that may still be released"}},
		{"HELD_OUT", "", "voucher=A", 0, &voucher.Error{Code: voucher.CodeHeldOut, Limit: voucher.LimitTotal, RetryAfter: time.Second,
			Message: "voucher A has no free uses; some are held by reservations that may still be released"}},
		{"ALREADY_USED", "", "voucher=A customer=7 limit=2", 0,
			&voucher.Error{Code: voucher.CodeAlreadyUsed, Limit: voucher.LimitPerUser, Message: "customer 7 already holds 2 use(s) of voucher A"}},
		{"RESERVATION_NOT_FOUND", "", "voucher=A order=o-1", 0,
			&voucher.Error{Code: voucher.CodeReservationNotFound, Message: "reservation o-1 of voucher A not found"}},
		{"BUDGET_EXCEEDED", "", "voucher=A budget=1000 retry=2500", 0,
			&voucher.Error{Code: voucher.CodeBudgetExceeded, Limit: voucher.LimitBudget, BudgetRemaining: 1000,
				RetryAfter: 2500 * time.Millisecond, Message: "the discount does not fit the budget of voucher A: 1000 left"}},
		{"BUDGET_EXCEEDED", "", "voucher=A budget=0", 0,
			&voucher.Error{Code: voucher.CodeBudgetExceeded, Limit: voucher.LimitBudget,
				Message: "the discount does not fit the budget of voucher A: 0 left"}},
		// Worded by an older version's functions, or not facts at all.
		{"OUT_OF_STOCK", "", "voucher A has no uses left", 0,
			&voucher.Error{Code: voucher.CodeOutOfStock, Limit: voucher.LimitTotal, Message: "voucher A has no uses left"}},
		{"HELD_OUT", "", "every use is held", 2500,
			&voucher.Error{Code: voucher.CodeHeldOut, Limit: voucher.LimitTotal, Message: "every use is held", RetryAfter: 2500 * time.Millisecond}},
		{"ALREADY_USED", "", "voucher=A customer=x|y limit=2", 0,
			&voucher.Error{Code: voucher.CodeAlreadyUsed, Limit: voucher.LimitPerUser, Message: "voucher=A customer=x|y limit=2"}},
		{"ALREADY_USED", "", "voucher=A customer=jane+1@x.com limit=2", 0,
			&voucher.Error{Code: voucher.CodeAlreadyUsed, Limit: voucher.LimitPerUser, Message: "customer jane+1@x.com already holds 2 use(s) of voucher A"}},
		{"ALREADY_USED", "", "voucher=A colour=red", 0,
			&voucher.Error{Code: voucher.CodeAlreadyUsed, Limit: voucher.LimitPerUser, Message: "voucher=A colour=red"}},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, pgstore.Rejection(tc.code, tc.reason, tc.facts, tc.retryMS), "%s %s", tc.code, tc.facts)
	}
}
