package voucher

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLowStockThreshold(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		total int32
		share float64
		want  int64
	}{
		{100, 0.1, 10},
		{30, 0.1, 3}, // 0.1 × 30 is 3.0000000000000004 in floating point
		{95, 0.1, 10},
		{10, 0.1, 1},
		{5, 0.1, 1},
		{1, 0.1, 1},
		{1000, 0.25, 250},
		{7, 1, 7},
		{100, 0, 0},
		{100, -1, 0},
	} {
		require.Equal(t, tc.want, LowStockThreshold(tc.total, tc.share), "total %d, share %v", tc.total, tc.share)
	}
}

func TestCrossings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		remaining int64
		total     int32
		want      []ThresholdType
	}{
		{"above", 50, 100, nil},
		{"at the threshold", 10, 100, nil},
		{"just below", 9, 100, []ThresholdType{ThresholdLowStock}},
		{"further below", 8, 100, nil},
		{"last use", 0, 100, []ThresholdType{ThresholdSoldOut}},
		{"small voucher: both at once", 0, 10, []ThresholdType{ThresholdLowStock, ThresholdSoldOut}},
		{"one use", 0, 1, []ThresholdType{ThresholdLowStock, ThresholdSoldOut}},
	} {
		require.Equal(t, tc.want, Crossings(Stock{Remaining: tc.remaining, TotalLimit: tc.total}, 0.1), tc.name)
	}
	// Every take of a sale, one after the other: each threshold crossed once.
	seen := map[ThresholdType]int{}
	for rem := int64(99); rem >= 0; rem-- {
		for _, typ := range Crossings(Stock{Remaining: rem, TotalLimit: 100}, 0.1) {
			seen[typ]++
		}
	}
	require.Equal(t, map[ThresholdType]int{ThresholdLowStock: 1, ThresholdSoldOut: 1}, seen, "a sale of 100")
}

func TestStockError(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ttl := 15 * time.Minute
	for _, tc := range []struct {
		name  string
		sum   HoldSummary
		code  ErrorCode
		retry time.Duration
	}{
		{"all confirmed", HoldSummary{TotalLimit: 5, UsedCount: 5}, CodeOutOfStock, 0},
		{"a reserved hold", HoldSummary{TotalLimit: 5, UsedCount: 5, EarliestExpiry: now.Add(90 * time.Second)}, CodeHeldOut, 90 * time.Second},
		{"a hold past its expiry", HoldSummary{TotalLimit: 5, UsedCount: 5, EarliestExpiry: now.Add(-time.Second)}, CodeHeldOut, time.Second},
		{"holds on their way to the store", HoldSummary{TotalLimit: 5, UsedCount: 3}, CodeHeldOut, ttl},
	} {
		err := stockError("C", tc.sum, now, ttl)
		require.Equal(t, tc.code, err.Code, tc.name)
		require.Equal(t, tc.retry, err.RetryAfter, tc.name)
	}
	require.Equal(t, "HELD_OUT: voucher FLASH has no free uses; some are held by reservations that may still be released",
		HeldOut("FLASH", time.Minute).Error())
}
