package main

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/voucherd/voucherd/internal/voucher"
)

// BenchmarkServiceReserveHot measures the whole reserve path of each write
// mode (service, Redis gate, PostgreSQL or Kafka) on one hot voucher with
// more uses than requests, from 64 goroutines, every request a new customer
// and orderId: every call takes a use. The shared test PostgreSQL runs with
// fsync off, so this is the path's own cost, not the disk's; `voucherd
// bench` measures the same over HTTP with durable commits (BENCHMARKS.md).
//
//	go test -run '^$' -bench ServiceReserveHot -benchtime 3s ./cmd/voucherd/
func BenchmarkServiceReserveHot(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			s := newStack(b, m.opts)
			code := s.createVoucher(voucherSpec{TotalLimit: 1 << 30})
			ctx := context.Background()
			var seq, failed atomic.Int64
			b.SetParallelism(32) // 64 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					_, err := s.app.svc.Reserve(ctx, voucher.ReserveRequest{
						Code: code, CustomerID: strconv.FormatInt(n, 10), OrderID: "b-" + strconv.FormatInt(n, 10), OrderAmount: 100,
					})
					if err != nil {
						failed.Add(1)
					}
				}
			})
			b.StopTimer()
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d of %d reservations failed", f, seq.Load())
			}
			b.ReportMetric(float64(seq.Load())/b.Elapsed().Seconds(), "reservations/s")
		})
	}
}
