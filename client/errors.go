package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Error codes of the voucherd API (api/openapi.yaml), found in Error.Code.
const (
	InvalidRequest  = "INVALID_REQUEST"
	Unauthorized    = "UNAUTHORIZED"
	Forbidden       = "FORBIDDEN"
	VoucherNotFound = "VOUCHER_NOT_FOUND"
	VoucherExists   = "VOUCHER_EXISTS"
	// CampaignNotFound: no campaign has the id.
	CampaignNotFound = "CAMPAIGN_NOT_FOUND"
	// CampaignBudget was answered by servers that refused to make a
	// campaign's budget a flash sale.
	//
	// Deprecated: campaigns may be flash sales; no server answers it now.
	CampaignBudget      = "CAMPAIGN_BUDGET"
	LimitBelowHeld      = "LIMIT_BELOW_HELD"
	ReservationNotFound = "RESERVATION_NOT_FOUND"
	ReservationReleased = "RESERVATION_RELEASED"
	// ReservationConfirmed refuses to extend a hold that is already paid.
	ReservationConfirmed = "RESERVATION_CONFIRMED"
	OutOfStock           = "OUT_OF_STOCK"
	// HeldOut: no use is free, but some are only held by unpaid orders;
	// Error.RetryAfter says when the earliest hold expires.
	HeldOut       = "HELD_OUT"
	AlreadyUsed   = "ALREADY_USED"
	NotEligible   = "NOT_ELIGIBLE"
	OrderConflict = "ORDER_CONFLICT"
	OrderReleased = "ORDER_RELEASED"
	Unavailable   = "UNAVAILABLE"
	Internal      = "INTERNAL"
	// NotFlashSale refuses to warm up a voucher that is not a flash sale.
	NotFlashSale = "NOT_FLASH_SALE"
	// MethodNotAllowed: the path has no route for the method; the Allow
	// header lists the methods it has.
	MethodNotAllowed = "METHOD_NOT_ALLOWED"
	// UnsupportedMediaType: a request body without Content-Type
	// application/json.
	UnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"
	// ReplacedOrderNotHeld: the order a reservation's ReplacesOrderID
	// names is not the customer's RESERVED hold on the voucher; nothing
	// changed.
	ReplacedOrderNotHeld = "REPLACED_ORDER_NOT_HELD"
	// TooManyRequests: the customer looked up too many unknown voucher
	// codes; Error.RetryAfter says when it may try again.
	TooManyRequests = "TOO_MANY_REQUESTS"
	// BudgetExceeded: the order's discount does not fit what is left of
	// the voucher's money budget (Error.BudgetRemaining); Error.RetryAfter
	// is set while unpaid holds may still give some back.
	BudgetExceeded = "BUDGET_EXCEEDED"
	// BudgetNotSet refuses to change the budgetAmount of a voucher created
	// without a money budget.
	BudgetNotSet = "BUDGET_NOT_SET"
	// PartOfStack refuses a per-code call on an order that presented
	// several codes: act on it with the stack calls (GetStack, ...).
	PartOfStack = "PART_OF_STACK"
)

// The limits a 409 names in Error.Limit.
const (
	// LimitTotal: no use of the voucher is free (OutOfStock, HeldOut).
	LimitTotal = "total"
	// LimitPerUser: the customer holds perUserLimit uses (AlreadyUsed).
	LimitPerUser = "perUser"
	// LimitBudget: the money budget (BudgetExceeded, or LimitBelowHeld of
	// budgetAmount).
	LimitBudget = "budget"
	// LimitWindow: the quota of the occurrence of the voucher's windows
	// (OutOfStock, HeldOut; Error.NextWindowAt says when the next starts),
	// or LimitBelowHeld of windowLimit.
	LimitWindow = "window"
)

