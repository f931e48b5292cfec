// Package voucher is the domain of voucherd: vouchers, redemptions, the rules
// that decide whether a reservation may take a use, the one error vocabulary,
// the ports the adapters implement (Store, Gate, EventLog, Notifier) and the
// Service that routes each reservation through standard, flash-sync or
// flash-kafka mode, tells held-out from sold-out, extends holds and emits
// threshold events.
//
// It imports only the standard library; every clock is passed in.
package voucher

import (
	"strings"
	"time"
)

// Limits of the contract.
const (
	MaxCodeLen    = 32
	MaxOrderIDLen = 64
)

// Bounds of amounts and dates. They rule out overflow anywhere an amount or
// a date is used: an amount is exact as a float64 (Redis Lua, JavaScript
// clients) and a sum of 9,000 of them fits an int64; a date has four year
// digits in RFC 3339 and its Unix milliseconds (kept in Redis), plus any
// hold time, fit an int64.
const (
	// MaxAmount is the largest discountAmount, maxDiscountAmount,
	// minOrderAmount or orderAmount, in minor units: 10^15.
	MaxAmount = 1_000_000_000_000_000
)

// MinTime and MaxTime bound startsAt and endsAt. The API accepts years 1970
// to 9998 as written, in any offset; these are those instants' bounds with a
// day of margin, and MaxTime is the last second RFC 3339 can write in UTC.
var (
	MinTime = time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// ValidTime reports whether t is within [MinTime, MaxTime].
func ValidTime(t time.Time) bool { return !t.Before(MinTime) && !t.After(MaxTime) }

// ValidCode reports whether s is a well-formed voucher code: 1–32 characters
// of letters, digits, `_` and `-`.
func ValidCode(s string) bool { return validName(s, MaxCodeLen, "_-") }

// ValidOrderID reports whether s is a well-formed orderId: 1–64 characters of
// letters, digits and `. _ : -`, so that it is safe in a URL path.
func ValidOrderID(s string) bool { return validName(s, MaxOrderIDLen, "._:-") }

// validName reports whether s has 1 to max bytes, each an ASCII letter or
// digit or one of punct. It runs on every request, so it is a loop rather
// than a regular expression (which took 2-5% of the CPU of a flash sale).
func validName(s string, max int, punct string) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte(punct, c) >= 0:
		default:
			return false
		}
	}
	return true
}

// Voucher is a limited-use discount code. Its discount is DiscountAmount
// (fixed) or DiscountPercentBP with an optional MaxDiscountAmount cap: see
// Discount.
type Voucher struct {
	Code              string
	DiscountAmount    int64
	DiscountPercentBP int32
	MaxDiscountAmount int64
	MinOrderAmount    int64
	TotalLimit        int32
	PerUserLimit      int32
	StartsAt          time.Time
	EndsAt            time.Time
	FlashSale         bool
	// Disabled vouchers refuse new reservations; their holds may still be
	// confirmed or released.
	Disabled bool
	// Campaign marks a campaign's budget (its Code is the campaign id): it
	// is reserved only through one of the campaign's codes, never by its
	// own code. Filled by Store.Voucher.
	Campaign bool
	// CustomerIDNormalization folds the customerIds of reservations before
	// any per-customer limit is counted; "" means NormalizeNone. Set at
	// creation only: changing it would split a customer's count in two.
	CustomerIDNormalization CustomerIDNormalization
	// Currency is the ISO 4217 code the voucher's amounts are in; a
	// reservation must name the same one (CURRENCY_MISMATCH). "" accepts
	// any currency, or none. Set at creation only.
	Currency string
	// CustomerID binds the voucher to one customer, in the form its
	// CustomerIDNormalization gives; any other customer is refused
	// (CUSTOMER_MISMATCH). "" serves every customer. Set at creation only.
	// For a campaign's code it is the code's customer (Resolution.Voucher).
	CustomerID string
	// Budget is the voucher's money budget (zero: none).
	Budget Budget
	// Schedule, when set, limits reservations to occurrences of its
	// recurring windows (OUTSIDE_WINDOW otherwise).
	Schedule *Schedule
	// WindowLimit, when positive, is the most uses the held redemptions
	// taken in one occurrence of Schedule may hold together. Set at creation
	// only (like a budget: a counter added later could miss a reservation
	// in flight); a PATCH may change it.
	WindowLimit int32
	// LatestWindow is the counter of the latest occurrence that has one
	// (zero: none yet); filled by reads that ask for live counts.
	LatestWindow WindowCount
	// Stacking says whether the voucher may share an order with other
	// codes; read by Store.Voucher, CreateVoucher and PatchVoucher only.
	Stacking Stacking

	// UsedCount is the number of held uses as the voucher row counts them.
	UsedCount int32
	// Reserved and Confirmed count held redemptions by status; they are
	// filled by reads that ask for live counts.
	Reserved  int32
	Confirmed int32

	CreatedAt time.Time
	UpdatedAt time.Time
}

