package voucher

import (
	"fmt"
	"time"
)

// Facts are what the answer of a reservation rule is worded from. Every
// implementation of a rule (the stored functions, the Redis gate, the
// service) reports the code, the reason and these facts; Reject words them,
// so that one rule answers in the same words on every path.
type Facts struct {
	// Voucher is the code of the voucher asked for.
	Voucher string
	// OrderID is the orderId asked with.
	OrderID string
	// UsesVoucher is, for ORDER_CONFLICT, the voucher the orderId already
	// uses when it is known; "" or Voucher means another customer has it.
	UsesVoucher string
	// CustomerID and PerUserLimit word ALREADY_USED.
	CustomerID   string
	PerUserLimit int32
	// StartsAt, EndsAt, OrderAmount and MinOrderAmount word NOT_ELIGIBLE.
	StartsAt, EndsAt            time.Time
	OrderAmount, MinOrderAmount int64
	// Currency (the request's) and VoucherCurrency word CURRENCY_MISMATCH.
	Currency, VoucherCurrency string
	// RetryAfter is, for HELD_OUT (and BUDGET_EXCEEDED when positive), the
	// time until the earliest hold expires.
	RetryAfter time.Duration
	// BudgetRemaining is, for BUDGET_EXCEEDED, what is left of the budget.
	BudgetRemaining int64
	// Window marks OUT_OF_STOCK and HELD_OUT caused by the quota of the
	// occurrence the reservation falls in (LimitWindow), not by totalLimit.
	Window bool
	// NextWindowAt is, for OUTSIDE_WINDOW and a full occurrence, when the
	// voucher's next occurrence starts (zero: none before it ends).
	NextWindowAt time.Time
}

// ruleMessages is the one table of the rule answers' wording, by code.
var ruleMessages = map[ErrorCode]func(Reason, Facts) string{
	CodeVoucherNotFound: func(_ Reason, f Facts) string {
		return fmt.Sprintf("voucher %s not found", f.Voucher)
	},
	CodeReservationNotFound: func(_ Reason, f Facts) string {
		return fmt.Sprintf("reservation %s of voucher %s not found", f.OrderID, f.Voucher)
	},
	CodeOrderConflict: func(_ Reason, f Facts) string {
		if f.UsesVoucher != "" && f.UsesVoucher != f.Voucher {
			return fmt.Sprintf("order %s already uses voucher %s", f.OrderID, f.UsesVoucher)
		}
		return fmt.Sprintf("order %s belongs to another customer", f.OrderID)
	},
	CodeOrderReleased: func(_ Reason, f Facts) string {
		return fmt.Sprintf("order %s was released; start a new attempt with a new orderId", f.OrderID)
	},
	CodeNotEligible: func(r Reason, f Facts) string {
		switch r {
		case ReasonDisabled:
			return fmt.Sprintf("voucher %s is disabled", f.Voucher)
		case ReasonNotStarted:
			return fmt.Sprintf("voucher %s starts at %s", f.Voucher, f.StartsAt.UTC().Format(time.RFC3339))
		case ReasonExpired:
			return fmt.Sprintf("voucher %s ended at %s", f.Voucher, f.EndsAt.UTC().Format(time.RFC3339))
		case ReasonOrderAmountTooLow:
			return fmt.Sprintf("order amount %d is below the minimum %d", f.OrderAmount, f.MinOrderAmount)
		case ReasonCustomerMismatch:
			return fmt.Sprintf("voucher %s belongs to another customer", f.Voucher)
		case ReasonOutsideWindow:
			if f.NextWindowAt.IsZero() {
				return fmt.Sprintf("voucher %s is outside its windows and none starts before it ends", f.Voucher)
			}
			return fmt.Sprintf("voucher %s is outside its windows; the next starts at %s", f.Voucher, f.NextWindowAt.UTC().Format(time.RFC3339))
		case ReasonCurrencyMismatch:
			if f.Currency == "" {
				return fmt.Sprintf("voucher %s is in %s; the order names no currency", f.Voucher, f.VoucherCurrency)
			}
			return fmt.Sprintf("voucher %s is in %s, the order in %s", f.Voucher, f.VoucherCurrency, f.Currency)
		}
		return fmt.Sprintf("voucher %s cannot be used for this order", f.Voucher)
	},
	CodeReplacedOrderNotHeld: func(_ Reason, f Facts) string {
		return fmt.Sprintf("order %s is not a RESERVED hold of customer %s on voucher %s; nothing was replaced",
			f.OrderID, f.CustomerID, f.Voucher)
	},
	CodeOutOfStock: func(_ Reason, f Facts) string {
		if f.Window {
			return fmt.Sprintf("voucher %s has no uses left in this window", f.Voucher)
		}
		return fmt.Sprintf("voucher %s has no uses left", f.Voucher)
	},
	CodeHeldOut: func(_ Reason, f Facts) string {
		if f.Window {
			return fmt.Sprintf("voucher %s has no free uses in this window; some are held by reservations that may still be released", f.Voucher)
		}
		return fmt.Sprintf("voucher %s has no free uses; some are held by reservations that may still be released", f.Voucher)
	},
	CodeAlreadyUsed: func(r Reason, f Facts) string {
		if r == ReasonCodeUsed {
			return fmt.Sprintf("code %s is already used by another order", f.Voucher)
		}
		return fmt.Sprintf("customer %s already holds %d use(s) of voucher %s", f.CustomerID, f.PerUserLimit, f.Voucher)
	},
	CodeBudgetExceeded: func(_ Reason, f Facts) string {
		return fmt.Sprintf("the discount does not fit the budget of voucher %s: %d left", f.Voucher, f.BudgetRemaining)
	},
}

// LimitOf names the limit behind a refusal with code and reason, "" for
// other answers.
func LimitOf(code ErrorCode, reason Reason) Limit {
	switch {
	case code == CodeOutOfStock || code == CodeHeldOut:
		return LimitTotal
	case code == CodeAlreadyUsed && reason != ReasonCodeUsed:
		return LimitPerUser
	case code == CodeBudgetExceeded:
		return LimitBudget
	}
	return ""
}

// Reject is the answer of a reservation rule: code and reason with the
// message worded from f. HELD_OUT carries f.RetryAfter, at least a second (a
// hold already past its expiry waits for the expiry job). A code outside the
// rules keeps its code with a plain message.
func Reject(code ErrorCode, reason Reason, f Facts) *Error {
	e := &Error{Code: code, Reason: reason, Limit: LimitOf(code, reason)}
	if f.Window && e.Limit == LimitTotal {
		e.Limit = LimitWindow
	}
	if e.Limit == LimitWindow || reason == ReasonOutsideWindow {
		e.NextWindowAt = f.NextWindowAt
	}
	if word, ok := ruleMessages[code]; ok {
		e.Message = word(reason, f)
	} else {
		e.Message = fmt.Sprintf("voucher %s: %s", f.Voucher, code)
	}
	switch code {
	case CodeHeldOut:
		e.RetryAfter = max(f.RetryAfter, time.Second)
	case CodeBudgetExceeded:
		e.BudgetRemaining = f.BudgetRemaining
		if f.RetryAfter > 0 {
			e.RetryAfter = max(f.RetryAfter, time.Second)
		}
	}
	return e
}
