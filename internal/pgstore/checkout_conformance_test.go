package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/conformance"
	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/voucher"
)

// requireUnchanged asserts that the voucher's rows and counters are what
// before read.
func requireUnchanged(t *testing.T, s *pgstore.Store, code string, before voucher.Snapshot, msg string) {
	t.Helper()
	after, err := s.GateSnapshot(context.Background(), code)
	require.NoError(t, err, msg)
	require.Equal(t, before, after, "%s: a validation changed the voucher's state", msg)
}

// voucherd_validate answers, for every case of the rule, the last request
// as the reservation answers it once the others were reserved, and changes
// nothing; the reservation asked right after it still answers as the table
// says.
func TestConformanceValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
	for i, c := range conformance.Cases {
		code := setUpCase(t, s, i, c)
		last := len(c.Requests) - 1
		for j, r := range c.Requests[:last] {
			got := conformance.AnswerOf(s.Reserve(ctx, voucher.ReserveRequest{Code: requestCode(i, c, r), CustomerID: r.Customer,
				OrderID: conformance.OrderID(i, r.Order), OrderAmount: r.OrderAmount(), Currency: r.Currency,
				Window: c.Voucher.Occurrence(conformance.Now)}, conformance.Now, conformance.TTL))
			require.True(t, c.Want[j].Accepts(got), "%s: request %d: want %s, got %s", c.Name, j, c.Want[j], got)
		}
		var before voucher.Snapshot
		if !c.Voucher.Missing {
			var err error
			before, err = s.GateSnapshot(ctx, code)
			require.NoError(t, err)
		}
		r, want := c.Requests[last], c.Want[last]
		v, err := voucher.ValidationOf(s.Validate(ctx, voucher.ValidateRequest{Code: requestCode(i, c, r), CustomerID: r.Customer,
			OrderID: conformance.OrderID(i, r.Order), OrderAmount: r.OrderAmount(), Currency: r.Currency,
			Window: c.Voucher.Occurrence(conformance.Now)}, conformance.Now))
		if err != nil {
			got := conformance.AnswerOf(voucher.Reservation{}, err)
			require.True(t, want.Accepts(got), "%s: validation: want %s, got %s", c.Name, want, got)
			continue
		}
		require.True(t, want.AcceptsValidation(v), "%s: validation: want %s, got %+v", c.Name, want, v)
		requireUnchanged(t, s, code, before, c.Name)
		got := conformance.AnswerOf(s.Reserve(ctx, voucher.ReserveRequest{Code: requestCode(i, c, r), CustomerID: r.Customer,
			OrderID: conformance.OrderID(i, r.Order), OrderAmount: r.OrderAmount(), Currency: r.Currency,
			Window: c.Voucher.Occurrence(conformance.Now)}, conformance.Now, conformance.TTL))
		require.True(t, want.Accepts(got), "%s: reservation after the validation: want %s, got %s", c.Name, want, got)
	}
}

// voucherd_replace answers every replacement case as the table says, and
// leaves the voucher as the reservations asked after it show (the store's
// cleanup then checks that counters match rows).
func TestConformanceReplace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
	for i, c := range conformance.ReplaceCases {
		n := len(conformance.Cases) + i
		cc := conformance.Case{Name: c.Name, Voucher: c.Voucher, Before: c.Before}
		setUpCase(t, s, n, cc)
		for j, r := range c.Requests {
			code := requestCode(n, cc, conformance.Request{CodeIndex: r.CodeIndex})
			got := conformance.AnswerOf(s.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: r.Customer,
				OrderID: conformance.OrderID(n, r.Order), ReplacesOrderID: conformance.OrderID(n, r.Replaces),
				OrderAmount: r.OrderAmount()}, conformance.Now, conformance.TTL))
			require.True(t, c.Want[j].Accepts(got), "%s: replacement %d: want %s, got %s", c.Name, j, c.Want[j], got)
		}
		for j, r := range c.After {
			got := conformance.AnswerOf(s.Reserve(ctx, voucher.ReserveRequest{Code: requestCode(n, cc, r), CustomerID: r.Customer,
				OrderID: conformance.OrderID(n, r.Order), OrderAmount: r.OrderAmount()}, conformance.Now, conformance.TTL))
			require.True(t, c.WantAfter[j].Accepts(got), "%s: request %d after: want %s, got %s", c.Name, j, c.WantAfter[j], got)
		}
	}
}