// Reasons that refine NotEligible, found in Error.Reason.
const (
	ReasonNotStarted        = "NOT_STARTED"
	ReasonExpired           = "EXPIRED"
	ReasonOrderAmountTooLow = "ORDER_AMOUNT_TOO_LOW"
	// ReasonDisabled: the voucher was stopped; holds made before may still
	// be confirmed or released.
	ReasonDisabled = "DISABLED"
	// ReasonCodeUsed refines AlreadyUsed: the campaign code is held by
	// another order (each code is used at most once).
	ReasonCodeUsed = "CODE_USED"
	// ReasonCustomerMismatch: the voucher serves another customer.
	ReasonCustomerMismatch = "CUSTOMER_MISMATCH"
	// ReasonCurrencyMismatch: the voucher has a currency and the request
	// named another one, or none.
	ReasonCurrencyMismatch = "CURRENCY_MISMATCH"
	// ReasonOutsideWindow: the voucher has a schedule and no occurrence of
	// its windows covers now (Error.NextWindowAt says when the next
	// starts).
	ReasonOutsideWindow = "OUTSIDE_WINDOW"
	// ReasonNotStackable: a code of an order of several codes may not be
	// combined with others (Error.FailedCode names it).
	ReasonNotStackable = "NOT_STACKABLE"
	// ReasonExclusiveGroup: two codes of an order share an exclusive group.
	ReasonExclusiveGroup = "EXCLUSIVE_GROUP"
)

// Error is an error answered by the server: the HTTP status and the body's
// code, reason and message. Code is empty when the answer did not come from
// voucherd (a proxy's error page, for example); Message then holds its text.
type Error struct {
	Status  int
	Code    string
	Reason  string
	Message string
	// RetryAfter is the server's Retry-After header, when it sent one.
	RetryAfter time.Duration
	// OutcomeUnknown is set on a 503 of Reserve after which the order may
	// hold a use: its write may have reached the database or Kafka without
	// an answer coming back, or it is a retry of such an order that could
	// not settle it yet. Every other 503 took nothing. Retry with the same
	// orderId to learn the outcome: a reservation (replayed) once the row
	// can be read, or ORDER_RELEASED when voucherd gave the order up first
	// (its use went back): start again with a new orderId. Never treat an
	// order as not taken while its last answer carried this flag.
	OutcomeUnknown bool
	// Limit names the limit a 409 was caused by (LimitTotal, LimitPerUser,
	// LimitBudget; more may come), "" for other answers.
	Limit string
	// BudgetRemaining is, with BudgetExceeded, what is left of the
	// voucher's money budget in minor units.
	BudgetRemaining int64
	// NextWindowAt is, with ReasonOutsideWindow and LimitWindow, when the
	// voucher's next occurrence starts (zero: none before it ends).
	NextWindowAt time.Time
	// FailedCode names, on the refusal of ReserveStack, the code that was
	// refused (nothing was taken for any code).
	FailedCode string
}

// Error implements error.
func (e *Error) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.Status)
	}
	msg := fmt.Sprintf("voucherd: %d %s", e.Status, code)
	if e.Reason != "" {
		msg += "/" + e.Reason
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Temporary reports whether trying the same request again later may succeed:
// 429, 503 and other 5xx answers. 4xx answers describe the request and stay
// the same on every retry.
func (e *Error) Temporary() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// TransportError is a failure to get an answer at all: the connection was
// refused or broken, the attempt timed out, or the answer could not be read.
// The request may or may not have reached the server.
type TransportError struct {
	Method string
	Path   string
	Err    error
}

// Error implements error.
func (e *TransportError) Error() string {
	return fmt.Sprintf("client: %s %s: %v", e.Method, e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *TransportError) Unwrap() error { return e.Err }

// requestError is a request that could not even be built; retrying cannot
// help.
type requestError struct{ err error }

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// IsCode reports whether err is (or wraps) an *Error with the given code, for
// example client.IsCode(err, client.OutOfStock).
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// StatusOf returns the HTTP status of an *Error in err, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Retryable reports whether the client retries err for idempotent calls: a
// transport failure, or a 429 or 5xx answer. Context cancellation is not
// retryable.
func Retryable(err error) bool {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr.Temporary()
	}
	var tErr *TransportError
	return errors.As(err, &tErr)
}

// mayHaveTakenEffect reports whether the request that failed with err may
// still have taken effect: a transport failure, or a 503 marked
// OutcomeUnknown.
func mayHaveTakenEffect(err error) bool {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr.OutcomeUnknown
	}
	var tErr *TransportError
	return errors.As(err, &tErr)
}

// stickyUnknown marks a plain 503 answered to a retry OutcomeUnknown when an
// earlier attempt of the same call may have taken effect: the retry took
// nothing itself, but the call as a whole is still undecided.
func stickyUnknown(err error, unknown bool) error {
	var apiErr *Error
	if !unknown || !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable || apiErr.OutcomeUnknown {
		return err
	}
	marked := *apiErr
	marked.OutcomeUnknown = true
	return &marked
}
