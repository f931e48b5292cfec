package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// An import adds a shop's own codes in one transaction: each is added,
// found there already for the same customer (idempotent), or refused with
// its reason; the code count and the audit trail follow. A code bound to a
// customer serves that customer only, in the reservation and validation
// functions and in ResolveCode.
func TestImportCampaignCodes(t *testing.T) {
	t.Parallel()
	ctx := voucher.WithActor(context.Background(), "importer")
	s := newStore(t)
	_, generated := newCampaign(t, s, "cmp_IMPORT", "GEN-", 3, 10, 5)
	_, other := newCampaign(t, s, "cmp_IMPOTHER", "OTH-", 1, 10, 5)
	newVoucher(t, s, "IMPVOUCHER", 10, 1)

	res, err := s.ImportCampaignCodes(ctx, "cmp_IMPORT", []voucher.ImportCode{
		{Code: "SPRING-7F3K"},
		{Code: "VIP-ANNA", CustomerID: "anna@example.com"},
		{Code: "SPRING-7F3K"},
		{Code: other[0]},
		{Code: "IMPVOUCHER"},
		{Code: generated[0]},
		{Code: generated[1], CustomerID: "bob"},
	})
	require.NoError(t, err)
	require.Equal(t, 2, res.Added)
	require.Equal(t, 1, res.Existing, "a generated code of this campaign, imported without a customer")
	require.Equal(t, []voucher.ImportRefusal{
		{Index: 2, Code: "SPRING-7F3K", Reason: voucher.ImportDuplicate},
		{Index: 3, Code: other[0], Reason: voucher.ImportCodeTaken},
		{Index: 4, Code: "IMPVOUCHER", Reason: voucher.ImportCodeTaken},
		{Index: 6, Code: generated[1], Reason: voucher.ImportCustomerDiffers},
	}, res.Refused)
	require.Equal(t, int32(5), res.Campaign.CodeCount)

	// Sent again: nothing added twice.
	again, err := s.ImportCampaignCodes(ctx, "cmp_IMPORT", []voucher.ImportCode{
		{Code: "SPRING-7F3K"}, {Code: "VIP-ANNA", CustomerID: "anna@example.com"}, {Code: "VIP-ANNA"},
	})
	require.NoError(t, err)
	require.Equal(t, 0, again.Added)
	require.Equal(t, 2, again.Existing)
	require.Equal(t, []voucher.ImportRefusal{{Index: 2, Code: "VIP-ANNA", Reason: voucher.ImportDuplicate}}, again.Refused)
	require.Equal(t, int32(5), again.Campaign.CodeCount)

	_, err = s.ImportCampaignCodes(ctx, "cmp_NOPE", []voucher.ImportCode{{Code: "X1"}})
	require.True(t, voucher.IsCode(err, voucher.CodeCampaignNotFound), "%v", err)

	page, err := s.Audit(ctx, "cmp_IMPORT", voucher.PageRequest{Limit: 10})
	require.NoError(t, err)
	var imports []string
	for _, e := range page.Entries {
		if e.Action == voucher.AuditAddCodes {
			require.Equal(t, "importer", e.KeyName)
			imports = append(imports, string(e.After))
		}
	}
	require.ElementsMatch(t, []string{`{"count": 2, "imported": true}`, `{"count": 0, "imported": true}`}, imports)

	customers := map[string]string{}
	require.NoError(t, s.EachCampaignCode(ctx, "cmp_IMPORT", func(c voucher.CampaignCode) error {
		customers[c.Code] = c.CustomerID
		return nil
	}))
	require.Len(t, customers, 5)
	require.Equal(t, "anna@example.com", customers["VIP-ANNA"])
	require.Empty(t, customers["SPRING-7F3K"])

	// The bound code serves its customer only; the other codes anyone.
	res2, err := s.ResolveCode(ctx, "VIP-ANNA", "")
	require.NoError(t, err)
	require.Equal(t, "anna@example.com", res2.Voucher.CustomerID)
	res2, err = s.ResolveCode(ctx, "SPRING-7F3K", "")
	require.NoError(t, err)
	require.Empty(t, res2.Voucher.CustomerID)
	for i, customer := range []string{"bob", "anna@example.com"} {
		req := voucher.ReserveRequest{Code: "VIP-ANNA", CustomerID: customer, OrderID: fmt.Sprintf("imp-%d", i), OrderAmount: 10_000}
		_, verr := s.Validate(ctx, voucher.ValidateRequest{Code: req.Code, CustomerID: customer, OrderAmount: 10_000}, base.Add(time.Hour))
		_, err := s.Reserve(ctx, req, base.Add(time.Hour), ttl)
		if customer == "bob" {
			for _, err := range []error{verr, err} {
				var ve *voucher.Error
				require.ErrorAs(t, err, &ve)
				require.Equal(t, voucher.ReasonCustomerMismatch, ve.Reason)
			}
			continue
		}
		require.NoError(t, verr)
		require.NoError(t, err)
	}
}
