package conformance

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

func TestCasesAreWellFormed(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, c := range Cases {
		require.False(t, names[c.Name], "case names are distinct: %s", c.Name)
		names[c.Name] = true
		require.NotEmpty(t, c.Requests, c.Name)
		require.Len(t, c.Want, len(c.Requests), "%s: one answer per request", c.Name)
		for impl, why := range c.Skip {
			require.NotEmpty(t, why, "%s: %s is skipped without a reason", c.Name, impl)
			require.NotContains(t, []Impl{Reserve, ReserveBatch}, impl, "%s: the store decides every case", c.Name)
		}
	}
}

// Voucher.CheckEligible, which the service runs before it asks the gate,
// refuses exactly the requests the rule refuses as NOT_ELIGIBLE, with the
// same reason.
func TestCasesEligibility(t *testing.T) {
	t.Parallel()
	for i, c := range Cases {
		if c.Skips(Eligibility) != "" {
			continue
		}
		v := c.Voucher.Voucher(Code(i))
		for j, r := range c.Requests {
			var want voucher.Reason
			if c.Want[j].Code == voucher.CodeNotEligible {
				want = c.Want[j].Reason
			}
			require.Equal(t, want, v.Eligibility(r.Purchase(), Now), "%s: request %d", c.Name, j)
			err := v.CheckEligible(r.Purchase(), Now)
			if want == "" {
				require.NoError(t, err, "%s: request %d", c.Name, j)
				continue
			}
			require.Equal(t, c.Want[j], AnswerOf(voucher.Reservation{}, err), "%s: request %d", c.Name, j)
		}
	}
}

// Voucher.Discount, which the flash paths use to compute the discount they
// hold, answers every use taken as the store's functions do.
func TestCasesDiscount(t *testing.T) {
	t.Parallel()
	for i, c := range Cases {
		if c.Voucher.Missing {
			continue
		}
		d := c.Voucher.Voucher(Code(i)).Discount()
		for j, r := range c.Requests {
			w := c.Want[j]
			switch {
			case w.Code != "" || w.Replay || w.Discount == nil:
			case c.Voucher.Budget.Clip:
				// What is left of the budget (Budget.Fit), at most the
				// discount.
				require.LessOrEqual(t, *w.Discount, d.Compute(r.OrderAmount()), "%s: request %d", c.Name, j)
			default:
				require.Equal(t, *w.Discount, d.Compute(r.OrderAmount()), "%s: request %d", c.Name, j)
			}
		}
	}
}

func TestReplaceCasesAreWellFormed(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, c := range ReplaceCases {
		require.False(t, names[c.Name], "case names are distinct: %s", c.Name)
		names[c.Name] = true
		require.NotEmpty(t, c.Requests, c.Name)
		require.Len(t, c.Want, len(c.Requests), "%s: one answer per replacement", c.Name)
		require.Len(t, c.WantAfter, len(c.After), "%s: one answer per request after", c.Name)
		for impl, why := range c.Skip {
			require.NotEmpty(t, why, "%s: %s is skipped without a reason", c.Name, impl)
			require.NotEqual(t, Replace, impl, "%s: the store decides every case", c.Name)
		}
	}
}
