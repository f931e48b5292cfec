package httpapi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// voucherJSON is a voucher on the wire, with live counts.
type voucherJSON struct {
	Code string `json:"code"`
	// One of DiscountAmount and DiscountPercent is set.
	DiscountAmount    int64       `json:"discountAmount,omitempty"`
	DiscountPercent   json.Number `json:"discountPercent,omitempty"`
	MaxDiscountAmount int64       `json:"maxDiscountAmount,omitempty"`
	MinOrderAmount    int64       `json:"minOrderAmount"`
	TotalLimit        int32       `json:"totalLimit"`
	PerUserLimit      int32       `json:"perUserLimit"`
	StartsAt          time.Time   `json:"startsAt"`
	EndsAt            time.Time   `json:"endsAt"`
	FlashSale         bool        `json:"flashSale"`
	Active            bool        `json:"active"`
	// CustomerIDNormalization is "none" or "email".
	CustomerIDNormalization string    `json:"customerIdNormalization"`
	Reserved                int32     `json:"reserved"`
	Confirmed               int32     `json:"confirmed"`
	Remaining               int32     `json:"remaining"`
	CreatedAt               time.Time `json:"createdAt"`
	UpdatedAt               time.Time `json:"updatedAt"`
	// The money budget, when the voucher has one.
	BudgetAmount    int64  `json:"budgetAmount,omitempty"`
	BudgetShortfall string `json:"budgetShortfall,omitempty"`
	BudgetReserved  *int64 `json:"budgetReserved,omitempty"`
	BudgetConfirmed *int64 `json:"budgetConfirmed,omitempty"`
	BudgetRemaining *int64 `json:"budgetRemaining,omitempty"`

	// Currency and CustomerID are left out when the voucher has none.
	Currency   string `json:"currency,omitempty"`
	CustomerID string `json:"customerId,omitempty"`

	// The recurring windows, when the voucher has them: the quota per
	// occurrence, the occurrence covering now (GET, with its counts) or
	// when the next one starts.
	Schedule      *voucher.Schedule  `json:"schedule,omitempty"`
	WindowLimit   int32              `json:"windowLimit,omitempty"`
	CurrentWindow *currentWindowJSON `json:"currentWindow,omitempty"`
	NextWindowAt  *time.Time         `json:"nextWindowAt,omitempty"`
	// Stacking is always answered by GET /vouchers/{code} (a voucher read
	// another way may leave it out).
	Stacking *stackingJSON `json:"stacking,omitempty"`
}

// currentWindowJSON is the occurrence of a voucher's windows covering now;
// Used and Remaining are set with a windowLimit.
type currentWindowJSON struct {
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt"`
	Used      *int32    `json:"used,omitempty"`
	Remaining *int32    `json:"remaining,omitempty"`
}

// withWindows adds to out the occurrence of v's windows covering now, or
// when the next starts.
func (out *voucherJSON) withWindows(v voucher.Voucher, now time.Time) {
	if v.Schedule == nil {
		return
	}
	o, used, ok := v.CurrentWindow(now)
	if !ok {
		if next := v.NextWindowAt(now); !next.IsZero() {
			next = next.UTC()
			out.NextWindowAt = &next
		}
		return
	}
	cw := &currentWindowJSON{StartsAt: o.Start.UTC(), EndsAt: o.End.UTC()}
	if v.WindowLimit > 0 {
		remaining := max(v.WindowLimit-used, 0)
		cw.Used, cw.Remaining = &used, &remaining
	}
	out.CurrentWindow = cw
}

// stackingJSON is a voucher's stacking setting on the wire.
type stackingJSON struct {
	Stackable      bool   `json:"stackable"`
	ExclusiveGroup string `json:"exclusiveGroup,omitempty"`
}

