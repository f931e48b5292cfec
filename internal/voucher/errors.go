package voucher

import (
	"errors"
	"fmt"
	"time"
)

// ErrorCode is the one error vocabulary of voucherd. Adapters translate driver
// errors into these codes once; the HTTP layer maps each code to a status in
// one table.
type ErrorCode string

// The error codes of the API contract (api/openapi.yaml) plus the few the service needs
// for itself.
const (
	CodeInvalidRequest  ErrorCode = "INVALID_REQUEST"
	CodeUnauthorized    ErrorCode = "UNAUTHORIZED"
	CodeForbidden       ErrorCode = "FORBIDDEN"
	CodeVoucherNotFound ErrorCode = "VOUCHER_NOT_FOUND"
	CodeVoucherExists   ErrorCode = "VOUCHER_EXISTS"
	// CodeCampaignNotFound: no campaign has this id.
	CodeCampaignNotFound    ErrorCode = "CAMPAIGN_NOT_FOUND"
	CodeLimitBelowHeld      ErrorCode = "LIMIT_BELOW_HELD"
	CodeReservationNotFound ErrorCode = "RESERVATION_NOT_FOUND"
	CodeReservationReleased ErrorCode = "RESERVATION_RELEASED"
	// CodeReservationConfirmed refuses to extend a CONFIRMED hold: it no
	// longer expires.
	CodeReservationConfirmed ErrorCode = "RESERVATION_CONFIRMED"
	// CodeOutOfStock: no use is free and every held use is CONFIRMED.
	CodeOutOfStock ErrorCode = "OUT_OF_STOCK"
	// CodeHeldOut: no use is free, but some are held by RESERVED
	// reservations that may still expire or be released; Error.RetryAfter
	// is the time until the earliest of them expires.
	CodeHeldOut       ErrorCode = "HELD_OUT"
	CodeAlreadyUsed   ErrorCode = "ALREADY_USED"
	CodeNotEligible   ErrorCode = "NOT_ELIGIBLE"
	CodeOrderConflict ErrorCode = "ORDER_CONFLICT"
	CodeOrderReleased ErrorCode = "ORDER_RELEASED"
	// CodeReplacedOrderNotHeld refuses a reservation whose replacesOrderId
	// is not the same customer's RESERVED hold on the same voucher
	// (unknown, another voucher's or customer's, confirmed or released):
	// nothing was taken or released.
	CodeReplacedOrderNotHeld ErrorCode = "REPLACED_ORDER_NOT_HELD"
	// CodeNotFlashSale refuses an operation that only flash-sale vouchers
	// have (loading into Redis).
	CodeNotFlashSale ErrorCode = "NOT_FLASH_SALE"
	CodeUnavailable  ErrorCode = "UNAVAILABLE"
	// CodeTooManyRequests refuses a reservation or validation of a
	// customer that looked up too many unknown codes
	// (ServiceConfig.UnknownCodeLimit); Error.RetryAfter says when the
	// block ends.
	CodeTooManyRequests ErrorCode = "TOO_MANY_REQUESTS"
	CodeInternal        ErrorCode = "INTERNAL"
	// CodeWebhookNotFound: no webhook has this id.
	CodeWebhookNotFound ErrorCode = "WEBHOOK_NOT_FOUND"
	// CodeWebhookURLRefused: the webhook URL cannot be called: not an
	// absolute https URL, or its host resolves to a loopback, private or
	// link-local address.
	CodeWebhookURLRefused ErrorCode = "WEBHOOK_URL_REFUSED"
)

// Reason refines CodeNotEligible and CodeAlreadyUsed.
type Reason string

// Reasons a reservation is not eligible.
const (
	ReasonNotStarted        Reason = "NOT_STARTED"
	ReasonExpired           Reason = "EXPIRED"
	ReasonOrderAmountTooLow Reason = "ORDER_AMOUNT_TOO_LOW"
	// ReasonDisabled: the voucher was stopped (PATCH "active": false).
	ReasonDisabled Reason = "DISABLED"
	// ReasonCustomerMismatch: the voucher is bound to another customer.
	ReasonCustomerMismatch Reason = "CUSTOMER_MISMATCH"
	// ReasonCurrencyMismatch: the voucher has a currency and the request
	// names another one, or none.
	ReasonCurrencyMismatch Reason = "CURRENCY_MISMATCH"
	// ReasonCodeUsed refines CodeAlreadyUsed: the campaign code is held by
	// another order (each code is used at most once).
	ReasonCodeUsed Reason = "CODE_USED"
)

