package conformance

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// TestStackCasesSetting runs voucher.StackingRefusals on every stack case:
// a case refused by the setting names its code first, any other case is
// let through by the setting.
func TestStackCasesSetting(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, c := range StackCases {
		require.False(t, names[c.Name], "case names are distinct: %s", c.Name)
		names[c.Name] = true
		settings := map[string]voucher.Stacking{}
		for name, v := range c.Vouchers {
			if v.Stacking.Stackable {
				settings[name] = v.Stacking
			}
		}
		got := voucher.StackingRefusals(c.Codes, settings)
		bySetting := c.Want.Reason == voucher.ReasonNotStackable || c.Want.Reason == voucher.ReasonExclusiveGroup
		first := ""
		var reason voucher.Reason
		for i, r := range got {
			if r != "" {
				first, reason = c.Codes[i], r
				break
			}
		}
		if bySetting {
			require.Equal(t, c.Want.Failed, first, c.Name)
			require.Equal(t, c.Want.Reason, reason, c.Name)
		} else {
			require.Empty(t, first, c.Name)
		}
		if c.Want.Code == "" {
			require.Len(t, c.Want.Discounts, len(c.Codes), c.Name)
		} else {
			require.Contains(t, c.Codes, c.Want.Failed, c.Name)
		}
	}
}
