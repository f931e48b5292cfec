package voucher

import (
	"context"
	"time"
)

// CodeResolver is an optional extension of Store: what a reservation or a
// validation of a code absent from the definition cache reads first, in one
// round trip that costs the same whether the code exists or not, so that
// the answer to an unknown code takes as long as the refusal of a known
// one (docs/guessing.md, "Timing").
type CodeResolver interface {
	// ResolveCode reads the voucher code names, else the budget of the
	// campaign code belongs to (either without live counts), whether a
	// RESERVED or CONFIRMED redemption holds the code, and the redemption
	// of orderID whatever its voucher ("" reads none). A code that names
	// nothing is Found false, not an error.
	ResolveCode(ctx context.Context, code, orderID string) (Resolution, error)
}

// Resolution is what CodeResolver.ResolveCode read, in one snapshot.
type Resolution struct {
	// Voucher is the voucher the code names, or with ByCampaign its
	// campaign's budget, without live counts (Reserved and Confirmed are
	// zero); valid when Found.
	Voucher    Voucher
	Found      bool
	ByCampaign bool
	// CodeHeld: a RESERVED or CONFIRMED redemption holds the code.
	CodeHeld bool
	// Order is the orderId's redemption (a campaign one with its campaign
	// code as VoucherCode), valid when HasOrder.
	Order    Redemption
	HasOrder bool
}

// definition returns the voucher (or campaign budget) a reservation or a
// validation of code goes by. A code in the definition cache is answered
// from it with pre nil. Any other code, known or not, is read with one
// ResolveCode when the store has it (pre is then that read, of orderID's
// row too); a store without it is asked as resolve asks. Vouchers are
// cached, campaign codes never: a code someone looks up twice costs the
// same again, known or not. Only when the store cannot be read does a
// campaign code this process resolved before go by the campaign it
// resolved to, as in resolve.
func (s *Service) definition(ctx context.Context, code, orderID string, now time.Time) (v Voucher, pre *Resolution, err error) {
	r, ok := s.store.(CodeResolver)
	if !ok || s.cached(code) {
		v, err = s.resolve(ctx, code, now)
		return v, nil, err
	}
	res, err := r.ResolveCode(ctx, code, orderID)
	switch {
	case IsCode(err, CodeUnavailable):
		if id, ok := s.campaignID(code); ok {
			v, err = s.cachedVoucherAt(ctx, id, now)
			return v, nil, err
		}
		return Voucher{}, nil, err
	case err != nil:
		return Voucher{}, nil, err
	case !res.Found:
		return Voucher{}, nil, Reject(CodeVoucherNotFound, "", Facts{Voucher: code})
	case res.ByCampaign:
		s.rememberCampaign(code, res.Voucher.Code)
	default:
		s.remember(code, res.Voucher, now)
	}
	return res.Voucher, &res, nil
}

// codeUsed answers, from pre, a campaign code that its (fresh, eligible)
// budget would let a new order take but that another order holds, as
// voucherd_reserve_one and voucherd_validate answer it: nil when pre does
// not say so (no read, another kind of code, or an orderId with a row,
// which the store answers).
func codeUsed(code string, pre *Resolution) error {
	if pre == nil || !pre.ByCampaign || !pre.CodeHeld || pre.HasOrder {
		return nil
	}
	return Reject(CodeAlreadyUsed, ReasonCodeUsed, Facts{Voucher: code})
}
