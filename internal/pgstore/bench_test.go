package pgstore_test

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"

	"github.com/voucherd/voucherd/internal/voucher"
)

// BenchmarkReserveHotVoucher measures reservations that all take a use of
// one voucher, the hot row of a flash sale in standard mode: many goroutines,
// one code, every request a new customer and orderId. Note that the shared
// test server runs with fsync and synchronous_commit off, so commits are far
// cheaper than on a production server; the number shows the row-lock and
// round-trip cost, not the disk's.
func BenchmarkReserveHotVoucher(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	newVoucher(b, s, "HOT", math.MaxInt32, 1)
	var seq atomic.Int64
	var failed atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			if _, err := s.Reserve(ctx, request("HOT", n, fmt.Sprintf("bench-%d", n)), now, ttl); err != nil {
				failed.Add(1)
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if failed.Load() == 0 {
		c := readCounts(b, s, "HOT")
		if int64(c.UsedCount) != seq.Load() {
			b.Fatalf("used_count %d after %d reservations", c.UsedCount, seq.Load())
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reservations/s")
}

// BenchmarkReserveSoldOut measures the rejection of a sold-out voucher: a
// read and no write.
func BenchmarkReserveSoldOut(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	newVoucher(b, s, "GONE", 1, 1)
	if _, err := s.Reserve(ctx, request("GONE", 1, "first"), now, ttl); err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1) + 1
			_, err := s.Reserve(ctx, request("GONE", n, fmt.Sprintf("bench-%d", n)), now, ttl)
			if !voucher.IsCode(err, voucher.CodeOutOfStock) {
				b.Errorf("want OUT_OF_STOCK, got %v", err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
}
