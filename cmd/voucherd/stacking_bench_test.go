package main

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// BenchmarkStackVsSingles measures a 2-code stack against the same two
// codes reserved as two single reservations, one after the other, in
// every mode, on two hot codes every order presents,
// from 64 goroutines; each op is one order (a stack, or two singles).
//
//	go test -run '^$' -bench StackVsSingles -benchtime 3s ./cmd/voucherd/
func BenchmarkStackVsSingles(b *testing.B) {
	for _, m := range stackingModes {
		for _, shape := range []string{"stack2", "singles2"} {
			b.Run(m.name+"/"+shape, func(b *testing.B) {
				s := newStack(b, m.opts)
				a := s.createStackable(map[string]any{"discountAmount": 100}, 1<<30, stackable)
				c := s.createStackable(map[string]any{"discountPercent": 10}, 1<<30, stackable)
				ctx := context.Background()
				var seq, failed atomic.Int64
				b.SetParallelism(32)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						n := strconv.FormatInt(seq.Add(1), 10)
						var err error
						if shape == "stack2" {
							_, err = s.app.svc.ReserveStack(ctx, voucher.StackRequest{CustomerID: n, OrderID: "st-" + n,
								OrderAmount: 20000, Codes: []string{a, c}})
						} else {
							_, err = s.app.svc.Reserve(ctx, voucher.ReserveRequest{Code: a, CustomerID: n, OrderID: "a-" + n, OrderAmount: 20000})
							if err == nil {
								_, err = s.app.svc.Reserve(ctx, voucher.ReserveRequest{Code: c, CustomerID: n, OrderID: "c-" + n, OrderAmount: 19900})
							}
						}
						if err != nil {
							failed.Add(1)
						}
					}
				})
				b.StopTimer()
				if f := failed.Load(); f > 0 {
					b.Fatalf("%d of %d orders failed", f, seq.Load())
				}
				b.ReportMetric(float64(seq.Load())/b.Elapsed().Seconds(), "orders/s")
			})
		}
	}
}

// BenchmarkStackPartialWindow measures, in both flash modes, stacks [A,B]
// refused by B (sold out, its hold another order's) after A's use was
// taken: A is held by the refused stack from its take to its give-back,
// inside the request, so the time of one op bounds the window in which a
// competing buyer of A may be refused for a stack that ends refused. The
// p50/p99 of that time are reported (in Kafka mode it also includes the
// store's reads before the takes and the claims of the stack's orderIds,
// so it is a looser bound there).
//
//	go test -run '^$' -bench StackPartialWindow -benchtime 2000x ./cmd/voucherd/
func BenchmarkStackPartialWindow(b *testing.B) {
	for _, m := range stackingModes[1:] {
		b.Run(m.name, func(b *testing.B) { benchStackPartialWindow(b, m.opts) })
	}
}

// benchStackPartialWindow is BenchmarkStackPartialWindow in the flash
// mode of opts.
func benchStackPartialWindow(b *testing.B, opts stackOptions) {
	s := newStack(b, opts)
	a := s.createStackableAs("A", map[string]any{"discountAmount": 100}, 1<<30, stackable)
	c := s.createStackableAs("B", map[string]any{"discountAmount": 100}, 1, stackable)
	ctx := context.Background()
	if _, err := s.app.svc.Reserve(ctx, voucher.ReserveRequest{Code: c, CustomerID: "holder", OrderID: "holder", OrderAmount: 20000}); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := strconv.Itoa(i)
		start := time.Now()
		_, err := s.app.svc.ReserveStack(ctx, voucher.StackRequest{CustomerID: n, OrderID: "w-" + n, OrderAmount: 20000, Codes: []string{a, c}})
		lat = append(lat, time.Since(start))
		if !voucher.IsCode(err, voucher.CodeHeldOut) {
			b.Fatalf("want HELD_OUT, got %v", err)
		}
	}
	b.StopTimer()
	reportQuantiles(b, lat)
}

// reportQuantiles reports the p50 and p99 of lat in microseconds.
func reportQuantiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sorted := append([]time.Duration(nil), lat...)
	for i := 1; i < len(sorted); i++ {
		for j := i; j > 0 && sorted[j] < sorted[j-1]; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	b.ReportMetric(float64(sorted[len(sorted)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(sorted[len(sorted)*99/100].Microseconds()), "p99-µs")
}
