package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/conformance"
	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/voucher"
)

// setUpCase creates the vouchers of case i and runs its steps.
func setUpCase(t *testing.T, s *pgstore.Store, i int, c conformance.Case) string {
	t.Helper()
	ctx := context.Background()
	code := conformance.Code(i)
	if !c.Voucher.Missing {
		_, err := s.CreateVoucher(ctx, c.Voucher.Voucher(code))
		require.NoError(t, err)
	}
	other := conformance.OtherCode(i)
	_, err := s.CreateVoucher(ctx, conformance.VoucherSpec{TotalLimit: 100, PerUserLimit: 100}.Voucher(other))
	require.NoError(t, err)
	for _, st := range c.Before {
		on := code
		if st.OtherVoucher {
			on = other
		}
		switch st.Kind {
		case conformance.StepReserve:
			res, err := s.Reserve(ctx, voucher.ReserveRequest{Code: on, CustomerID: st.Customer, OrderID: conformance.OrderID(i, st.Order),
				OrderAmount: conformance.Amount}, conformance.Now, conformance.TTL)
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

// The single and the batch reservation functions answer every case of the
// rule as the conformance table says.
func TestConformance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run(string(conformance.Reserve), func(t *testing.T) {
		t.Parallel()
		s := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
		for i, c := range conformance.Cases {
			code := setUpCase(t, s, i, c)
			for j, r := range c.Requests {
				got := conformance.AnswerOf(s.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: r.Customer,
					OrderID: conformance.OrderID(i, r.Order), OrderAmount: r.OrderAmount()}, conformance.Now, conformance.TTL))
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
				elems[j] = elem{customer: r.Customer, order: conformance.OrderID(i, r.Order), amount: r.OrderAmount()}
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
