package voucher

import "errors"

// Operations a RefusalObserver is told about.
const (
	// OpReservation is a reservation (Reserve).
	OpReservation = "reservation"
	// OpValidation is a validation (Validate).
	OpValidation = "validation"
)

// RefusalObserver is an optional extension of Observer: called once per
// reservation or validation the service refused, with the operation
// (OpReservation, OpValidation) and the reason: the refusal's Reason when
// it has one (NOT_ELIGIBLE's EXPIRED, ALREADY_USED's CODE_USED, ...), else
// its code (VOUCHER_NOT_FOUND, TOO_MANY_REQUESTS, INVALID_REQUEST,
// OUT_OF_STOCK, ...). A validation answered valid=false is a refusal too;
// answers that are not refusals (UNAVAILABLE, INTERNAL) are not counted.
type RefusalObserver interface {
	Refused(op, reason string)
}

// noteRefusal tells the observer, if it listens, that op was refused with
// err; nothing when err is nil or not a refusal.
func (s *Service) noteRefusal(op string, err error) {
	if err == nil {
		return
	}
	if e, ok := err.(*Error); ok { // the common case, without errors.As's reflection or allocation
		s.refused(op, e.Code, e.Reason)
		return
	}
	var e *Error
	if errors.As(err, &e) {
		s.refused(op, e.Code, e.Reason)
	}
}

// noteValidationRefusal is noteRefusal for a validation's answer: v's
// refusal (valid=false) or err.
func (s *Service) noteValidationRefusal(v Validation, err error) {
	if err == nil && !v.Valid && v.Code != "" {
		s.refused(OpValidation, v.Code, v.Reason)
		return
	}
	s.noteRefusal(OpValidation, err)
}

func (s *Service) refused(op string, code ErrorCode, reason Reason) {
	o, ok := s.obs.(RefusalObserver)
	switch {
	case !ok || code == CodeUnavailable || code == CodeInternal:
	case reason != "":
		o.Refused(op, string(reason))
	default:
		o.Refused(op, string(code))
	}
}
