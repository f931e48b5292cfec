package pgstore_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/voucher"
)

// newCampaign creates a campaign valid over [base, base+30 days) with n
// codes of prefix and returns it with its codes.
func newCampaign(t testing.TB, s *pgstore.Store, id, prefix string, n int, totalLimit, perUserLimit int32) (voucher.Campaign, []string) {
	t.Helper()
	ctx := context.Background()
	c := voucher.Campaign{
		ID: id, Name: "campaign " + id, CodePrefix: prefix, CodeLength: voucher.DefaultCodeLength,
		Budget: voucher.Voucher{
			Code: id, DiscountAmount: 5_000, TotalLimit: totalLimit, PerUserLimit: perUserLimit,
			StartsAt: base, EndsAt: base.Add(30 * 24 * time.Hour),
		},
	}
	gen := func(k int) ([]string, error) { return voucher.GenerateCodes(prefix, voucher.DefaultCodeLength, k) }
	created, err := s.CreateCampaign(ctx, c, n, gen)
	require.NoError(t, err)
	var codes []string
	require.NoError(t, s.EachCampaignCode(ctx, id, func(c voucher.CampaignCode) error {
		codes = append(codes, c.Code)
		return nil
	}))
	require.Len(t, codes, n)
	return created, codes
}

func TestCampaignCreateAndCodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	c, codes := newCampaign(t, s, "cmp_CREATE", "WELCOME-", 2_500, 100, 1)
	require.Equal(t, int32(2_500), c.CodeCount)
	require.Equal(t, "cmp_CREATE", c.Budget.Code)
	require.Equal(t, int32(100), c.Budget.Remaining())

	seen := map[string]bool{}
	format := regexp.MustCompile(`^WELCOME-[0-9A-HJKMNP-TV-Z]{10}$`)
	for _, code := range codes {
		require.Regexp(t, format, code)
		require.False(t, seen[code], "code %s twice", code)
		seen[code] = true
	}

	// Keyset pages of 1000 list every code once, in byte order.
	var paged []string
	after := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		p, err := s.CampaignCodes(ctx, "cmp_CREATE", voucher.PageRequest{Limit: 1000, After: after})
		require.NoError(t, err)
		for _, c := range p.Codes {
			paged = append(paged, c.Code)
			require.False(t, c.Used)
		}
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	require.Equal(t, codes, paged)
	require.IsIncreasing(t, paged)

	// More codes later, none like the first ones.
	more, err := s.AddCampaignCodes(ctx, "cmp_CREATE", 500, func(k int) ([]string, error) {
		return voucher.GenerateCodes("WELCOME-", voucher.DefaultCodeLength, k)
	})
	require.NoError(t, err)
	require.Equal(t, int32(3_000), more.CodeCount)
	var all int
	require.NoError(t, s.EachCampaignCode(ctx, "cmp_CREATE", func(voucher.CampaignCode) error { all++; return nil }))
	require.Equal(t, 3_000, all)

	// A cursor of another listing, an unknown campaign.
	_, err = s.CampaignCodes(ctx, "cmp_OTHER", voucher.PageRequest{Limit: 10, After: after})
	requireCode(t, err, voucher.CodeInvalidRequest)
	_, err = s.Campaign(ctx, "cmp_NONE")
	requireCode(t, err, voucher.CodeCampaignNotFound)
	_, err = s.AddCampaignCodes(ctx, "cmp_NONE", 1, nil)
	requireCode(t, err, voucher.CodeCampaignNotFound)

	// The budget is no voucher to reserve, and a campaign code is no code
	// for a new voucher.
	_, err = s.Reserve(ctx, request("cmp_CREATE", 1, "o-budget"), now, ttl)
	requireCode(t, err, voucher.CodeVoucherNotFound)
	_, err = s.CreateVoucher(ctx, voucher.Voucher{Code: codes[0], DiscountAmount: 1, TotalLimit: 1, PerUserLimit: 1,
		StartsAt: base, EndsAt: base.Add(time.Hour)})
	requireCode(t, err, voucher.CodeVoucherExists)

	// The budget is patched as a voucher, a flash sale included, and reads
	// as a campaign's budget.
	flash, total := true, int32(150)
	_, patched, err := s.PatchVoucher(ctx, "cmp_CREATE", voucher.Patch{TotalLimit: &total})
	require.NoError(t, err)
	require.Equal(t, total, patched.TotalLimit)
	_, patched, err = s.PatchVoucher(ctx, "cmp_CREATE", voucher.Patch{FlashSale: &flash})
	require.NoError(t, err)
	require.True(t, patched.FlashSale)
	budget, err := s.Voucher(ctx, "cmp_CREATE")
	require.NoError(t, err)
	require.True(t, budget.Campaign)
	require.True(t, budget.FlashSale)
	newVoucher(t, s, "PLAIN", 1, 1)
	plain, err := s.Voucher(ctx, "PLAIN")
	require.NoError(t, err)
	require.False(t, plain.Campaign)
}