// Error is a domain error: a code from the vocabulary, a human message, and
// optionally a reason (for NOT_ELIGIBLE) and the underlying cause.
type Error struct {
	Code    ErrorCode
	Reason  Reason
	Message string
	// RetryAfter, when positive, tells the client when trying again may help.
	RetryAfter time.Duration
	// OutcomeUnknown marks an Unavailable error after which the orderId
	// may hold a use: a write that may have reached the store or Kafka
	// without its answer (a reply lost during or after COMMIT, a deadline
	// while the statement ran, Kafka not acknowledging in time), or a retry
	// of such an order that could not settle it yet. Unlike every other
	// 503, a use may have been taken. Retrying with the same orderId tells
	// which; reconciliation settles it otherwise.
	OutcomeUnknown bool
	// Limit names the limit a refusal was caused by ("" for any other
	// answer); Reject sets it.
	Limit Limit
	// BudgetRemaining is, for BUDGET_EXCEEDED, what is left of the budget.
	BudgetRemaining int64
	// NextWindowAt is, for OUTSIDE_WINDOW and a full occurrence
	// (LimitWindow), when the voucher's next occurrence starts; zero when
	// none starts before the voucher ends.
	NextWindowAt time.Time
	// FailedCode is, for the refusal of an order presenting several codes,
	// the code that was refused.
	FailedCode string
	// Err is the cause, kept for logs and errors.Is; it is never shown to clients.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	msg := string(e.Code)
	if e.Reason != "" {
		msg += "/" + string(e.Reason)
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Unavailable wraps a dependency failure: the client gets 503 and nothing was
// taken.
func Unavailable(cause error, format string, args ...any) *Error {
	return &Error{Code: CodeUnavailable, Message: fmt.Sprintf(format, args...), Err: cause}
}

// HeldOut returns a HELD_OUT error for voucher code whose earliest RESERVED
// hold expires after retryAfter (Reject).
func HeldOut(code string, retryAfter time.Duration) *Error {
	return Reject(CodeHeldOut, "", Facts{Voucher: code, RetryAfter: retryAfter})
}

// CodeOf returns the code of err, CodeInternal for errors outside the
// vocabulary, and "" for nil.
func CodeOf(err error) ErrorCode {
	if err == nil {
		return ""
	}
	if e, ok := err.(*Error); ok { // the common case, without errors.As's reflection
		return e.Code
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// IsOutcomeUnknown reports whether err is an Unavailable error whose
// request may have taken effect (Error.OutcomeUnknown).
func IsOutcomeUnknown(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeUnavailable && e.OutcomeUnknown
}

// outcomeUnknown returns err, a 503 on an order whose use may be held,
// marked OutcomeUnknown; other errors are returned as they are.
func outcomeUnknown(err error, orderID string) error {
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeUnavailable || e.OutcomeUnknown {
		return err
	}
	return &Error{Code: CodeUnavailable, OutcomeUnknown: true, RetryAfter: e.RetryAfter, Err: err,
		Message: "order " + orderID + " may hold a use whose write is not settled yet: retry with the same orderId"}
}

// IsCode reports whether err carries the code.
func IsCode(err error, code ErrorCode) bool { return CodeOf(err) == code }

// orderReleased is the answer to a retry of an orderId whose use was given
// back: the client must start a new attempt.
func orderReleased(orderID string) *Error {
	return Reject(CodeOrderReleased, "", Facts{OrderID: orderID})
}

// orderConflict is the answer to an orderId already used with another
// voucher (uses, when known) or by another customer.
func orderConflict(code, orderID, uses string) *Error {
	return Reject(CodeOrderConflict, "", Facts{Voucher: code, OrderID: orderID, UsesVoucher: uses})
}