func toVoucherJSON(v voucher.Voucher) voucherJSON {
	out := voucherJSON{
		Code: v.Code, DiscountAmount: v.DiscountAmount, MaxDiscountAmount: v.MaxDiscountAmount,
		MinOrderAmount: v.MinOrderAmount, TotalLimit: v.TotalLimit, PerUserLimit: v.PerUserLimit,
		StartsAt: v.StartsAt.UTC(), EndsAt: v.EndsAt.UTC(), FlashSale: v.FlashSale, Active: !v.Disabled,
		CustomerIDNormalization: normalizationName(v.CustomerIDNormalization),
		Reserved:                v.Reserved, Confirmed: v.Confirmed, Remaining: v.Remaining(),
		CreatedAt: v.CreatedAt.UTC(), UpdatedAt: v.UpdatedAt.UTC(),
		Currency: v.Currency, CustomerID: v.CustomerID,
	}
	if v.DiscountPercentBP != 0 {
		out.DiscountPercent = json.Number(voucher.FormatPercentBP(v.DiscountPercentBP))
	}
	if b := v.Budget; b.Amount > 0 {
		remaining := b.Remaining()
		out.BudgetAmount, out.BudgetShortfall = b.Amount, shortfallName(b.Clip)
		out.BudgetReserved, out.BudgetConfirmed, out.BudgetRemaining = &b.Reserved, &b.Confirmed, &remaining
	}
	out.Schedule, out.WindowLimit = v.Schedule, v.WindowLimit
	return out
}

// The values of budgetShortfall.
const (
	shortfallReject = "reject"
	shortfallClip   = "clip"
)

// shortfallName is a budget's budgetShortfall on the wire.
func shortfallName(clip bool) string {
	if clip {
		return shortfallClip
	}
	return shortfallReject
}

// normalizationName is n on the wire: the zero value is "none".
func normalizationName(n voucher.CustomerIDNormalization) string {
	if n == "" {
		return string(voucher.NormalizeNone)
	}
	return string(n)
}

// Bounds of the integer members, as api/openapi.yaml states them.
const (
	maxInt32     = 1<<31 - 1
	maxAmount    = voucher.MaxAmount
	maxExtension = int64(voucher.MaxExtension / time.Second)
)

// createVoucherRequest is the body of POST /vouchers. Pointers tell a
// missing field from a zero one.
type createVoucherRequest struct {
	Code           *string
	DiscountAmount *int64
	// DiscountPercentBP is discountPercent in basis points.
	DiscountPercentBP *int32
	MaxDiscountAmount *int64
	MinOrderAmount    *int64
	TotalLimit        *int32
	PerUserLimit      *int32
	StartsAt          *time.Time
	EndsAt            *time.Time
	FlashSale         *bool
	// CustomerIDNormalization is a member of POST only: changing it would
	// split the counts of customers already counted.
	CustomerIDNormalization *string
	// Currency and CustomerID are members of POST only, as
	// CustomerIDNormalization: a hold taken under one would not be under
	// another.
	Currency   *string
	CustomerID *string
	// Active is a member of PATCH only.
	Active *bool
	// BudgetAmount may be changed by PATCH; BudgetShortfall ("reject" or
	// "clip") is set at creation only.
	BudgetAmount    *int64
	BudgetShortfall *string
	// Schedule and WindowLimit may be changed by PATCH (a windowLimit only
	// on a voucher created with one).
	Schedule    *voucher.Schedule
	WindowLimit *int32
	// Stacking may be set at creation and changed by PATCH.
	Stacking *voucher.Stacking
}

var (
	createFields = []string{"code", "discountAmount", "minOrderAmount", "totalLimit", "perUserLimit", "startsAt", "endsAt", "flashSale",
		"discountPercent", "maxDiscountAmount", "customerIdNormalization", "currency", "customerId", "budgetAmount", "budgetShortfall", "stacking",
		"schedule", "windowLimit"}
	patchFields = []string{"discountAmount", "minOrderAmount", "totalLimit", "perUserLimit", "startsAt", "endsAt", "flashSale", "active",
		"discountPercent", "maxDiscountAmount", "budgetAmount", "stacking", "schedule", "windowLimit"}
)