// TestCampaignCollisionsRetried hands the store a generator that repeats
// codes and names existing vouchers: the repeats are dropped and replaced.
func TestCampaignCollisionsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "TAKEN-1", 10, 1)
	calls, seq := 0, 0
	gen := func(k int) ([]string, error) {
		calls++
		out := make([]string, k)
		for i := range out {
			out[i] = fmt.Sprintf("TAKEN-%d", seq+i/2+1)
		}
		seq += (k + 1) / 2
		return out, nil
	}
	c := voucher.Campaign{ID: "cmp_COLLIDE", Name: "x", CodeLength: 8, Budget: voucher.Voucher{
		Code: "cmp_COLLIDE", DiscountAmount: 1, TotalLimit: 5, PerUserLimit: 1, StartsAt: base, EndsAt: base.Add(time.Hour)}}
	created, err := s.CreateCampaign(ctx, c, 6, gen)
	require.NoError(t, err)
	require.Equal(t, int32(6), created.CodeCount)
	var codes []string
	require.NoError(t, s.EachCampaignCode(ctx, "cmp_COLLIDE", func(c voucher.CampaignCode) error {
		codes = append(codes, c.Code)
		return nil
	}))
	require.Len(t, codes, 6)
	require.NotContains(t, codes, "TAKEN-1")
	require.Greater(t, calls, 1)
}

func TestCampaignCodeOnceAndLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	_, codes := newCampaign(t, s, "cmp_LIFE", "L-", 5, 3, 2)
	later := now.Add(time.Minute)

	res, err := s.Reserve(ctx, request(codes[0], 1, "o-1"), now, ttl)
	require.NoError(t, err)
	require.Equal(t, codes[0], res.VoucherCode)
	require.Equal(t, int64(5_000), res.DiscountAmount)

	// Replay with the same code; the same order with another code of the
	// campaign is another voucher's order.
	again, err := s.Reserve(ctx, request(codes[0], 1, "o-1"), later, ttl)
	require.NoError(t, err)
	require.True(t, again.Replay)
	require.Equal(t, res.Redemption, again.Redemption)
	_, err = s.Reserve(ctx, request(codes[1], 1, "o-1"), now, ttl)
	requireCode(t, err, voucher.CodeOrderConflict)

	// The code is used once: another order, even of another customer.
	ve := requireCode(t, func() error { _, err := s.Reserve(ctx, request(codes[0], 2, "o-2"), now, ttl); return err }(),
		voucher.CodeAlreadyUsed)
	require.Equal(t, voucher.ReasonCodeUsed, ve.Reason)
	require.Equal(t, "code "+codes[0]+" is already used by another order", ve.Message)

	// Confirm, read, and release by the code; the budget path finds nothing.
	got, err := s.Redemption(ctx, codes[0], "o-1")
	require.NoError(t, err)
	require.Equal(t, codes[0], got.VoucherCode)
	_, err = s.Confirm(ctx, "cmp_LIFE", "o-1", later)
	requireCode(t, err, voucher.CodeReservationNotFound)
	conf, err := s.Confirm(ctx, codes[0], "o-1", later)
	require.NoError(t, err)
	require.Equal(t, voucher.StatusConfirmed, conf.Status)
	rel, released, err := s.Release(ctx, codes[0], "o-1", later)
	require.NoError(t, err)
	require.True(t, released)
	require.Equal(t, codes[0], rel.VoucherCode)

	// Released, the code is free again for a new order.
	_, err = s.Reserve(ctx, request(codes[0], 2, "o-3"), later, ttl)
	require.NoError(t, err)

	// The per-customer limit counts across codes: customer 2 holds o-3,
	// takes a second code, and is refused a third.
	_, err = s.Reserve(ctx, request(codes[1], 2, "o-4"), later, ttl)
	require.NoError(t, err)
	ve = requireCode(t, func() error { _, err := s.Reserve(ctx, request(codes[2], 2, "o-5"), later, ttl); return err }(),
		voucher.CodeAlreadyUsed)
	require.Equal(t, voucher.Reason(""), ve.Reason)

	// The budget (3) across codes: o-3, o-4, then o-6 takes the last use.
	_, err = s.Reserve(ctx, request(codes[2], 3, "o-6"), later, ttl)
	require.NoError(t, err)
	_, err = s.Reserve(ctx, request(codes[3], 4, "o-7"), later, ttl)
	requireCode(t, err, voucher.CodeHeldOut)

	// Extension and expiry on a campaign code; the expired code comes free.
	ext, err := s.Extend(ctx, codes[2], "o-6", later.Add(20*time.Minute), later, time.Hour)
	require.NoError(t, err)
	require.Equal(t, later.Add(20*time.Minute), ext.ExpiresAt)
	expired, err := s.ExpireDue(ctx, later.Add(time.Hour), 100)
	require.NoError(t, err)
	require.Len(t, expired, 3)
	_, err = s.Reserve(ctx, request(codes[2], 5, "o-8"), later.Add(time.Hour), ttl)
	require.NoError(t, err)

	c, err := s.Campaign(ctx, "cmp_LIFE")
	require.NoError(t, err)
	require.Equal(t, [3]int32{1, 1, 0}, [3]int32{c.Budget.UsedCount, c.Budget.Reserved, c.Budget.Confirmed})
	page, err := s.CampaignCodes(ctx, "cmp_LIFE", voucher.PageRequest{Limit: 10})
	require.NoError(t, err)
	used := 0
	for _, pc := range page.Codes {
		if pc.Used {
			used++
			require.Equal(t, codes[2], pc.Code)
		}
	}
	require.Equal(t, 1, used)
	assertConsistent(t, s, "cmp_LIFE")
}

// TestCampaignConcurrentNoOversell races many orders over few codes of one
// campaign: the budget, the per-customer limit and once-only codes hold,
// and the counters match the rows.
func TestCampaignConcurrentNoOversell(t *testing.T) {
	t.Parallel()
	forEachCombining(t, func(t *testing.T, s *pgstore.Store) {
		ctx := context.Background()
		_, codes := newCampaign(t, s, "cmp_RACE", "R-", 40, 25, 2)
		const n = 120
		results := concurrently(n, func(i int) reserveResult {
			res, err := s.Reserve(ctx, request(codes[i%len(codes)], int64(i%30+1), fmt.Sprintf("o-%d", i)), now, ttl)
			return reserveResult{res, err}
		})
		taken := 0
		byCode := map[string]int{}
		byCustomer := map[int64]int{}
		for i, r := range results {
			if r.err != nil {
				ve := requireCode(t, r.err, voucher.CodeOf(r.err))
				require.Contains(t, []voucher.ErrorCode{voucher.CodeAlreadyUsed, voucher.CodeHeldOut}, ve.Code, "%v", r.err)
				continue
			}
			taken++
			byCode[r.res.VoucherCode]++
			byCustomer[int64(i%30+1)]++
		}
		require.Equal(t, 25, taken, "the budget is taken whole, never more")
		for code, k := range byCode {
			require.Equal(t, 1, k, "code %s", code)
		}
		for c, k := range byCustomer {
			require.LessOrEqual(t, k, 2, "customer %d", c)
		}
		require.Equal(t, int32(25), readCounts(t, s, "cmp_RACE").UsedCount)
		assertConsistent(t, s, "cmp_RACE")
	})
}
