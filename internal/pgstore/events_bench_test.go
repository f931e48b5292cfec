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

// BenchmarkReserveEvents measures what the outbox costs the hot path: each
// op reserves a use of one voucher and confirms it, with write combining,
// at 32 clients, with no webhook (events=none: confirmed events are still
// written, reserved ones not), with a webhook of reservation.confirmed and
// reservation.released (events=confirmed), and with reservation.reserved
// on (events=reserved). It reports reservations/s, the reserve latency
// percentiles and the outbox's growth in bytes per 1,000 uses (table and
// indexes, before any pruning). Compare the three side by side:
//
//	go test -run '^$' -bench ReserveEvents -benchtime 20000x ./internal/pgstore/
func BenchmarkReserveEvents(b *testing.B) {
	for _, mode := range []string{"none", "confirmed", "reserved"} {
		b.Run("events="+mode, func(b *testing.B) { benchmarkEvents(b, mode, 32) })
	}
}

func benchmarkEvents(b *testing.B, mode string, clients int) {
	ctx := context.Background()
	pg := testenv.Postgres(b)
	s, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: int32(clients), MinConns: int32(clients)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	newVoucher(b, s, "EVHOT", math.MaxInt32, 1)
	switch mode {
	case "confirmed":
		_, err = s.CreateWebhook(ctx, voucher.Webhook{ID: "wh_b", URL: "https://example.com/", Secret: "s",
			Events: []voucher.EventType{voucher.EventConfirmed, voucher.EventReleased}})
	case "reserved":
		_, err = s.CreateWebhook(ctx, voucher.Webhook{ID: "wh_b", URL: "https://example.com/", Secret: "s",
			Events: []voucher.EventType{voucher.EventReserved, voucher.EventConfirmed, voucher.EventReleased}})
	}
	if err != nil {
		b.Fatal(err)
	}
	size := func() int64 {
		var n int64
		if err := s.Pool().QueryRow(ctx, "SELECT pg_total_relation_size('voucherd_event')").Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	sizeBefore := size()
	var seq atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((clients + procs - 1) / procs)
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
			order := fmt.Sprintf("ev-%d", n)
			start := time.Now()
			if _, err := s.Reserve(ctx, request("EVHOT", n, order), now, ttl); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(start))
			if _, err := s.Confirm(ctx, "EVHOT", order, now); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		if len(latencies) == 0 {
			return 0
		}
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reservations/s")
	b.ReportMetric(pct(0.50), "reserve-p50-ms")
	b.ReportMetric(pct(0.99), "reserve-p99-ms")
	b.ReportMetric(float64(size()-sizeBefore)/float64(b.N)*1000, "outbox-bytes/1000-uses")
}
