package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// BenchmarkCampaignCodes100k creates campaigns of 100,000 codes each: the
// codes drawn from crypto/rand, copied (COPY) into a staging table 10,000 at
// a time and moved into campaign_code, in one transaction. Run with
// -benchtime=3x; codes/s is the figure.
func BenchmarkCampaignCodes100k(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	const n = 100_000
	gen := func(k int) ([]string, error) { return voucher.GenerateCodes("BENCH-", voucher.DefaultCodeLength, k) }
	i := 0
	start := time.Now()
	for b.Loop() {
		i++
		id := fmt.Sprintf("cmp_BENCH%d", i)
		c, err := s.CreateCampaign(ctx, voucher.Campaign{ID: id, Name: id, CodePrefix: "BENCH-", CodeLength: voucher.DefaultCodeLength,
			Budget: voucher.Voucher{Code: id, DiscountAmount: 1, TotalLimit: n, PerUserLimit: 1, StartsAt: base, EndsAt: base.Add(time.Hour)}},
			n, gen)
		require.NoError(b, err)
		require.Equal(b, int32(n), c.CodeCount)
	}
	b.ReportMetric(float64(n*i)/time.Since(start).Seconds(), "codes/s")
}

// BenchmarkCampaignCodeLookup measures what routing a campaign code costs
// on the hot path, for random codes of a campaign of 100,000 codes, both
// ways side by side: the voucher look-up that misses, then the campaign
// code's primary-key look-up (voucher.Service.resolve, when the store
// cannot resolve in one statement, and for confirmations of a code this
// process has not seen), and the one statement of ResolveCode that
// reservations and validations use.
func BenchmarkCampaignCodeLookup(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	_, codes := newCampaign(b, s, "cmp_LOOKUP", "LK-", 100_000, 10, 1)
	b.Run("voucher-then-campaign", func(b *testing.B) {
		i := 0
		for b.Loop() {
			code := codes[(i*7919)%len(codes)]
			i++
			if _, err := s.Voucher(ctx, code); !voucher.IsCode(err, voucher.CodeVoucherNotFound) {
				b.Fatalf("voucher look-up of %s: %v", code, err)
			}
			if id, err := s.CodeCampaign(ctx, code); err != nil || id != "cmp_LOOKUP" {
				b.Fatalf("campaign of %s: %s %v", code, id, err)
			}
		}
	})
	b.Run("resolve", func(b *testing.B) {
		i := 0
		for b.Loop() {
			code := codes[(i*7919)%len(codes)]
			i++
			res, err := s.ResolveCode(ctx, code, "")
			if err != nil || !res.ByCampaign || res.Voucher.Code != "cmp_LOOKUP" {
				b.Fatalf("resolution of %s: %+v %v", code, res, err)
			}
		}
	})
}
