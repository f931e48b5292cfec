package voucher

import (
	"context"
	"time"
)

// ValidateRequest asks whether a reservation would take a use now, without
// taking one. OrderID is optional: without it, the orderId checks (replay,
// conflict, released) are left out, as for an orderId never seen.
type ValidateRequest struct {
	Code        string
	CustomerID  string
	OrderID     string
	OrderAmount int64
	// Currency is the ISO 4217 code of OrderAmount; "" names none.
	Currency string
	// Window is the occurrence the validation falls in
	// (ReserveRequest.Window).
	Window time.Time
	// Requester is who sent the request (ReserveRequest.Requester).
	Requester Requester
}

// Validate checks the ranges of the request fields.
func (r ValidateRequest) Validate() error {
	if r.OrderID == "" {
		r.OrderID = "x" // any valid orderId: the field is optional
	}
	return ReserveRequest{Code: r.Code, CustomerID: r.CustomerID, OrderID: r.OrderID, OrderAmount: r.OrderAmount,
		Currency: r.Currency}.Validate()
}

// Purchase is what the eligibility rule knows of the request.
func (r ValidateRequest) Purchase() Purchase {
	return Purchase{Amount: r.OrderAmount, CustomerID: r.CustomerID, Currency: r.Currency}
}

// StoreValidation is what Store.Validate found for a request a reservation
// would not refuse: the discount of the use it would take, or, when the
// orderId already holds a use of the voucher for the customer, that hold's
// discount and Replay.
type StoreValidation struct {
	DiscountAmount int64
	Replay         bool
}

// Validation is the answer to a ValidateRequest: what a reservation made at
// the same moment would answer, taking nothing.
type Validation struct {
	// Valid is true when the reservation would succeed (take a use, or
	// replay the orderId's hold: Replay).
	Valid bool
	// Replay: the orderId already holds a use of this voucher for this
	// customer; a reservation would answer that hold again.
	Replay bool
	// DiscountAmount is the discount of the use (Valid only).
	DiscountAmount int64
	// Code is the error code the reservation would answer ("" when Valid),
	// Reason its NOT_ELIGIBLE reason.
	Code   ErrorCode
	Reason Reason
	// RetryAfter is HELD_OUT's time until the earliest hold expires.
	RetryAfter time.Duration
	// Message is the reservation's message for Code.
	Message string
	// Limit and BudgetRemaining are the refusal's (Error.Limit,
	// Error.BudgetRemaining).
	Limit           Limit
	BudgetRemaining int64
	// NextWindowAt is the refusal's (Error.NextWindowAt).
	NextWindowAt time.Time
}

// ValidationOf turns the answer of a reservation rule into a Validation:
// a refusal of the rule is an invalid answer; a request error, an unknown
// voucher or a dependency failure stays an error.
func ValidationOf(sv StoreValidation, err error) (Validation, error) {
	if err == nil {
		return Validation{Valid: true, Replay: sv.Replay, DiscountAmount: sv.DiscountAmount}, nil
	}
	e, ok := err.(*Error)
	if !ok || !refusal(e.Code) {
		return Validation{}, err
	}
	return Validation{Code: e.Code, Reason: e.Reason, RetryAfter: e.RetryAfter, Message: e.Message,
		Limit: e.Limit, BudgetRemaining: e.BudgetRemaining, NextWindowAt: e.NextWindowAt}, nil
}

// refusal reports whether code is a reservation rule's refusal, which a
// validation answers with 200 and valid=false.
func refusal(code ErrorCode) bool {
	switch code {
	case CodeOutOfStock, CodeHeldOut, CodeAlreadyUsed, CodeNotEligible, CodeOrderConflict, CodeOrderReleased,
		CodeBudgetExceeded:
		return true
	}
	return false
}

// validationOutcome is the outcome Observer.Validated gets.
func validationOutcome(v Validation, err error) string {
	switch {
	case err != nil:
		return string(CodeOf(err))
	case v.Replay:
		return "replay"
	case v.Valid:
		return "valid"
	case v.Reason != "":
		return string(v.Reason)
	}
	return string(v.Code)
}

// Validate answers what a reservation of req made now would answer, and
// takes nothing: no row, counter or gate key is written. Standard vouchers
// are asked of the store (one read-only statement; a voucher its cached
// definition refuses is answered from the orderId's row, as Reserve
// answers it); flash vouchers of the gate (a read-only script, or the
// sold-out copy), with the store read only to tell HELD_OUT from
// OUT_OF_STOCK as a reservation does (cached for HeldOutCacheTTL), or when
// the voucher is not loaded into the gate and its warm-up fails. Unknown
// voucher: CodeVoucherNotFound. An orderId used with another voucher is
// seen on the standard path only; on the flash paths a reservation finds
// that out when it writes.
func (s *Service) Validate(ctx context.Context, req ValidateRequest) (v Validation, err error) {
	defer func() {
		s.obs.Validated(validationOutcome(v, err))
		s.noteValidationRefusal(v, err)
	}()
	if err := req.Validate(); err != nil {
		return Validation{}, err
	}
	if err := s.guessCheck(req.CustomerID, req.Requester); err != nil {
		return Validation{}, err
	}
	// A campaign code resolves to its budget, as in Reserve.
	now := s.now()
	rt, err := s.routeNew(ctx, req.Code, req.OrderID, now)
	if err != nil {
		s.guessNoted(req.CustomerID, req.Requester, err)
		return Validation{}, err
	}
	if rt.v.Campaign && rt.v.Code == req.Code {
		return Validation{}, Reject(CodeVoucherNotFound, "", Facts{Voucher: req.Code})
	}
	// As Reserve: the voucher's form of the customerId, before anything is
	// asked of the store or the gate.
	req.CustomerID = rt.v.CustomerIDNormalization.Apply(req.CustomerID)
	req.Window = rt.v.Occurrence(now).Start
	sv, err := rt.path.validate(ctx, rt, req, now)
	return ValidationOf(sv, withNextWindow(err, rt.v, now))
}
