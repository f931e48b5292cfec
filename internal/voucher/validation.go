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
}

// Validate checks the ranges of the request fields.
func (r ValidateRequest) Validate() error {
	if r.OrderID == "" {
		r.OrderID = "x" // any valid orderId: the field is optional
	}
	return ReserveRequest{Code: r.Code, CustomerID: r.CustomerID, OrderID: r.OrderID, OrderAmount: r.OrderAmount}.Validate()
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
	return Validation{Code: e.Code, Reason: e.Reason, RetryAfter: e.RetryAfter, Message: e.Message}, nil
}

// refusal reports whether code is a reservation rule's refusal, which a
// validation answers with 200 and valid=false.
func refusal(code ErrorCode) bool {
	switch code {
	case CodeOutOfStock, CodeHeldOut, CodeAlreadyUsed, CodeNotEligible, CodeOrderConflict, CodeOrderReleased:
		return true
	}
	return false
}

// ValidationObserver is an optional extension of Observer: called once per
// validation with its outcome, "valid", "replay", the refusal's reason
// (the NOT_ELIGIBLE reason, else the code), or the error code of a
// validation that got no answer.
type ValidationObserver interface {
	Validated(outcome string)
}

// validationOutcome is the outcome a ValidationObserver gets.
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
// answers it); flash vouchers of the
// gate (a read-only script, or the sold-out copy), with the store read only
// to tell HELD_OUT from OUT_OF_STOCK as a reservation does (cached for
// HeldOutCacheTTL), or when the voucher is not loaded into the gate and its
// warm-up fails. Unknown voucher: CodeVoucherNotFound. An orderId used with
// another voucher is seen on the standard path only; on the flash paths a
// reservation finds that out when it writes.
func (s *Service) Validate(ctx context.Context, req ValidateRequest) (v Validation, err error) {
	if o, ok := s.obs.(ValidationObserver); ok {
		defer func() { o.Validated(validationOutcome(v, err)) }()
	}
	defer func() { s.noteValidationRefusal(v, err) }()
	if err := req.Validate(); err != nil {
		return Validation{}, err
	}
	if err := s.guessCheck(req.CustomerID); err != nil {
		return Validation{}, err
	}
	// A campaign code resolves to its budget, as in Reserve.
	now := s.cfg.Clock()
	vc, pre, err := s.definition(ctx, req.Code, req.OrderID, now)
	if err != nil {
		s.guessNoted(req.CustomerID, err)
		return Validation{}, err
	}
	if vc.Campaign && vc.Code == req.Code {
		return Validation{}, Reject(CodeVoucherNotFound, "", Facts{Voucher: req.Code})
	}
	// As Reserve: the voucher's form of the customerId, before anything is
	// asked of the store or the gate.
	req.CustomerID = vc.CustomerIDNormalization.Apply(req.CustomerID)
	if !vc.FlashSale {
		if inelig := vc.CheckEligible(req.OrderAmount, now); inelig != nil {
			// As Reserve answers it (ineligibleStandard).
			if req.OrderID == "" {
				return ValidationOf(StoreValidation{}, inelig)
			}
			res, err := s.ineligibleStandard(ctx, ReserveRequest{Code: req.Code, CustomerID: req.CustomerID,
				OrderID: req.OrderID, OrderAmount: req.OrderAmount}, inelig, pre)
			return ValidationOf(StoreValidation{DiscountAmount: res.DiscountAmount, Replay: err == nil}, err)
		}
		if err := codeUsed(req.Code, pre); err != nil {
			return ValidationOf(StoreValidation{}, err)
		}
		return ValidationOf(s.store.Validate(ctx, req, now))
	}
	if s.gate == nil {
		if s.cfg.FlashFallback {
			return ValidationOf(s.store.Validate(ctx, req, now))
		}
		return Validation{}, Unavailable(nil, "flash voucher %s needs Redis, which is not configured", req.Code)
	}
	return ValidationOf(s.validateFlash(ctx, req, vc, now))
}

// validateFlash is reserveFlash without the take and the durable write.
func (s *Service) validateFlash(ctx context.Context, req ValidateRequest, v Voucher, now time.Time) (StoreValidation, error) {
	gateCode, campaignCode := v.Code, campaignCodeOf(req.Code, v)
	if err := v.CheckEligible(req.OrderAmount, now); err != nil {
		if req.OrderID == "" {
			return StoreValidation{}, err
		}
		h, found, lerr := s.gate.Lookup(ctx, gateCode, req.OrderID)
		switch {
		case lerr != nil || !found:
			return StoreValidation{}, err
		case h.CustomerID != req.CustomerID || h.Code != campaignCode:
			return StoreValidation{}, orderConflict(req.Code, req.OrderID, "")
		case h.Released:
			return StoreValidation{}, orderReleased(req.OrderID)
		}
		return StoreValidation{DiscountAmount: h.DiscountAmount, Replay: true}, nil
	}
	for attempt := 0; ; attempt++ {
		dec, err := s.gate.Validate(ctx, gateCode, v.PerUserLimit, req.OrderID, req.CustomerID, campaignCode)
		if err != nil {
			if s.cfg.FlashFallback && s.cfg.FlashWrites != FlashKafka {
				return s.store.Validate(ctx, req, now)
			}
			return StoreValidation{}, err
		}
		switch dec.Outcome {
		case GateTaken:
			return StoreValidation{DiscountAmount: v.Discount().Compute(req.OrderAmount)}, nil
		case GateReplay:
			return StoreValidation{DiscountAmount: dec.Hold.DiscountAmount, Replay: true}, nil
		case GateConflict:
			return StoreValidation{}, orderConflict(req.Code, req.OrderID, "")
		case GateReleased:
			return StoreValidation{}, orderReleased(req.OrderID)
		case GateQuotaHeld:
			return StoreValidation{}, Reject(CodeAlreadyUsed, "", Facts{Voucher: req.Code, CustomerID: req.CustomerID, PerUserLimit: v.PerUserLimit})
		case GateSoldOut:
			return StoreValidation{}, s.soldOutInGate(ctx, gateCode, now)
		case GateCodeUsed:
			return StoreValidation{}, Reject(CodeAlreadyUsed, ReasonCodeUsed, Facts{Voucher: req.Code})
		case GateNotLoaded:
			if attempt >= notLoadedWarmups {
				// Read-only in the store: the gate loads from it the same way.
				return s.store.Validate(ctx, req, now)
			}
			if _, err := s.Warmup(ctx, gateCode); err != nil && !IsCode(err, CodeUnavailable) {
				return StoreValidation{}, err
			}
		default:
			return StoreValidation{}, Errorf(CodeInternal, "unexpected gate outcome %d", dec.Outcome)
		}
	}
}