// decode reads the members of a voucher body: POST /vouchers's, or PATCH
// /vouchers/{code}'s when patch is set.
func (r *createVoucherRequest) decode(body []byte, patch bool) error {
	names := createFields
	if patch {
		names = patchFields
	}
	_, err := decodeObject(body, names, func(i int, v jsonValue) error {
		name := names[i]
		var err error
		switch name {
		case "code", "customerIdNormalization", "budgetShortfall":
			var s string
			s, err = stringField(name, v)
			switch name {
			case "code":
				r.Code = &s
			case "budgetShortfall":
				r.BudgetShortfall = &s
			default:
				r.CustomerIDNormalization = &s
			}
		case "budgetAmount":
			r.BudgetAmount, err = int64Ptr(name, v, 1, maxAmount)
		case "schedule":
			r.Schedule, err = scheduleField(v)
		case "windowLimit":
			r.WindowLimit, err = int32Ptr(name, v)
		case "stacking":
			r.Stacking, err = stackingField(name, v)
		case "currency":
			var s string
			s, err = stringField(name, v)
			r.Currency = &s
		case "customerId":
			var s string
			s, err = customerField(name, v)
			r.CustomerID = &s
		case "discountAmount":
			r.DiscountAmount, err = int64Ptr(name, v, 1, maxAmount)
		case "discountPercent":
			var bp int64
			bp, err = decimalField(name, v, 2, voucher.MinDiscountPercentBP, voucher.MaxDiscountPercentBP,
				"a number from 1 to 100 with at most two decimals")
			bp32 := int32(bp) //nolint:gosec // G115: decimalField bounds bp to [MinDiscountPercentBP, MaxDiscountPercentBP]
			r.DiscountPercentBP = &bp32
		case "maxDiscountAmount":
			r.MaxDiscountAmount, err = int64Ptr(name, v, 1, maxAmount)
		case "minOrderAmount":
			r.MinOrderAmount, err = int64Ptr(name, v, 0, maxAmount)
		case "totalLimit":
			r.TotalLimit, err = int32Ptr(name, v)
		case "perUserLimit":
			r.PerUserLimit, err = int32Ptr(name, v)
		case "startsAt", "endsAt":
			var t time.Time
			t, err = timeField(name, v)
			if name == "startsAt" {
				r.StartsAt = &t
			} else {
				r.EndsAt = &t
			}
		case "flashSale", "active":
			var b bool
			b, err = boolField(name, v)
			if name == "flashSale" {
				r.FlashSale = &b
			} else {
				r.Active = &b
			}
		}
		return err
	})
	return err
}

func int64Ptr(name string, v jsonValue, lo, hi int64) (*int64, error) {
	n, err := intField(name, v, lo, hi)
	return &n, err
}

func int32Ptr(name string, v jsonValue) (*int32, error) {
	n, err := intField(name, v, 1, maxInt32)
	n32 := int32(n) //nolint:gosec // G115: intField bounds n to [1, maxInt32]
	return &n32, err
}

