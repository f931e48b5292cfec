package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/conformance"
	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/voucher"
)

// setUpCase creates the vouchers (or campaign) of case i and runs its
// steps.
func setUpCase(t *testing.T, s *pgstore.Store, i int, c conformance.Case) string {
	t.Helper()
	ctx := context.Background()
	code := conformance.Code(i)
	switch {
	case c.Voucher.Campaign:
		// The codes bound to a customer are imported, the others generated.
		var generated []string
		var bound []voucher.ImportCode
		for k := range conformance.CampaignCodes {
			if customer, ok := c.Voucher.CodeCustomers[k]; ok {
				bound = append(bound, voucher.ImportCode{Code: conformance.CampaignCode(i, k), CustomerID: customer})
			} else {
				generated = append(generated, conformance.CampaignCode(i, k))
			}
		}
		gen := func(n int) ([]string, error) { return generated[:n], nil }
		_, err := s.CreateCampaign(ctx, voucher.Campaign{ID: code, Name: c.Name, CodeLength: voucher.DefaultCodeLength,
			Budget: c.Voucher.Voucher(code)}, len(generated), gen)
		require.NoError(t, err)
		if len(bound) > 0 {
			res, err := s.ImportCampaignCodes(ctx, code, bound)
			require.NoError(t, err)
			require.Equal(t, len(bound), res.Added)
		}
	case !c.Voucher.Missing:
		_, err := s.CreateVoucher(ctx, c.Voucher.Voucher(code))
		require.NoError(t, err)
	}
	// The code each order was reserved with: release and confirm name it.
	codeOf := map[string]string{}
	other := conformance.OtherCode(i)
	_, err := s.CreateVoucher(ctx, conformance.VoucherSpec{TotalLimit: 100, PerUserLimit: 100}.Voucher(other))
	require.NoError(t, err)
	for _, st := range c.Before {
		on := code
		switch {
		case st.OtherVoucher:
			on = other
		case st.Kind != conformance.StepReserve:
			on = codeOf[st.Order]
		case c.Voucher.Campaign:
			on = conformance.CampaignCode(i, st.CodeIndex)
		}
		switch st.Kind {
		case conformance.StepReserve:
			codeOf[st.Order] = on
			res, err := s.Reserve(ctx, voucher.ReserveRequest{Code: on, CustomerID: st.Customer, OrderID: conformance.OrderID(i, st.Order),
				OrderAmount: conformance.Amount, Currency: c.Voucher.Currency, Window: c.Voucher.Occurrence(st.At())}, st.At(), conformance.TTL)
			require.NoError(t, err, "%s: step %+v", c.Name, st)
			require.False(t, res.Replay, "%s: step %+v", c.Name, st)
		case conformance.StepRelease:
			_, released, err := s.Release(ctx, on, conformance.OrderID(i, st.Order), conformance.Now)
			require.NoError(t, err)
			require.True(t, released)
		case conformance.StepConfirm:
			_, err := s.Confirm(ctx, on, conformance.OrderID(i, st.Order), conformance.Now)
			require.NoError(t, err)
		}
	}
	return code
}

// requestCode is the code request r of case i names.
func requestCode(i int, c conformance.Case, r conformance.Request) string {
	if c.Voucher.Campaign && !r.Budget {
		return conformance.CampaignCode(i, r.CodeIndex)
	}
	return conformance.Code(i)
}

// The single and the batch reservation functions answer every case of the
// rule as the conformance table says.
func TestConformance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run(string(conformance.Reserve), func(t *testing.T) {
		t.Parallel()
		s := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
		for i, c := range conformance.Cases {
			setUpCase(t, s, i, c)
			for j, r := range c.Requests {
				got := conformance.AnswerOf(s.Reserve(ctx, voucher.ReserveRequest{Code: requestCode(i, c, r), CustomerID: r.Customer,
					OrderID: conformance.OrderID(i, r.Order), OrderAmount: r.OrderAmount(), Currency: r.Currency,
					Window: c.Voucher.Occurrence(conformance.Now)}, conformance.Now, conformance.TTL))
				require.True(t, c.Want[j].Accepts(got), "%s: request %d: want %s, got %s", c.Name, j, c.Want[j], got)
			}
		}
	})
	t.Run(string(conformance.ReserveBatch), func(t *testing.T) {
		t.Parallel()
		s := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
		for i, c := range conformance.Cases {
			code := setUpCase(t, s, i, c)
			elems := make([]elem, len(c.Requests))
			for j, r := range c.Requests {
				elems[j] = elem{customer: r.Customer, order: conformance.OrderID(i, r.Order), amount: r.OrderAmount(), currency: r.Currency}
			}
			if c.Voucher.Campaign || c.Voucher.Windowed() {
				// The batch hands a campaign code, and a voucher with
				// windows, back (VD003) to be reserved one by one with
				// voucherd_reserve, as the combiner then does.
				_, err := reserveBatchSQL(ctx, s, requestCode(i, c, c.Requests[0]), conformance.Now, elems)
				var pgErr *pgconn.PgError
				require.ErrorAs(t, err, &pgErr, c.Name)
				require.Equal(t, "VD003", pgErr.Code, c.Name)
				for j, r := range c.Requests {
					got := conformance.AnswerOf(s.Reserve(ctx, voucher.ReserveRequest{Code: requestCode(i, c, r),
						CustomerID: r.Customer, OrderID: conformance.OrderID(i, r.Order), OrderAmount: r.OrderAmount(), Currency: r.Currency,
						Window: c.Voucher.Occurrence(conformance.Now)},
						conformance.Now, conformance.TTL))
					require.True(t, c.Want[j].Accepts(got), "%s: element %d: want %s, got %s", c.Name, j, c.Want[j], got)
				}
				continue
			}
			answers, err := reserveBatchSQL(ctx, s, code, conformance.Now, elems)
			require.NoError(t, err, c.Name)
			for j, a := range answers {
				got := conformance.Answer{Code: a.Code, Reason: a.Reason, Replay: a.Replay}
				if a.Code == "" {
					got.Discount = &a.Redemption.DiscountAmount
				}
				require.True(t, c.Want[j].Accepts(got), "%s: element %d: want %s, got %s", c.Name, j, c.Want[j], got)
			}
		}
	})
}
