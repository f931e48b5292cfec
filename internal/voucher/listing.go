package voucher

import (
	"context"
	"time"
)

// Page sizes of the listings.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// VoucherState selects vouchers by where now falls in their window, or
// disabled ones. A disabled voucher is only ever in StateDisabled.
type VoucherState string

// Voucher states of the listing.
const (
	StateActive    VoucherState = "active"
	StateScheduled VoucherState = "scheduled"
	StateEnded     VoucherState = "ended"
	StateDisabled  VoucherState = "disabled"
)

// VoucherFilter selects one page of vouchers. Zero fields select everything.
type VoucherFilter struct {
	State      VoucherState
	FlashSale  *bool
	CodePrefix string
	// Limit is the page size (DefaultPageLimit when 0).
	Limit int
	// After is the cursor of the previous page; empty for the first.
	After string
}

// RedemptionFilter selects one page of redemptions: a voucher's when Code is
// set, a customer's across vouchers when CustomerID is set and Code is not.
type RedemptionFilter struct {
	Code       string
	Status     Status
	CustomerID string
	Limit      int
	After      string
}

// PageRequest is a page size and a cursor.
type PageRequest struct {
	Limit int
	After string
}

// VoucherPage is one page of vouchers with their live counts; an empty Next
// means the last page.
type VoucherPage struct {
	Vouchers []Voucher
	Next     string
}

// RedemptionPage is one page of redemptions; an empty Next means the last
// page.
type RedemptionPage struct {
	Redemptions []Redemption
	Next        string
}

// AdminStore is the store's side of administration: keyset-paginated
// listings, whose cursors it alone encodes and decodes (CodeInvalidRequest
// for a cursor it did not write or of another listing), and the audit trail.
// Every page is read through an index in the listing's order.
type AdminStore interface {
	// ListVouchers returns vouchers ordered by code (byte order), filtered
	// at now.
	ListVouchers(ctx context.Context, f VoucherFilter, now time.Time) (VoucherPage, error)
	// ListRedemptions returns redemptions ordered by (CreatedAt, OrderID).
	ListRedemptions(ctx context.Context, f RedemptionFilter) (RedemptionPage, error)
	// Audit returns a voucher's audit entries, oldest first.
	Audit(ctx context.Context, code string, p PageRequest) (AuditPage, error)
	// RecordAudit appends an entry of a change made outside the store
	// (reconciliation repairs of the gate).
	RecordAudit(ctx context.Context, e AuditEntry) error
}

func checkLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultPageLimit, nil
	case limit < 1 || limit > MaxPageLimit:
		return 0, Errorf(CodeInvalidRequest, "limit must be between 1 and %d", MaxPageLimit)
	}
	return limit, nil
}

// ListVouchers returns one page of vouchers, with live counts.
func (s *Service) ListVouchers(ctx context.Context, f VoucherFilter) (VoucherPage, error) {
	var err error
	if f.Limit, err = checkLimit(f.Limit); err != nil {
		return VoucherPage{}, err
	}
	switch f.State {
	case "", StateActive, StateScheduled, StateEnded, StateDisabled:
	default:
		return VoucherPage{}, Errorf(CodeInvalidRequest, "state must be active, scheduled, ended or disabled")
	}
	if f.CodePrefix != "" && !ValidCode(f.CodePrefix) {
		return VoucherPage{}, Errorf(CodeInvalidRequest, "codePrefix must be 1-32 characters of A-Z a-z 0-9 _ -")
	}
	return s.store.ListVouchers(ctx, f, s.now())
}

// ListReservations returns one page of a voucher's redemptions;
// CodeVoucherNotFound for an unknown voucher.
func (s *Service) ListReservations(ctx context.Context, f RedemptionFilter) (RedemptionPage, error) {
	var err error
	if f.Limit, err = checkLimit(f.Limit); err != nil {
		return RedemptionPage{}, err
	}
	switch f.Status {
	case "", StatusReserved, StatusConfirmed, StatusReleased:
	default:
		return RedemptionPage{}, Errorf(CodeInvalidRequest, "status must be RESERVED, CONFIRMED or RELEASED")
	}
	if f.CustomerID != "" && !ValidCustomerID(f.CustomerID) {
		return RedemptionPage{}, errCustomerID()
	}
	// The definition, not the counts: a listing must not count the
	// voucher's rows before it reads one page of them.
	v, err := s.store.VoucherDefinition(ctx, f.Code)
	if err != nil {
		return RedemptionPage{}, err
	}
	// The voucher's rows hold its normalised ids.
	if f.CustomerID != "" {
		f.CustomerID = v.CustomerIDNormalization.Apply(f.CustomerID)
	}
	return s.store.ListRedemptions(ctx, f)
}

// CustomerRedemptions returns one page of a customer's redemptions of every
// voucher.
func (s *Service) CustomerRedemptions(ctx context.Context, customerID string, p PageRequest) (RedemptionPage, error) {
	limit, err := checkLimit(p.Limit)
	if err != nil {
		return RedemptionPage{}, err
	}
	if !ValidCustomerID(customerID) {
		return RedemptionPage{}, errCustomerID()
	}
	return s.store.ListRedemptions(ctx, RedemptionFilter{CustomerID: customerID, Limit: limit, After: p.After})
}
