package pgstore_test

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// BenchmarkReserveHotVoucher measures reservations that all take a use of
// one voucher, the hot row of a flash sale in standard mode: many clients,
// one code, every request a new customer and orderId; with write combining
// off and on, at 8 and 64 concurrent clients, each with a connection of its
// own. It reports throughput, latency percentiles and statements per
// reservation (below 1 when reservations share a batch).
//
// The shared test server runs with fsync and synchronous_commit off, so
// commits are far cheaper than on a production server and the numbers show
// the row-lock and round-trip cost, not the disk's. For durable numbers point
// the tests at a server with fsync and synchronous_commit on:
//
//	VOUCHERD_TEST_DATABASE_URL=postgres://... go test -run '^$' -bench HotVoucher ./internal/pgstore/
func BenchmarkReserveHotVoucher(b *testing.B) {
	for _, c := range combinings {
		for _, clients := range []int{8, 64} {
			b.Run(fmt.Sprintf("%s/clients=%d", c.name, clients), func(b *testing.B) {
				benchmarkHot(b, c.cfg, clients)
			})
		}
	}
}

func benchmarkHot(b *testing.B, combining pgstore.CombinerConfig, clients int) {
	benchmarkHotAt(b, testenv.Postgres(b).URL, combining, clients)
}

// benchmarkHotAt is benchmarkHot against the database at url. When the
// server runs on this machine it also reports the server's CPU per
// reservation (serverCPU).
func benchmarkHotAt(b *testing.B, url string, combining pgstore.CombinerConfig, clients int) {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Config{URL: url, MaxConns: int32(clients), MinConns: int32(clients), Combining: combining})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	newVoucher(b, s, "HOT", math.MaxInt32, 1)
	var seq atomic.Int64
	var failed atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((clients + procs - 1) / procs)
	before := s.Queries()
	flushedBefore := s.CombinerStats()
	cpu := serverCPU(b, s)
	cpuBefore := cpu()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		defer func() {
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		}()
		for pb.Next() {
			n := seq.Add(1)
			start := time.Now()
			if _, err := s.Reserve(ctx, request("HOT", n, fmt.Sprintf("bench-%d", n)), now, ttl); err != nil {
				failed.Add(1)
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(start))
		}
	})
	b.StopTimer()
	statements := s.Queries() - before
	flushed := s.CombinerStats()
	flushes := flushed.Flushes - flushedBefore.Flushes
	if used := cpu() - cpuBefore; used > 0 {
		b.ReportMetric(float64(used.Microseconds())/float64(b.N), "pg-µs/op")
	}
	if failed.Load() == 0 {
		c := readCounts(b, s, "HOT")
		if int64(c.UsedCount) != seq.Load() {
			b.Fatalf("used_count %d after %d reservations", c.UsedCount, seq.Load())
		}
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		if len(latencies) == 0 {
			return 0
		}
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reservations/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(statements)/float64(b.N), "stmts/op")
	if flushes > 0 {
		b.ReportMetric(float64(flushed.Reservations-flushedBefore.Reservations)/float64(flushes), "takes/flush")
		b.ReportMetric(float64((flushed.FlushTime-flushedBefore.FlushTime).Microseconds())/1000/float64(flushes), "ms/flush")
	}
}

// BenchmarkReserveSoldOut measures the rejection of a voucher with no free
// use: a read and no write. Its one use is CONFIRMED (OUT_OF_STOCK) or
// RESERVED (HELD_OUT, which also looks up the earliest hold).
func BenchmarkReserveSoldOut(b *testing.B) {
	for _, tc := range []struct {
		name    string
		confirm bool
		want    voucher.ErrorCode
	}{
		{"confirmed", true, voucher.CodeOutOfStock},
		{"reserved", false, voucher.CodeHeldOut},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			s := newStore(b)
			newVoucher(b, s, "GONE", 1, 1)
			if _, err := s.Reserve(ctx, request("GONE", 1, "first"), now, ttl); err != nil {
				b.Fatal(err)
			}
			if tc.confirm {
				if _, err := s.Confirm(ctx, "GONE", "first", now); err != nil {
					b.Fatal(err)
				}
			}
			var seq atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1) + 1
					_, err := s.Reserve(ctx, request("GONE", n, fmt.Sprintf("bench-%d", n)), now, ttl)
					if !voucher.IsCode(err, tc.want) {
						b.Errorf("want %s, got %v", tc.want, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
		})
	}
}
