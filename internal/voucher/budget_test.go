package voucher

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The budget rule, as voucherd_limit_fit and lib/budget.lua apply it.
func TestBudgetFit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		b              Budget
		discount, left int64
		want           int64
		ok             bool
	}{
		{"no budget", Budget{}, 5, -3, 5, true},
		{"fits", Budget{Amount: 10}, 5, 5, 5, true},
		{"does not fit", Budget{Amount: 10}, 6, 5, 0, false},
		{"clipped to what is left", Budget{Amount: 10, Clip: true}, 6, 5, 5, true},
		{"exhausted refuses 0", Budget{Amount: 10}, 0, 0, 0, false},
		{"exhausted refuses a clip", Budget{Amount: 10, Clip: true}, 6, 0, 0, false},
		{"0 fits while something is left", Budget{Amount: 10}, 0, 1, 0, true},
	} {
		got, ok := tc.b.Fit(tc.discount, tc.left)
		require.Equal(t, tc.ok, ok, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}
	require.Equal(t, int64(3), Budget{Amount: 10, Held: 7}.Remaining())
	require.Zero(t, Budget{Amount: 10, Held: 12}.Remaining())
	require.Error(t, Budget{Clip: true}.Validate())
	require.Error(t, Budget{Amount: -1}.Validate())
	require.NoError(t, Budget{Amount: 1}.Validate())
}

// Every limit refusal names its limit.
func TestLimitOf(t *testing.T) {
	t.Parallel()
	require.Equal(t, LimitTotal, Reject(CodeOutOfStock, "", Facts{}).Limit)
	require.Equal(t, LimitTotal, HeldOut("A", 0).Limit)
	require.Equal(t, LimitPerUser, Reject(CodeAlreadyUsed, "", Facts{}).Limit)
	require.Equal(t, Limit(""), Reject(CodeAlreadyUsed, ReasonCodeUsed, Facts{}).Limit)
	e := BudgetExceeded("A", 7, 0)
	require.Equal(t, LimitBudget, e.Limit)
	require.Equal(t, int64(7), e.BudgetRemaining)
	require.Zero(t, e.RetryAfter)
	require.Equal(t, Limit(""), Reject(CodeNotEligible, ReasonExpired, Facts{}).Limit)
}
