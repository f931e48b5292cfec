package httpapi

import (
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// voucherJSON is a voucher on the wire, with live counts.
type voucherJSON struct {
	Code           string    `json:"code"`
	DiscountAmount int64     `json:"discountAmount"`
	MinOrderAmount int64     `json:"minOrderAmount"`
	TotalLimit     int32     `json:"totalLimit"`
	PerUserLimit   int32     `json:"perUserLimit"`
	StartsAt       time.Time `json:"startsAt"`
	EndsAt         time.Time `json:"endsAt"`
	FlashSale      bool      `json:"flashSale"`
	Active         bool      `json:"active"`
	Reserved       int32     `json:"reserved"`
	Confirmed      int32     `json:"confirmed"`
	Remaining      int32     `json:"remaining"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
}

func toVoucherJSON(v voucher.Voucher) voucherJSON {
	return voucherJSON{
		Code: v.Code, DiscountAmount: v.DiscountAmount, MinOrderAmount: v.MinOrderAmount,
		TotalLimit: v.TotalLimit, PerUserLimit: v.PerUserLimit,
		StartsAt: v.StartsAt.UTC(), EndsAt: v.EndsAt.UTC(), FlashSale: v.FlashSale, Active: !v.Disabled,
		Reserved: v.Reserved, Confirmed: v.Confirmed, Remaining: v.Remaining(),
		CreatedAt: v.CreatedAt.UTC(), UpdatedAt: v.UpdatedAt.UTC(),
	}
}

// createVoucherRequest is the body of POST /vouchers. Pointers tell a
// missing field from a zero one.
type createVoucherRequest struct {
	Code           *string    `json:"code"`
	DiscountAmount *int64     `json:"discountAmount"`
	MinOrderAmount *int64     `json:"minOrderAmount"`
	TotalLimit     *int32     `json:"totalLimit"`
	PerUserLimit   *int32     `json:"perUserLimit"`
	StartsAt       *time.Time `json:"startsAt"`
	EndsAt         *time.Time `json:"endsAt"`
	FlashSale      *bool      `json:"flashSale"`
}

func (r createVoucherRequest) toVoucher() (voucher.Voucher, error) {
	missing := func(name string) error {
		return voucher.Errorf(voucher.CodeInvalidRequest, "%s is required", name)
	}
	switch {
	case r.Code == nil:
		return voucher.Voucher{}, missing("code")
	case r.DiscountAmount == nil:
		return voucher.Voucher{}, missing("discountAmount")
	case r.TotalLimit == nil:
		return voucher.Voucher{}, missing("totalLimit")
	case r.StartsAt == nil:
		return voucher.Voucher{}, missing("startsAt")
	case r.EndsAt == nil:
		return voucher.Voucher{}, missing("endsAt")
	}
	v := voucher.Voucher{
		Code: *r.Code, DiscountAmount: *r.DiscountAmount, TotalLimit: *r.TotalLimit,
		PerUserLimit: 1, StartsAt: *r.StartsAt, EndsAt: *r.EndsAt,
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
	return v, v.Validate()
}

// patchVoucherRequest is the body of PATCH /vouchers/{code}.
type patchVoucherRequest struct {
	DiscountAmount *int64     `json:"discountAmount"`
	MinOrderAmount *int64     `json:"minOrderAmount"`
	TotalLimit     *int32     `json:"totalLimit"`
	PerUserLimit   *int32     `json:"perUserLimit"`
	StartsAt       *time.Time `json:"startsAt"`
	EndsAt         *time.Time `json:"endsAt"`
	FlashSale      *bool      `json:"flashSale"`
	Active         *bool      `json:"active"`
}

func (r patchVoucherRequest) toPatch() voucher.Patch {
	return voucher.Patch{
		DiscountAmount: r.DiscountAmount, MinOrderAmount: r.MinOrderAmount,
		TotalLimit: r.TotalLimit, PerUserLimit: r.PerUserLimit,
		StartsAt: r.StartsAt, EndsAt: r.EndsAt, FlashSale: r.FlashSale, Active: r.Active,
	}
}

// reserveRequest is the body of POST /vouchers/{code}/reservations.
type reserveRequest struct {
	CustomerID  *int64  `json:"customerId"`
	OrderID     *string `json:"orderId"`
	OrderAmount *int64  `json:"orderAmount"`
}

func (r reserveRequest) toDomain(code string) (voucher.ReserveRequest, error) {
	switch {
	case r.CustomerID == nil:
		return voucher.ReserveRequest{}, voucher.Errorf(voucher.CodeInvalidRequest, "customerId is required")
	case r.OrderID == nil:
		return voucher.ReserveRequest{}, voucher.Errorf(voucher.CodeInvalidRequest, "orderId is required")
	case r.OrderAmount == nil:
		return voucher.ReserveRequest{}, voucher.Errorf(voucher.CodeInvalidRequest, "orderAmount is required")
	}
	req := voucher.ReserveRequest{Code: code, CustomerID: *r.CustomerID, OrderID: *r.OrderID, OrderAmount: *r.OrderAmount}
	return req, req.Validate()
}

// extendRequest is the body of POST
// /vouchers/{code}/reservations/{orderId}/extend.
type extendRequest struct {
	Seconds *int64 `json:"seconds"`
}

func (r extendRequest) duration() (time.Duration, error) {
	most := int64(voucher.MaxExtension / time.Second)
	switch {
	case r.Seconds == nil:
		return 0, voucher.Errorf(voucher.CodeInvalidRequest, "seconds is required")
	case *r.Seconds < 1 || *r.Seconds > most:
		return 0, voucher.Errorf(voucher.CodeInvalidRequest, "seconds must be between 1 and %d", most)
	}
	return time.Duration(*r.Seconds) * time.Second, nil
}

// reservationJSON is the 201 body of a reservation (SPEC §3).
type reservationJSON struct {
	OrderID        string    `json:"orderId"`
	DiscountAmount int64     `json:"discountAmount"`
	Status         string    `json:"status"`
	ExpiresAt      time.Time `json:"expiresAt"`
}

// redemptionJSON is a redemption on the wire.
type redemptionJSON struct {
	OrderID        string    `json:"orderId"`
	VoucherCode    string    `json:"voucherCode"`
	CustomerID     int64     `json:"customerId"`
	OrderAmount    int64     `json:"orderAmount"`
	DiscountAmount int64     `json:"discountAmount"`
	Status         string    `json:"status"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
	ExpiresAt      time.Time `json:"expiresAt"`
}

func toRedemptionJSON(r voucher.Redemption) redemptionJSON {
	return redemptionJSON{
		OrderID: r.OrderID, VoucherCode: r.VoucherCode, CustomerID: r.CustomerID,
		OrderAmount: r.OrderAmount, DiscountAmount: r.DiscountAmount, Status: string(r.Status),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(),
	}
}

// errorJSON is every error body: {"error": CODE, "message": text} plus
// reason, retryAfter and outcomeUnknown where they apply.
type errorJSON struct {
	Error          string `json:"error"`
	Message        string `json:"message"`
	Reason         string `json:"reason,omitempty"`
	RetryAfter     *int64 `json:"retryAfter,omitempty"`
	OutcomeUnknown bool   `json:"outcomeUnknown,omitempty"`
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
