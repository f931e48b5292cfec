package voucher

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGenerateCodes(t *testing.T) {
	t.Parallel()
	codes, err := GenerateCodes("P-", 10, 20_000)
	require.NoError(t, err)
	seen := map[string]bool{}
	counts := map[rune]int{}
	for _, c := range codes {
		require.Len(t, c, 12)
		require.True(t, strings.HasPrefix(c, "P-"))
		require.True(t, ValidCode(c))
		for _, r := range c[2:] {
			require.Contains(t, CodeAlphabet, string(r))
			counts[r]++
		}
		seen[c] = true
	}
	// 50 random bits each: 20,000 codes repeat with probability ~2e-7.
	require.Len(t, seen, len(codes))
	// Every character of the alphabet, none of I L O U, about as often as
	// the others (200,000 draws: 6,250 expected each).
	require.Len(t, counts, 32)
	for r, n := range counts {
		require.InDelta(t, 6250, n, 600, "character %c", r)
	}
	require.NotContains(t, CodeAlphabet, "I")
	require.NotContains(t, CodeAlphabet, "L")
	require.NotContains(t, CodeAlphabet, "O")
	require.NotContains(t, CodeAlphabet, "U")
}

func TestNewCampaignValidate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	good := func() NewCampaign {
		return NewCampaign{Name: "welcome", CodePrefix: "W-", CodeCount: 10, Budget: Voucher{
			DiscountAmount: 100, TotalLimit: 10, PerUserLimit: 1, StartsAt: now, EndsAt: now.Add(time.Hour)}}
	}
	n := good()
	require.NoError(t, n.Validate(now))
	require.Equal(t, DefaultCodeLength, n.CodeLength)
	for name, edit := range map[string]func(*NewCampaign){
		"no name":         func(n *NewCampaign) { n.Name = "" },
		"control in name": func(n *NewCampaign) { n.Name = "a\x00b" },
		"long prefix":     func(n *NewCampaign) { n.CodePrefix = strings.Repeat("A", MaxCodePrefix+1) },
		"bad prefix":      func(n *NewCampaign) { n.CodePrefix = "A B" },
		"short code":      func(n *NewCampaign) { n.CodeLength = MinCodeLength - 1 },
		"long code":       func(n *NewCampaign) { n.CodeLength = MaxCodeLength + 1 },
		"too many codes":  func(n *NewCampaign) { n.CodeCount = MaxCodesPerRequest + 1 },
		"no budget":       func(n *NewCampaign) { n.Budget.TotalLimit = 0 },
		"ended":           func(n *NewCampaign) { n.Budget.EndsAt = now.Add(-time.Minute) },
	} {
		n := good()
		edit(&n)
		err := n.Validate(now)
		require.True(t, IsCode(err, CodeInvalidRequest), "%s: %v", name, err)
	}
}