// Discount is the voucher's discount rule.
func (v Voucher) Discount() Discount {
	return Discount{Amount: v.DiscountAmount, PercentBP: v.DiscountPercentBP, MaxAmount: v.MaxDiscountAmount}
}

// Remaining is the number of uses that may still be taken.
func (v Voucher) Remaining() int32 {
	if r := v.TotalLimit - v.UsedCount; r > 0 {
		return r
	}
	return 0
}

// Validate checks the ranges of a voucher's fields, whatever the time.
func (v Voucher) Validate() error {
	switch {
	case !ValidCode(v.Code):
		return Errorf(CodeInvalidRequest, "code must be 1-32 characters of A-Z a-z 0-9 _ -")
	case v.MinOrderAmount < 0 || v.MinOrderAmount > MaxAmount:
		return Errorf(CodeInvalidRequest, "minOrderAmount must be from 0 to %d", int64(MaxAmount))
	case v.TotalLimit <= 0:
		return Errorf(CodeInvalidRequest, "totalLimit must be > 0")
	case v.PerUserLimit <= 0:
		return Errorf(CodeInvalidRequest, "perUserLimit must be > 0")
	case !v.CustomerIDNormalization.Valid():
		return Errorf(CodeInvalidRequest, "customerIdNormalization must be none or email")
	case v.Currency != "" && !ValidCurrency(v.Currency):
		return errCurrency()
	case v.CustomerID != "" && !ValidCustomerID(v.CustomerID):
		return errCustomerID()
	case v.StartsAt.IsZero() || v.EndsAt.IsZero():
		return Errorf(CodeInvalidRequest, "startsAt and endsAt are required")
	case !ValidTime(v.StartsAt) || !ValidTime(v.EndsAt):
		return Errorf(CodeInvalidRequest, "startsAt and endsAt must be from %s to %s",
			MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	case !v.StartsAt.Before(v.EndsAt):
		return Errorf(CodeInvalidRequest, "startsAt must be before endsAt")
	}
	if err := v.Budget.Validate(); err != nil {
		return err
	}
	if err := v.validateWindows(); err != nil {
		return err
	}
	if err := v.Stacking.Validate(); err != nil {
		return err
	}
	return v.Discount().Validate()
}

// Patch changes some fields of a voucher; nil fields stay as they are.
// Limits may be raised, and lowered no further than what is already held.
// Setting DiscountAmount makes the discount fixed (and drops a percentage
// and its cap); setting DiscountPercentBP makes it a percentage, keeping
// the cap of a percentage unless MaxDiscountAmount sets it, which is set
// only together with DiscountPercentBP (so that whether a patch is valid
// does not depend on the voucher's current kind). Redemptions keep the
// discount computed when they were reserved.
type Patch struct {
	DiscountAmount    *int64
	DiscountPercentBP *int32
	MaxDiscountAmount *int64
	MinOrderAmount    *int64
	TotalLimit        *int32
	PerUserLimit      *int32
	StartsAt          *time.Time
	EndsAt            *time.Time
	FlashSale         *bool
	// Active stops (false) or restarts (true) a voucher.
	Active *bool
	// BudgetAmount sets the money budget's amount (Budget.Amount); the
	// store refuses one below what is held (LIMIT_BELOW_HELD).
	BudgetAmount *int64
	// Schedule replaces the recurring windows (a voucher with a
	// WindowLimit keeps one).
	Schedule *Schedule
	// WindowLimit sets the uses per occurrence of a voucher created with
	// one; the store refuses one below what the current occurrence holds
	// (LIMIT_BELOW_HELD).
	WindowLimit *int32
	// Now is when the patch is applied, set by the service: the occurrence
	// covering it is the one a lower WindowLimit is checked against.
	Now time.Time
	// Stacking replaces the stacking setting.
	Stacking *Stacking
}

// Empty reports whether the patch changes nothing.
func (p Patch) Empty() bool {
	return p.DiscountAmount == nil && p.DiscountPercentBP == nil && p.MaxDiscountAmount == nil && p.MinOrderAmount == nil && p.TotalLimit == nil &&
		p.PerUserLimit == nil && p.StartsAt == nil && p.EndsAt == nil && p.FlashSale == nil && p.Active == nil &&
		p.BudgetAmount == nil && p.Schedule == nil && p.WindowLimit == nil && p.Stacking == nil
}

// Apply returns v with the patch applied and validated. It does not check
// limits against held uses: the store does that atomically.
func (p Patch) Apply(v Voucher) (Voucher, error) {
	if p.DiscountAmount != nil && (p.DiscountPercentBP != nil || p.MaxDiscountAmount != nil) {
		return v, Errorf(CodeInvalidRequest, "discountAmount cannot be set with discountPercent or maxDiscountAmount")
	}
	if p.MaxDiscountAmount != nil && p.DiscountPercentBP == nil {
		return v, Errorf(CodeInvalidRequest, "maxDiscountAmount is set together with discountPercent (the voucher's percentage or a new one)")
	}
	if p.DiscountAmount != nil {
		v.DiscountAmount, v.DiscountPercentBP, v.MaxDiscountAmount = *p.DiscountAmount, 0, 0
	}
	if p.DiscountPercentBP != nil {
		if v.DiscountPercentBP == 0 {
			v.MaxDiscountAmount = 0
		}
		v.DiscountAmount, v.DiscountPercentBP = 0, *p.DiscountPercentBP
	}
	if p.MaxDiscountAmount != nil {
		v.MaxDiscountAmount = *p.MaxDiscountAmount
	}
	if p.MinOrderAmount != nil {
		v.MinOrderAmount = *p.MinOrderAmount
	}
	if p.TotalLimit != nil {
		v.TotalLimit = *p.TotalLimit
	}
	if p.PerUserLimit != nil {
		v.PerUserLimit = *p.PerUserLimit
	}
	if p.StartsAt != nil {
		v.StartsAt = *p.StartsAt
	}
	if p.EndsAt != nil {
		v.EndsAt = *p.EndsAt
	}
	if p.FlashSale != nil {
		v.FlashSale = *p.FlashSale
	}
	if p.Active != nil {
		v.Disabled = !*p.Active
	}
	if p.BudgetAmount != nil {
		v.Budget.Amount = *p.BudgetAmount
	}
	if p.WindowLimit != nil && v.WindowLimit == 0 {
		return v, Errorf(CodeWindowNotSet, "voucher %s was created without a windowLimit; a quota per window is set at creation", v.Code)
	}
	if p.Schedule != nil {
		s := *p.Schedule
		v.Schedule = &s
	}
	if p.WindowLimit != nil {
		v.WindowLimit = *p.WindowLimit
	}
	if p.Stacking != nil {
		v.Stacking = *p.Stacking
	}
	return v, v.Validate()
}

// ValidateNew checks a voucher about to be created at now: its fields, and a
// window that has not ended already (such a voucher could never be
// reserved: every reservation would answer NOT_ELIGIBLE/EXPIRED).
func (v Voucher) ValidateNew(now time.Time) error {
	if err := v.Validate(); err != nil {
		return err
	}
	return checkNotEnded(v.EndsAt, now)
}

// Validate checks a patch about to be applied at now: an endsAt it sets must
// still be ahead. To end a voucher early, set endsAt a moment ahead.
func (p Patch) Validate(now time.Time) error {
	if p.EndsAt == nil {
		return nil
	}
	return checkNotEnded(*p.EndsAt, now)
}

func checkNotEnded(endsAt, now time.Time) error {
	if !endsAt.After(now) {
		return Errorf(CodeInvalidRequest, "endsAt %s is already past (now is %s): no reservation could use this voucher; choose a later endsAt",
			endsAt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}

// Purchase is what the eligibility rule knows of the order asking: its
// amount, its customer (in the voucher's normalised form) and its currency
// ("" when the request names none).
type Purchase struct {
	Amount     int64
	CustomerID string
	Currency   string
}

// CheckEligible applies the reserve-time rules that do not depend on stock:
// not disabled, the validity window [StartsAt, EndsAt), the customer the
// voucher is bound to, its currency and the minimum order amount.
func (v Voucher) CheckEligible(p Purchase, now time.Time) error {
	if reason := v.Eligibility(p, now); reason != "" {
		f := v.EligibilityFacts(p)
		if reason == ReasonOutsideWindow {
			f.NextWindowAt = v.NextWindowAt(now)
		}
		return Reject(CodeNotEligible, reason, f)
	}
	return nil
}

// Eligibility is the rule of CheckEligible as a verdict: "" when the
// purchase p may use v at now, else the NOT_ELIGIBLE reason. The customer
// and the currency are told before the amount, which means nothing in
// another currency.
func (v Voucher) Eligibility(p Purchase, now time.Time) Reason {
	switch {
	case v.Disabled:
		return ReasonDisabled
	case now.Before(v.StartsAt):
		return ReasonNotStarted
	case !now.Before(v.EndsAt):
		return ReasonExpired
	case v.CustomerID != "" && p.CustomerID != v.CustomerID:
		return ReasonCustomerMismatch
	case v.Currency != "" && p.Currency != v.Currency:
		return ReasonCurrencyMismatch
	case p.Amount < v.MinOrderAmount:
		return ReasonOrderAmountTooLow
	case v.windowed() && v.Occurrence(now).Zero():
		return ReasonOutsideWindow
	}
	return ""
}

// EligibilityFacts are the facts a NOT_ELIGIBLE answer for the purchase p
// is worded from. The customer a voucher is bound to is not among them: an
// answer never tells one customer's id to another.
func (v Voucher) EligibilityFacts(p Purchase) Facts {
	return Facts{Voucher: v.Code, StartsAt: v.StartsAt, EndsAt: v.EndsAt,
		OrderAmount: p.Amount, MinOrderAmount: v.MinOrderAmount, Currency: p.Currency, VoucherCurrency: v.Currency}
}

// ValidCurrency reports whether s is written as an ISO 4217 code: three
// letters A-Z. Whether the code is assigned is the caller's business.
func ValidCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

func errCurrency() error {
	return Errorf(CodeInvalidRequest, "currency must be an ISO 4217 code: three letters A-Z")
}

// Status is the state of a redemption.
type Status string

// Redemption states.
const (
	StatusReserved  Status = "RESERVED"
	StatusConfirmed Status = "CONFIRMED"
	StatusReleased  Status = "RELEASED"
)

// Held reports whether a redemption in this state holds a use.
func (s Status) Held() bool { return s == StatusReserved || s == StatusConfirmed }

// Redemption is one order's use of a voucher, identified by its orderId.
type Redemption struct {
	OrderID        string
	VoucherCode    string
	CustomerID     string
	OrderAmount    int64
	DiscountAmount int64
	Status         Status
	CreatedAt      time.Time
	UpdatedAt      time.Time
	ExpiresAt      time.Time
	// HeldSince is, for a replacement, when the first hold of its chain
	// began; zero when the hold began with this redemption (CreatedAt:
	// HoldStart). Only the reads that bound a replacement or load the gate
	// fill it (Store.Order, Store.GateSnapshot); zero elsewhere.
	HeldSince time.Time
	// Window is the start of the occurrence of the voucher's windows the
	// redemption was taken in (zero: none); filled by the reads that load
	// the gate (Store.GateSnapshot).
	Window time.Time
}

// HoldStart is r.HeldSince, or r.CreatedAt when it is not known.
func (r Redemption) HoldStart() time.Time {
	if r.HeldSince.IsZero() {
		return r.CreatedAt
	}
	return r.HeldSince
}

// ReserveRequest asks for one use of a voucher for one order.
type ReserveRequest struct {
	Code        string
	CustomerID  string
	OrderID     string
	OrderAmount int64
	// ReplacesOrderID, when set, names the same customer's RESERVED hold
	// on the same voucher whose use this order takes over in one atomic
	// step (a retry after a failed payment): that order is released and
	// answers ORDER_RELEASED from then on.
	ReplacesOrderID string
	// Currency is the ISO 4217 code of OrderAmount; "" names none.
	Currency string
	// Window is the start of the occurrence of the voucher's schedule the
	// reservation falls in, set by the service from the voucher it read
	// (zero: none, which a voucher with a schedule refuses OUTSIDE_WINDOW).
	// The store records it on the redemption, whose use goes back to that
	// occurrence whenever it is released.
	Window time.Time
	// Requester is who sent the request; the code-guessing limit counts
	// it besides the customer. Nothing stores it.
	Requester Requester
}

// Requester is who sends a request: the name of its API key and its
// client address (empty when unknown: not counted).
type Requester struct {
	Key    string
	Client string
}

// Validate checks the ranges of the request fields.
func (r ReserveRequest) Validate() error {
	if r.ReplacesOrderID != "" {
		switch {
		case !ValidOrderID(r.ReplacesOrderID):
			return Errorf(CodeInvalidRequest, "replacesOrderId must be 1-64 characters of A-Z a-z 0-9 . _ : -")
		case r.ReplacesOrderID == r.OrderID:
			return Errorf(CodeInvalidRequest, "replacesOrderId must differ from orderId")
		}
	}
	switch {
	case !ValidCode(r.Code):
		return Errorf(CodeInvalidRequest, "code must be 1-32 characters of A-Z a-z 0-9 _ -")
	case !ValidCustomerID(r.CustomerID):
		return errCustomerID()
	case !ValidOrderID(r.OrderID):
		return Errorf(CodeInvalidRequest, "orderId must be 1-64 characters of A-Z a-z 0-9 . _ : -")
	case r.OrderAmount < 0 || r.OrderAmount > MaxAmount:
		return Errorf(CodeInvalidRequest, "orderAmount must be from 0 to %d", int64(MaxAmount))
	case r.Currency != "" && !ValidCurrency(r.Currency):
		return errCurrency()
	}
	return nil
}

// Purchase is what the eligibility rule knows of the request.
func (r ReserveRequest) Purchase() Purchase {
	return Purchase{Amount: r.OrderAmount, CustomerID: r.CustomerID, Currency: r.Currency}
}

// Reservation is the answer to a successful reserve: the redemption and
// whether it was already there (an idempotent replay).
type Reservation struct {
	Redemption
	Replay bool
	// Taken is set when this call took a use: the voucher's stock right
	// after the take, as the atomic step that took it saw it (the voucher
	// row in PostgreSQL, the gate's counter in Kafka mode). Threshold events
	// are derived from it. Nil for a replay.
	Taken *Stock
	// Clipped is set when the money budget gave the order less than its
	// discount (Budget.Clip): what was left of it.
	Clipped bool
}

// Stock is a voucher's free uses and total limit at one instant.
type Stock struct {
	Remaining  int64
	TotalLimit int32
}
