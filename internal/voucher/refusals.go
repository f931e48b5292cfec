package voucher

import "errors"

// Operations Observer.Refused is told about.
const (
	// OpReservation is a reservation (Reserve).
	OpReservation = "reservation"
	// OpValidation is a validation (Validate).
	OpValidation = "validation"
)

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
	switch {
	case code == CodeUnavailable || code == CodeInternal:
	case reason != "":
		s.obs.Refused(op, string(reason))
	default:
		s.obs.Refused(op, string(code))
	}
}
