package voucher

import (
	"context"
	"strings"
	"sync"
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

// campaignFakeStore holds one campaign's budget and codes and counts the
// look-ups; down makes every read unavailable.
type campaignFakeStore struct {
	Store
	budget Voucher
	codes  map[string]string

	mu                      sync.Mutex
	voucherReads, codeReads int
	down                    bool
}

func (s *campaignFakeStore) Voucher(_ context.Context, code string) (Voucher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.voucherReads++
	switch {
	case s.down:
		return Voucher{}, Unavailable(nil, "down")
	case code == s.budget.Code:
		return s.budget, nil
	}
	return Voucher{}, Reject(CodeVoucherNotFound, "", Facts{Voucher: code})
}

func (s *campaignFakeStore) VoucherDefinition(ctx context.Context, code string) (Voucher, error) {
	return s.Voucher(ctx, code)
}

func (s *campaignFakeStore) CodeCampaign(_ context.Context, code string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codeReads++
	if s.down {
		return "", Unavailable(nil, "down")
	}
	if id, ok := s.codes[code]; ok {
		return id, nil
	}
	return "", Reject(CodeVoucherNotFound, "", Facts{Voucher: code})
}

// ResolveCode reads as the store's one statement does: the voucher, else
// the campaign of a campaign code (no orderId rows are kept).
func (s *campaignFakeStore) ResolveCode(ctx context.Context, code, _ string) (Resolution, error) {
	v, err := s.Voucher(ctx, code)
	if err == nil {
		return Resolution{Voucher: v, Found: true}, nil
	}
	if !IsCode(err, CodeVoucherNotFound) {
		return Resolution{}, err
	}
	id, err := s.CodeCampaign(ctx, code)
	switch {
	case IsCode(err, CodeVoucherNotFound):
		return Resolution{}, nil
	case err != nil:
		return Resolution{}, err
	}
	v, err = s.Voucher(ctx, id)
	if err != nil {
		return Resolution{}, err
	}
	return Resolution{Voucher: v, Found: true, ByCampaign: true}, nil
}

func (s *campaignFakeStore) reads() (vouchers, codes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.voucherReads, s.codeReads
}

// A reservation reads a campaign code's campaign every time (a code used
// before must not answer faster than one never seen); the calls on a
// reservation made (routeKnown: confirm, release, extension, expiry) go by
// the campaign resolved before. While the store is down, a code resolved
// before still resolves; a code never seen is unavailable (nothing is asked
// of the gate). The budget's own id is no code to reserve.
func TestCampaignCodeResolution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now()
	st := &campaignFakeStore{
		budget: Voucher{Code: "cmp_RESOLVE00001", DiscountAmount: 1, TotalLimit: 5, PerUserLimit: 1,
			StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Hour), FlashSale: true, Campaign: true},
		codes: map[string]string{"K-1": "cmp_RESOLVE00001", "K-2": "cmp_RESOLVE00001"},
	}
	s, err := NewService(ServiceConfig{Store: st, VoucherCacheTTL: time.Hour})
	require.NoError(t, err)

	v, err := s.catalog.resolve(ctx, "K-1", now)
	require.NoError(t, err)
	require.Equal(t, "cmp_RESOLVE00001", v.Code)
	require.Equal(t, "K-1", campaignCodeOf("K-1", v))
	vouchers, codes := st.reads()
	require.Equal(t, [2]int{2, 1}, [2]int{vouchers, codes}, "the code's miss, the budget; the code's campaign")
	_, err = s.catalog.resolve(ctx, "K-1", now)
	require.NoError(t, err)
	vouchers, codes = st.reads()
	require.Equal(t, [2]int{3, 2}, [2]int{vouchers, codes}, "a reservation reads the code again")
	v, err = s.catalog.known(ctx, "K-1", now)
	require.NoError(t, err)
	require.Equal(t, "cmp_RESOLVE00001", v.Code)
	vouchers, codes = st.reads()
	require.Equal(t, [2]int{3, 2}, [2]int{vouchers, codes}, "a call on a reservation reads nothing")

	st.mu.Lock()
	st.down = true
	st.mu.Unlock()
	v, err = s.catalog.resolve(ctx, "K-1", now)
	require.NoError(t, err, "a code seen before")
	require.Equal(t, "cmp_RESOLVE00001", v.Code)
	_, err = s.catalog.resolve(ctx, "K-2", now)
	require.True(t, IsCode(err, CodeUnavailable), "a code never seen: %v", err)

	_, err = s.Reserve(ctx, ReserveRequest{Code: "cmp_RESOLVE00001", CustomerID: "1", OrderID: "o-1", OrderAmount: 10})
	require.True(t, IsCode(err, CodeVoucherNotFound), "the budget's own id: %v", err)
}

// StackOf: this fake holds no stacks.
func (*campaignFakeStore) StackOf(context.Context, string) (string, bool, error) {
	return "", false, nil
}