func (r createVoucherRequest) toVoucher() (voucher.Voucher, error) {
	missing := func(name string) error {
		return voucher.Errorf(voucher.CodeInvalidRequest, "%s is required", name)
	}
	switch {
	case r.Code == nil:
		return voucher.Voucher{}, missing("code")
	case r.DiscountAmount == nil && r.DiscountPercentBP == nil:
		return voucher.Voucher{}, voucher.Errorf(voucher.CodeInvalidRequest, "discountAmount or discountPercent is required")
	case r.DiscountAmount != nil && r.DiscountPercentBP != nil:
		return voucher.Voucher{}, voucher.Errorf(voucher.CodeInvalidRequest, "discountAmount and discountPercent exclude each other: give one")
	case r.MaxDiscountAmount != nil && r.DiscountPercentBP == nil:
		return voucher.Voucher{}, voucher.Errorf(voucher.CodeInvalidRequest, "maxDiscountAmount applies to a discountPercent only, not to a fixed discountAmount")
	case r.TotalLimit == nil:
		return voucher.Voucher{}, missing("totalLimit")
	case r.StartsAt == nil:
		return voucher.Voucher{}, missing("startsAt")
	case r.EndsAt == nil:
		return voucher.Voucher{}, missing("endsAt")
	}
	v := voucher.Voucher{
		Code: *r.Code, TotalLimit: *r.TotalLimit,
		PerUserLimit: 1, StartsAt: *r.StartsAt, EndsAt: *r.EndsAt,
	}
	if r.DiscountAmount != nil {
		v.DiscountAmount = *r.DiscountAmount
	} else {
		v.DiscountPercentBP = *r.DiscountPercentBP
	}
	if r.MaxDiscountAmount != nil {
		v.MaxDiscountAmount = *r.MaxDiscountAmount
	}
	if r.MinOrderAmount != nil {
		v.MinOrderAmount = *r.MinOrderAmount
	}
	if r.PerUserLimit != nil {
		v.PerUserLimit = *r.PerUserLimit
	}
	if r.FlashSale != nil {
		v.FlashSale = *r.FlashSale
	}
	if r.CustomerIDNormalization != nil {
		v.CustomerIDNormalization = voucher.CustomerIDNormalization(*r.CustomerIDNormalization)
		if v.CustomerIDNormalization == "" {
			return voucher.Voucher{}, voucher.Errorf(voucher.CodeInvalidRequest, "customerIdNormalization must be none or email")
		}
	}
	if r.Currency != nil {
		if !voucher.ValidCurrency(*r.Currency) {
			return voucher.Voucher{}, voucher.Errorf(voucher.CodeInvalidRequest, "currency must be an ISO 4217 code: three letters A-Z")
		}
		v.Currency = *r.Currency
	}
	if r.CustomerID != nil {
		v.CustomerID = *r.CustomerID
	}
	if err := r.budget(&v.Budget); err != nil {
		return voucher.Voucher{}, err
	}
	v.Schedule = r.Schedule
	if r.WindowLimit != nil {
		v.WindowLimit = *r.WindowLimit
	}
	if r.Stacking != nil {
		v.Stacking = *r.Stacking
	}
	return v, v.Validate()
}

// budget sets b from budgetAmount and budgetShortfall.
func (r createVoucherRequest) budget(b *voucher.Budget) error {
	if r.BudgetAmount != nil {
		b.Amount = *r.BudgetAmount
	}
	if r.BudgetShortfall != nil {
		switch *r.BudgetShortfall {
		case shortfallReject:
		case shortfallClip:
			// Without a budget there is nothing to clip (the contract says
			// it is ignored).
			b.Clip = r.BudgetAmount != nil
		default:
			return voucher.Errorf(voucher.CodeInvalidRequest, "budgetShortfall must be reject or clip")
		}
	}
	return nil
}

// toPatch returns the body of PATCH /vouchers/{code} as a domain patch.
func (r createVoucherRequest) toPatch() voucher.Patch {
	return voucher.Patch{
		DiscountAmount: r.DiscountAmount, DiscountPercentBP: r.DiscountPercentBP, MaxDiscountAmount: r.MaxDiscountAmount,
		MinOrderAmount: r.MinOrderAmount, TotalLimit: r.TotalLimit, PerUserLimit: r.PerUserLimit,
		StartsAt: r.StartsAt, EndsAt: r.EndsAt, FlashSale: r.FlashSale, Active: r.Active,
		BudgetAmount: r.BudgetAmount, Stacking: r.Stacking, Schedule: r.Schedule, WindowLimit: r.WindowLimit,
	}
}

