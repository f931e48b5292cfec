package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/conformance"
	"github.com/voucherd/voucherd/internal/voucher"
)

// TestConformanceStack runs conformance.StackCases against ReserveStack:
// the answer, and each voucher's held uses after it (the stack's one more
// on each code, or none on any).
func TestConformanceStack(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	for i, c := range conformance.StackCases {
		t.Run(c.Name, func(t *testing.T) {
			codes := map[string]string{}
			for name, sv := range c.Vouchers {
				code := fmt.Sprintf("STK%d%s", i, name)
				codes[name] = code
				v := sv.Spec.Voucher(code)
				v.Stacking = sv.Stacking
				_, err := s.CreateVoucher(ctx, v)
				require.NoError(t, err)
				for k := 0; k < sv.Held; k++ {
					_, err := s.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: fmt.Sprintf("other-%d", k),
						OrderID: fmt.Sprintf("stk-held-%d-%s-%d", i, name, k), OrderAmount: conformance.Amount}, conformance.Now, conformance.TTL)
					require.NoError(t, err)
				}
			}
			req := voucher.StackRequest{CustomerID: "stacker", OrderID: fmt.Sprintf("stk-%d", i), OrderAmount: c.Amount}
			for _, name := range c.Codes {
				req.Codes = append(req.Codes, codes[name])
				req.Customers = append(req.Customers, req.CustomerID)
			}
			st, err := s.ReserveStack(ctx, req, conformance.Now, conformance.TTL)
			if c.Want.Code == "" {
				require.NoError(t, err)
				require.Len(t, st.Items, len(c.Codes))
				for k, it := range st.Items {
					require.Equal(t, req.Codes[k], it.Code)
					require.Equal(t, c.Want.Discounts[k], it.Redemption.DiscountAmount, "item %d", k)
				}
			} else {
				require.True(t, voucher.IsCode(err, c.Want.Code), "want %s, got %v", c.Want.Code, err)
				var e *voucher.Error
				require.ErrorAs(t, err, &e)
				require.Equal(t, c.Want.Reason, e.Reason)
				require.Equal(t, codes[c.Want.Failed], e.FailedCode)
			}
			for name, sv := range c.Vouchers {
				v, err := s.Voucher(ctx, codes[name])
				require.NoError(t, err)
				want := sv.Held
				if c.Want.Code == "" {
					want++
				}
				require.EqualValues(t, want, v.Reserved, "%s: all or none", name)
			}
		})
	}
}
