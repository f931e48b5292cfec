package voucher

import (
	"context"
	"time"
)

// Limit names the limit a 409 answer was caused by, so that a checkout can
// say the right thing.
type Limit string

// The limits of a voucher.
const (
	// LimitTotal: no use of the voucher is free (OUT_OF_STOCK, HELD_OUT).
	LimitTotal Limit = "total"
	// LimitPerUser: the customer holds perUserLimit uses (ALREADY_USED).
	LimitPerUser Limit = "perUser"
	// LimitBudget: the order's discount does not fit the money budget
	// (BUDGET_EXCEEDED).
	LimitBudget Limit = "budget"
)

// CodeBudgetNotSet refuses a PATCH of budgetAmount on a voucher created
// without a money budget: a counter added later could miss a reservation in
// flight, so a budget is set when the voucher is created.
const CodeBudgetNotSet ErrorCode = "BUDGET_NOT_SET"

// CodeBudgetExceeded refuses a reservation whose discount does not fit what
// is left of the voucher's money budget; Error.BudgetRemaining says what is
// left, Error.RetryAfter (when set) when a RESERVED hold may free some.
const CodeBudgetExceeded ErrorCode = "BUDGET_EXCEEDED"

// Budget is a voucher's money budget: the most discount money, in minor
// units, its held (RESERVED and CONFIRMED) uses may give out together. A
// hold keeps the discount it was given; releasing it (release, expiry,
// refund, replacement) gives exactly that back.
type Budget struct {
	// Amount is the budget; 0 means the voucher has none.
	Amount int64
	// Clip gives a reservation whose discount does not fit what is left of
	// the budget instead of BUDGET_EXCEEDED (never 0: an exhausted budget
	// refuses).
	Clip bool
	// Held, Reserved and Confirmed are the discounts held now: Held as the
	// store's counter has it, Reserved and Confirmed summed by status.
	// Filled by reads that ask for live counts.
	Held, Reserved, Confirmed int64
}

// Remaining is what is left of the budget to give out; 0 without one.
func (b Budget) Remaining() int64 { return max(b.Amount-b.Held, 0) }

// Validate checks the budget's ranges.
func (b Budget) Validate() error {
	switch {
	case b.Amount < 0 || b.Amount > MaxAmount:
		return Errorf(CodeInvalidRequest, "budgetAmount must be from 1 to %d", int64(MaxAmount))
	case b.Clip && b.Amount == 0:
		return Errorf(CodeInvalidRequest, "budgetShortfall clip needs a budgetAmount")
	}
	return nil
}

// Fit is the budget rule: the discount a new hold of discount gets when
// left is what remains of the budget, or ok false for BUDGET_EXCEEDED. A
// budget fits a hold while something is left and the discount is at most
// that; with Clip the hold gets what is left instead. The same rule runs in
// voucherd_limit_fit (PostgreSQL) and lib/take_checks.lua (the gate).
func (b Budget) Fit(discount, left int64) (int64, bool) {
	switch {
	case b.Amount == 0:
		return discount, true
	case left > 0 && discount <= left:
		return discount, true
	case left > 0 && b.Clip:
		return left, true
	}
	return 0, false
}

// BudgetExceeded returns the BUDGET_EXCEEDED answer for voucher code with
// remaining left; retryAfter > 0 when a RESERVED hold may free some.
func BudgetExceeded(code string, remaining int64, retryAfter time.Duration) *Error {
	return Reject(CodeBudgetExceeded, "", Facts{Voucher: code, BudgetRemaining: remaining, RetryAfter: retryAfter})
}

// budgetExceeded is the flash paths' BUDGET_EXCEEDED for the gate's
// refusal dec (dec.BudgetLeft: what the gate has left of the budget): with
// a Retry-After while a RESERVED hold may free some, without one when none
// is known. A hold is known from the store (the holds read for HELD_OUT,
// cached the same way) or, when the store records fewer held uses than the
// gate holds (Kafka mode, or writes in flight), from the gate: those holds
// are RESERVED and fresh, and expire about a TTL from now, as stockAnswer
// says for HELD_OUT. A decision made from the gate's local copy (dec.Local)
// carries no count of held uses.
func (p *flashPath) budgetExceeded(ctx context.Context, rt route, dec GateDecision, now time.Time) error {
	var retry time.Duration
	if _, sum, err := p.holds(ctx, rt.gateCode(), now); err == nil {
		switch {
		case !sum.EarliestExpiry.IsZero():
			retry = max(sum.EarliestExpiry.Sub(now), time.Second)
		case !dec.Local && int64(sum.TotalLimit)-dec.Remaining > int64(sum.UsedCount):
			retry = p.cfg.ReservationTTL
		}
	}
	return BudgetExceeded(rt.code, max(dec.BudgetLeft, 0), retry)
}

// rediscount makes the gate's hold carry the discount the store gave the
// order, when a clipping budget made them differ: in sync mode the gate
// fits takes in the order it sees them, the store (which answers) in the
// order their writes arrive, so near the end of a budget the remainder may
// land on another order in each. One script (Gate.Rediscount) rewrites
// the hold's discount and moves the gate's budget counter by the
// difference: the use stays held throughout. A hold it cannot correct
// keeps the gate's discount (reconciliation reports it as budgetDrift).
func (w *syncWrites) rediscount(ctx context.Context, rt route, hold Hold, res Reservation) {
	if !rt.v.Budget.Clip || res.Replay || res.DiscountAmount == hold.DiscountAmount {
		return
	}
	code := rt.gateCode()
	if _, err := w.gate.Rediscount(ctx, code, hold.OrderID, res.DiscountAmount); err != nil {
		w.log.WarnContext(ctx, "budget: the gate's hold keeps its discount", "code", code, "orderId", hold.OrderID, "err", err)
	}
}

// clippedByBudget reports whether discount, less than the want the
// voucher's discount gives, is what a clipping money budget may have given
// instead: what was left of it, never 0. The store's CHECK keeps the sum
// within the budget.
func clippedByBudget(v Voucher, discount, want int64) bool {
	return v.Budget.Clip && v.Budget.Amount > 0 && discount > 0 && discount < want
}
