package voucher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// takeCountingGate is a fakeGate that counts the calls that could take
// or test a use (Reserve, Replace, Validate).
type takeCountingGate struct {
	fakeGate
	mu    sync.Mutex
	takes int
}

func (g *takeCountingGate) count() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.takes++
}

func (g *takeCountingGate) Reserve(ctx context.Context, code string, perUser int32, h Hold) (GateDecision, error) {
	g.count()
	return g.fakeGate.Reserve(ctx, code, perUser, h)
}

func (g *takeCountingGate) Replace(ctx context.Context, code string, h Hold, replaces string) (GateDecision, error) {
	g.count()
	return g.fakeGate.Replace(ctx, code, h, replaces)
}

func (g *takeCountingGate) Validate(context.Context, string, int32, string, string, string, TakeLimits) (GateDecision, error) {
	g.count()
	return GateDecision{Outcome: GateTaken}, nil
}

func (g *takeCountingGate) taken() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.takes
}

// A voucher's customer and currency refuse a request before the gate or the
// store is asked, in every mode, for a reservation, a replacement and a
// validation alike; the bound customer in the voucher's currency gets
// through to the gate.
func TestBoundVoucherRefusedBeforeTheGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, writes := range []FlashWrites{FlashSync, FlashKafka, ""} {
		t.Run(string(writes)+"-", func(t *testing.T) {
			t.Parallel()
			v := flashVoucher()
			v.FlashSale = writes != ""
			v.Currency, v.CustomerID, v.CustomerIDNormalization = "EUR", "anna@example.com", NormalizeEmail
			st := &fakeStore{voucher: v}
			g := &takeCountingGate{fakeGate: fakeGate{decision: GateDecision{Outcome: GateTaken, Remaining: 9}}}
			cfg := ServiceConfig{Store: st, Gate: g, FlashWrites: writes}
			if writes == FlashKafka {
				cfg.Events = &fakeLog{}
			}
			if writes == "" {
				cfg.FlashWrites = FlashSync
			}
			svc, err := NewService(cfg)
			require.NoError(t, err)
			for _, tc := range []struct {
				customer, currency string
				want               Reason
			}{
				{"bob@example.com", "EUR", ReasonCustomerMismatch},
				{"bob@example.com", "USD", ReasonCustomerMismatch},
				{"anna@example.com", "USD", ReasonCurrencyMismatch},
				{"Anna+x@Example.com", "", ReasonCurrencyMismatch},
			} {
				req := ReserveRequest{Code: v.Code, CustomerID: tc.customer, OrderID: "o-1", OrderAmount: 100, Currency: tc.currency}
				_, err := svc.Reserve(ctx, req)
				requireReason(t, err, tc.want)
				req.ReplacesOrderID = "o-0"
				_, err = svc.Reserve(ctx, req)
				requireReason(t, err, tc.want)
				val, err := svc.Validate(ctx, ValidateRequest{Code: v.Code, CustomerID: tc.customer, OrderAmount: 100, Currency: tc.currency})
				require.NoError(t, err)
				require.False(t, val.Valid)
				require.Equal(t, CodeNotEligible, val.Code)
				require.Equal(t, tc.want, val.Reason)
			}
			require.Zero(t, g.taken(), "no gate take for an ineligible request")
			require.Zero(t, st.reserves, "no store write for an ineligible request")

			// The bound customer, in any spelling its normalisation folds,
			// in the voucher's currency.
			_, err = svc.Reserve(ctx, ReserveRequest{Code: v.Code, CustomerID: "Anna+shop@example.com", OrderID: "o-2",
				OrderAmount: 100, Currency: "EUR"})
			require.NoError(t, err)
			if writes == "" {
				require.Equal(t, 1, st.reserves)
			} else {
				require.Equal(t, 1, g.taken())
			}
		})
	}
}

func requireReason(t *testing.T, err error, want Reason) {
	t.Helper()
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, CodeNotEligible, e.Code, "%v", err)
	require.Equal(t, want, e.Reason, "%v", err)
	require.NotContains(t, e.Message, "anna", "a refusal never tells whom the voucher serves")
}

// Currency and customerId are checked when a voucher is created.
func TestBoundVoucherValidate(t *testing.T) {
	t.Parallel()
	now := time.Now()
	base := Voucher{Code: "C", DiscountAmount: 1, TotalLimit: 1, PerUserLimit: 1, StartsAt: now, EndsAt: now.Add(time.Hour)}
	for _, tc := range []struct {
		currency, customer string
		ok                 bool
	}{
		{"EUR", "anna@example.com", true},
		{"", "", true},
		{"eur", "", false},
		{"EURO", "", false},
		{"E1R", "", false},
		{"", "anna example", false},
	} {
		v := base
		v.Currency, v.CustomerID = tc.currency, tc.customer
		err := v.Validate()
		if tc.ok {
			require.NoError(t, err, "%+v", tc)
		} else {
			require.True(t, IsCode(err, CodeInvalidRequest), "%+v: %v", tc, err)
		}
	}
}
