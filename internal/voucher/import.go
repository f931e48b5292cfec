package voucher

import (
	"context"
	"fmt"
)

// MaxImportCodes is the most codes one import (ImportCampaignCodes) carries.
const MaxImportCodes = 10_000

// ImportCode is one of a shop's own codes to add to a campaign, optionally
// bound to one customer (in the form the campaign normalises customerIds
// to: the code then serves that customer only, CUSTOMER_MISMATCH for any
// other).
type ImportCode struct {
	Code       string
	CustomerID string
}

// ImportReason says why an imported code was not added.
type ImportReason string

// Import reasons.
const (
	// ImportDuplicate: the code appears earlier in the same import.
	ImportDuplicate ImportReason = "DUPLICATE"
	// ImportExists: the code is already the campaign's, for the same
	// customer (or none): nothing to do. Not a refusal: an import may be
	// sent again.
	ImportExists ImportReason = "EXISTS"
	// ImportCustomerDiffers: the code is already the campaign's, bound to
	// another customer (or to none).
	ImportCustomerDiffers ImportReason = "CUSTOMER_DIFFERS"
	// ImportCodeTaken: the code is another campaign's, or a voucher's.
	ImportCodeTaken ImportReason = "CODE_TAKEN"
)

// ImportRefusal is an element of an import that was not added: its
// 0-based position in the import, its code and why.
type ImportRefusal struct {
	Index  int
	Code   string
	Reason ImportReason
}

// ImportResult is the answer of an import: the codes added, those the
// campaign had already (ImportExists), the others refused, and the campaign
// after the import.
type ImportResult struct {
	Added    int
	Existing int
	Refused  []ImportRefusal
	Campaign Campaign
}

// checkImport checks the form of every element: a malformed one is refused
// with CodeInvalidRequest naming its position, and nothing is imported.
func checkImport(codes []ImportCode) error {
	if len(codes) < 1 || len(codes) > MaxImportCodes {
		return Errorf(CodeInvalidRequest, "codes must hold from 1 to %d codes", MaxImportCodes)
	}
	for i, c := range codes {
		switch {
		case !ValidCode(c.Code):
			return Errorf(CodeInvalidRequest, "codes[%d].code must be 1-32 characters of A-Z a-z 0-9 _ -", i)
		case c.CustomerID != "" && !ValidCustomerID(c.CustomerID):
			return Errorf(CodeInvalidRequest, "codes[%d].customerId must be 1-64 characters of A-Z a-z 0-9 . _ : - @ +", i)
		}
	}
	return nil
}

// ImportCampaignCodes adds a shop's own codes to campaign id, in one
// transaction: each code is added, found already there (idempotent), or
// refused with its reason (ImportResult.Refused); nothing is written when
// the call fails. The customers are normalised as the campaign's
// reservations are.
func (s *Service) ImportCampaignCodes(ctx context.Context, id string, codes []ImportCode) (ImportResult, error) {
	if err := checkImport(codes); err != nil {
		return ImportResult{}, err
	}
	c, err := s.Campaign(ctx, id)
	if err != nil {
		return ImportResult{}, err
	}
	if int64(c.CodeCount)+int64(len(codes)) > MaxCampaignCodes {
		return ImportResult{}, Errorf(CodeInvalidRequest, "a campaign has at most %d codes", MaxCampaignCodes)
	}
	norm := make([]ImportCode, len(codes))
	for i, ic := range codes {
		norm[i] = ImportCode{Code: ic.Code, CustomerID: c.Budget.CustomerIDNormalization.Apply(ic.CustomerID)}
	}
	res, err := s.store.ImportCampaignCodes(ctx, id, norm)
	if err != nil {
		return ImportResult{}, err
	}
	if res.Added+res.Existing+len(res.Refused) != len(codes) {
		return ImportResult{}, fmt.Errorf("voucher: import of %d codes answered %d added, %d existing, %d refused",
			len(codes), res.Added, res.Existing, len(res.Refused))
	}
	return res, nil
}