// scheduleField decodes the member schedule: an object of timeZone and
// windows, each of days, from and to, nothing else; its rules are checked
// by voucher.Schedule.Validate.
func scheduleField(v jsonValue) (*voucher.Schedule, error) {
	bad := voucher.Errorf(voucher.CodeInvalidRequest,
		`schedule must be {"timeZone": "Europe/Berlin", "windows": [{"days": ["MON"], "from": "13:00", "to": "14:00"}]}`)
	if v.kind != kindObject {
		return nil, bad
	}
	d := json.NewDecoder(bytes.NewReader(v.raw))
	d.DisallowUnknownFields()
	var s voucher.Schedule
	if err := d.Decode(&s); err != nil {
		return nil, bad
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// reserveRequest is the body of POST /vouchers/{code}/reservations, and of
// POST /vouchers/{code}/validation (where orderId is optional and
// replacesOrderId unknown).
type reserveRequest struct {
	CustomerID      string
	OrderID         string
	OrderAmount     int64
	ReplacesOrderID string
	Currency        string
	seen            uint64 // bits by index in reserveFields
}

// reserveFields are the fields of reserveRequest; the first
// requiredReserveFields are required in a reservation.
var reserveFields = []string{"customerId", "orderId", "orderAmount", "replacesOrderId", "currency"}

const requiredReserveFields = 3

func (r *reserveRequest) decode(body []byte) error {
	// The orderId and the customerId, when both are plain (no escapes, an
	// integer in its canonical form), are copied out of the body in one
	// allocation: the reservation body is read on every request of a
	// flash sale, refusals included.
	var plainOrder, plainCustomer []byte
	seen, err := decodeObject(body, reserveFields, func(i int, v jsonValue) error {
		var err error
		switch i {
		case 0:
			if raw, ok := plainCustomerID(v); ok {
				plainCustomer = raw
				return nil
			}
			r.CustomerID, err = customerField("customerId", v)
		case 1:
			if v.kind == kindString && !v.escaped {
				plainOrder = v.raw[1 : len(v.raw)-1]
				return nil
			}
			r.OrderID, err = stringField("orderId", v)
		case 2:
			r.OrderAmount, err = intField("orderAmount", v, 0, maxAmount)
		case 3:
			r.ReplacesOrderID, err = stringField("replacesOrderId", v)
			if err == nil && r.ReplacesOrderID == "" {
				err = voucher.Errorf(voucher.CodeInvalidRequest, "replacesOrderId must not be empty")
			}
		case 4:
			r.Currency, err = stringField("currency", v)
			if err == nil && !voucher.ValidCurrency(r.Currency) {
				err = voucher.Errorf(voucher.CodeInvalidRequest, "currency must be an ISO 4217 code: three letters A-Z")
			}
		}
		return err
	})
	r.seen = seen
	if err != nil {
		return err
	}
	var buf [2 * voucher.MaxOrderIDLen]byte
	both := string(append(append(buf[:0], plainOrder...), plainCustomer...))
	if plainOrder != nil {
		r.OrderID = both[:len(plainOrder)]
	}
	if plainCustomer != nil {
		r.CustomerID = both[len(plainOrder):]
	}
	return nil
}

// plainCustomerID returns the bytes of a customerId member that are its
// value as they are: a valid string without escapes, or an integer in its
// canonical decimal form (customerField reads any other form).
func plainCustomerID(v jsonValue) ([]byte, bool) {
	switch {
	case v.kind == kindString && !v.escaped:
		raw := v.raw[1 : len(v.raw)-1]
		return raw, voucher.ValidCustomerID(string(raw))
	case v.kind == kindNumber:
		_, ok := voucher.CustomerIDInteger(string(v.raw))
		return v.raw, ok
	}
	return nil, false
}

func (r reserveRequest) toDomain(code string) (voucher.ReserveRequest, error) {
	for i, name := range reserveFields[:requiredReserveFields] {
		if r.seen&(1<<i) == 0 {
			return voucher.ReserveRequest{}, voucher.Errorf(voucher.CodeInvalidRequest, "%s is required", name)
		}
	}
	req := voucher.ReserveRequest{Code: code, CustomerID: r.CustomerID, OrderID: r.OrderID, OrderAmount: r.OrderAmount,
		ReplacesOrderID: r.ReplacesOrderID, Currency: r.Currency}
	return req, req.Validate()
}

// toValidation returns the body as a validation request: customerId and
// orderAmount are required, orderId optional, replacesOrderId refused.
func (r reserveRequest) toValidation(code string) (voucher.ValidateRequest, error) {
	for _, i := range []int{0, 2} {
		if r.seen&(1<<i) == 0 {
			return voucher.ValidateRequest{}, voucher.Errorf(voucher.CodeInvalidRequest, "%s is required", reserveFields[i])
		}
	}
	if r.seen&(1<<1) != 0 && r.OrderID == "" {
		return voucher.ValidateRequest{}, voucher.Errorf(voucher.CodeInvalidRequest, "orderId must not be empty")
	}
	if r.seen&(1<<3) != 0 {
		return voucher.ValidateRequest{}, voucher.Errorf(voucher.CodeInvalidRequest, "replacesOrderId is not a field of a validation")
	}
	req := voucher.ValidateRequest{Code: code, CustomerID: r.CustomerID, OrderID: r.OrderID, OrderAmount: r.OrderAmount,
		Currency: r.Currency}
	return req, req.Validate()
}

// validationJSON is the answer of POST /vouchers/{code}/validation.
type validationJSON struct {
	Valid bool `json:"valid"`
	// Replay: the orderId already holds a use for this customer.
	Replay         bool  `json:"replay,omitempty"`
	DiscountAmount int64 `json:"discountAmount"`
	// Code is the reservation's error code; Reason the NOT_ELIGIBLE reason,
	// or Code itself for the other refusals.
	Code              string `json:"code,omitempty"`
	Reason            string `json:"reason,omitempty"`
	Message           string `json:"message,omitempty"`
	RetryAfterSeconds int64  `json:"retryAfter,omitempty"`
	// Limit names the limit of a refusal; BudgetRemaining is set with
	// BUDGET_EXCEEDED.
	Limit           string `json:"limit,omitempty"`
	BudgetRemaining *int64 `json:"budgetRemaining,omitempty"`
	// NextWindowAt is set with OUTSIDE_WINDOW and a full window.
	NextWindowAt *time.Time `json:"nextWindowAt,omitempty"`
}

func toValidationJSON(v voucher.Validation) validationJSON {
	out := validationJSON{Valid: v.Valid, Replay: v.Replay, DiscountAmount: v.DiscountAmount,
		Code: string(v.Code), Reason: string(v.Reason), Message: v.Message, Limit: string(v.Limit)}
	if v.Code == voucher.CodeBudgetExceeded {
		remaining := v.BudgetRemaining
		out.BudgetRemaining = &remaining
	}
	if out.Reason == "" {
		out.Reason = out.Code
	}
	if !v.NextWindowAt.IsZero() {
		next := v.NextWindowAt.UTC()
		out.NextWindowAt = &next
	}
	if v.RetryAfter > 0 {
		out.RetryAfterSeconds = int64((v.RetryAfter + time.Second - 1) / time.Second)
	}
	return out
}

// extendRequest is the body of POST
// /vouchers/{code}/reservations/{orderId}/extend.
type extendRequest struct {
	Seconds *int64
}

func (r *extendRequest) decode(body []byte) error {
	_, err := decodeObject(body, []string{"seconds"}, func(i int, v jsonValue) error {
		n, err := intField("seconds", v, 1, maxExtension)
		r.Seconds = &n
		return err
	})
	return err
}

func (r extendRequest) duration() (time.Duration, error) {
	if r.Seconds == nil {
		return 0, voucher.Errorf(voucher.CodeInvalidRequest, "seconds is required")
	}
	return time.Duration(*r.Seconds) * time.Second, nil
}

// reservationJSON is the 201 body of a reservation.
type reservationJSON struct {
	OrderID        string    `json:"orderId"`
	DiscountAmount int64     `json:"discountAmount"`
	Status         string    `json:"status"`
	ExpiresAt      time.Time `json:"expiresAt"`
	// Clipped: the money budget gave what was left of it, less than the
	// order's discount.
	Clipped bool `json:"clipped,omitempty"`
}

// redemptionJSON is a redemption on the wire.
type redemptionJSON struct {
	OrderID        string       `json:"orderId"`
	VoucherCode    string       `json:"voucherCode"`
	CustomerID     customerJSON `json:"customerId"`
	OrderAmount    int64        `json:"orderAmount"`
	DiscountAmount int64        `json:"discountAmount"`
	Status         string       `json:"status"`
	CreatedAt      time.Time    `json:"createdAt"`
	UpdatedAt      time.Time    `json:"updatedAt"`
	ExpiresAt      time.Time    `json:"expiresAt"`
}

func toRedemptionJSON(r voucher.Redemption) redemptionJSON {
	return redemptionJSON{
		OrderID: r.OrderID, VoucherCode: r.VoucherCode, CustomerID: customerJSON(r.CustomerID),
		OrderAmount: r.OrderAmount, DiscountAmount: r.DiscountAmount, Status: string(r.Status),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(),
	}
}

// customerJSON is a customerId in an answer: a JSON number for an integer id
// (voucher.CustomerIDInteger), as callers that sent integers read it, a
// string otherwise.
type customerJSON string

// MarshalJSON implements json.Marshaler.
func (c customerJSON) MarshalJSON() ([]byte, error) {
	return voucher.AppendCustomerIDJSON(nil, string(c)), nil
}

// errorJSON is every error body: {"error": CODE, "message": text} plus
// reason, retryAfter and outcomeUnknown where they apply.
type errorJSON struct {
	Error          string `json:"error"`
	Message        string `json:"message"`
	Reason         string `json:"reason,omitempty"`
	RetryAfter     *int64 `json:"retryAfter,omitempty"`
	OutcomeUnknown bool   `json:"outcomeUnknown,omitempty"`
	// Limit names the limit a 409 was caused by; BudgetRemaining is set
	// with BUDGET_EXCEEDED.
	Limit           string `json:"limit,omitempty"`
	BudgetRemaining *int64 `json:"budgetRemaining,omitempty"`
	// NextWindowAt is set with OUTSIDE_WINDOW and a full window.
	NextWindowAt *time.Time `json:"nextWindowAt,omitempty"`
	// FailedCode names the refused code of an order presenting several.
	FailedCode string `json:"failedCode,omitempty"`
}

// warmupJSON is the answer of POST /vouchers/{code}/warmup.
type warmupJSON struct {
	Code string `json:"code"`
	// InRedis: the voucher is in Redis now; false only when another
	// instance was still loading it after a short wait (call again).
	InRedis bool `json:"inRedis"`
	// LoadedByThisCall: this call wrote it (false: it was there already).
	LoadedByThisCall bool `json:"loadedByThisCall"`
}

// appendJSON appends e as encoding/json (HTML not escaped) writes it, with
// the trailing newline.
func (e errorJSON) appendJSON(b []byte) []byte {
	b = append(b, `{"error":`...)
	b = appendJSONString(b, e.Error)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, e.Message)
	if e.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, e.Reason)
	}
	if e.RetryAfter != nil {
		b = append(b, `,"retryAfter":`...)
		b = strconv.AppendInt(b, *e.RetryAfter, 10)
	}
	if e.OutcomeUnknown {
		b = append(b, `,"outcomeUnknown":true`...)
	}
	if e.Limit != "" {
		b = append(b, `,"limit":`...)
		b = appendJSONString(b, e.Limit)
	}
	if e.BudgetRemaining != nil {
		b = append(b, `,"budgetRemaining":`...)
		b = strconv.AppendInt(b, *e.BudgetRemaining, 10)
	}
	if e.NextWindowAt != nil {
		b = append(b, `,"nextWindowAt":"`...)
		b = e.NextWindowAt.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if e.FailedCode != "" {
		b = append(b, `,"failedCode":`...)
		b = appendJSONString(b, e.FailedCode)
	}
	return append(b, "}\n"...)
}

// appendJSON appends r as encoding/json writes it, with the trailing
// newline.
func (r reservationJSON) appendJSON(b []byte) []byte {
	b = append(b, `{"orderId":`...)
	b = appendJSONString(b, r.OrderID)
	b = append(b, `,"discountAmount":`...)
	b = strconv.AppendInt(b, r.DiscountAmount, 10)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, r.Status)
	b = append(b, `,"expiresAt":"`...)
	b = r.ExpiresAt.AppendFormat(b, time.RFC3339Nano)
	if r.Clipped {
		return append(b, "\",\"clipped\":true}\n"...)
	}
	return append(b, "\"}\n"...)
}

// appendJSONString appends s as a JSON string, as encoding/json writes it
// with HTML escaping off.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			// Rare in voucherd's strings: leave escaping to encoding/json.
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s)
			return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
