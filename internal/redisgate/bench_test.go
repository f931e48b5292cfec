package redisgate

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// BenchmarkGateReserveHot measures reservations on one hot code from many
// goroutines: taking uses (plain, counted against an occurrence of the
// voucher's windows, and combined: Config.CombineTakes), and the rush after
// sell-out with the sold-out cache off (every call runs the script) and on
// (calls stay in process). redis-scripts/op counts the script calls per
// reservation.
func BenchmarkGateReserveHot(b *testing.B) {
	cases := []struct {
		name       string
		total      int32
		soldOutTTL time.Duration
		window     bool
		combine    bool
	}{
		{"taking", 1 << 30, -1, false, false},
		{"taking/window", 1 << 30, -1, true, false},
		{"taking/combined", 1 << 30, -1, false, true},
		{"soldout/cache=off", 1, -1, false, false},
		{"soldout/cache=on", 1, time.Second, false, false},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			// A long timeout: with the cache on, 64 goroutines spinning on
			// cache hits starve the few that go to Redis when the entry
			// expires (2 cores), which a real server, blocked on network
			// reads most of the time, does not do.
			addr := testenv.Redis(b).Addr
			g := newGate(b, Config{SoldOutTTL: tc.soldOutTTL, Timeout: 5 * time.Second, CombineTakes: tc.combine}, addr)
			cc := newCommandCounter(b, addr)
			v := testVoucher("HOT", tc.total, 1)
			loadEmpty(b, g, v)
			if tc.total == 1 {
				if _, err := g.Reserve(ctx, v.Code, 1, testHold("first", 1)); err != nil {
					b.Fatal(err)
				}
			}
			var seq atomic.Int64
			// Many callers per core, as an HTTP server has, so that
			// auto-pipelining has concurrent calls to batch.
			b.SetParallelism(32)
			b.ReportAllocs()
			cpu0 := redisCPU(b, addr)
			calls0 := cc.calls(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := seq.Add(1) + 1
					h := voucher.Hold{OrderID: "o-" + strconv.FormatInt(i, 10), CustomerID: strconv.FormatInt(i, 10)}
					if tc.window {
						h.Window, h.WindowLimit = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC), 1<<30
					}
					if _, err := g.Reserve(ctx, v.Code, 1, h); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			// Redis's own CPU time per call: one key slot lives on one
			// shard's single thread, so 1e6 / this is the ceiling of one
			// hot voucher on one shard.
			b.ReportMetric((redisCPU(b, addr)-cpu0)*1e6/float64(b.N), "redis-µs/op")
			calls := cc.calls(b)
			b.ReportMetric(float64(calls["evalsha"]+calls["eval"]-calls0["evalsha"]-calls0["eval"])/float64(b.N), "redis-scripts/op")
			_ = g.Forget(ctx, v.Code)
		})
	}
}

// redisCPU returns the CPU seconds (user + system) the Redis server at addr
// has used, from INFO CPU.
func redisCPU(tb testing.TB, addr string) float64 {
	tb.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	require.NoError(tb, err)
	defer c.Close()
	info, err := c.Do(context.Background(), c.B().Info().Section("cpu").Build()).ToString()
	require.NoError(tb, err)
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(tb, err)
			total += f
		}
	}
	return total
}

// BenchmarkSoldOutCopy measures one copy of a sold-out voucher's orders
// (soldout.lua and decoding into the map), which the gate makes at most once
// per voucher per SoldOutTTL and process.
func BenchmarkSoldOutCopy(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			ctx := context.Background()
			g := newGate(b, Config{SoldOutTTL: time.Hour, SoldOutMaxOrders: n})
			v := testVoucher("COPY", int32(n), 1)
			snap := voucher.Snapshot{Voucher: v, Customers: map[string]int32{}}
			for i := range n {
				h := testHold(orderID(i), int64(i+1))
				snap.Orders = append(snap.Orders, voucher.Redemption{
					OrderID: h.OrderID, CustomerID: h.CustomerID, OrderAmount: h.OrderAmount,
					DiscountAmount: h.DiscountAmount, Status: voucher.StatusReserved,
					CreatedAt: h.ReservedAt, ExpiresAt: h.ExpiresAt,
				})
				snap.Customers[h.CustomerID] = 1
				snap.Held++
			}
			if _, err := g.Load(ctx, snap); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				g.soldOut.clear(v.Code)
				epoch := g.soldOut.begin(v.Code)
				g.fetchSoldOut(v.Code, epoch, false)
				if e := g.soldOut.get(v.Code); e == nil || len(e.orders) != n {
					b.Fatal("no copy")
				}
			}
			b.StopTimer()
			_ = g.Forget(ctx, v.Code)
		})
	}
}

// BenchmarkGateKafkaTake measures what one Kafka-mode take asks of Redis:
// the pending hold (reserve.lua), the orderId's claim (SET NX GET) and, once
// the event is acknowledged, the commit (commit.lua, combined per voucher),
// from many goroutines on one hot voucher, with the client's connections
// and flush delay as a server would set them.
func BenchmarkGateKafkaTake(b *testing.B) {
	cases := []struct {
		name       string
		pipelines  int
		flushDelay time.Duration
	}{
		{"pipelines=default", 0, 0},
		{"pipelines=1", 1, 0},
		{"pipelines=1/flush=20us", 1, 20 * time.Microsecond},
		{"pipelines=default/flush=20us", 0, 20 * time.Microsecond},
		{"pipelines=1/flush=100us", 1, 100 * time.Microsecond},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			addr := testenv.Redis(b).Addr
			g := newGate(b, Config{SoldOutTTL: -1, Timeout: 5 * time.Second, Pipelines: tc.pipelines, FlushDelay: tc.flushDelay}, addr)
			v := testVoucher("KHOT", 1<<30, 1)
			loadEmpty(b, g, v)
			var seq atomic.Int64
			b.SetParallelism(32)
			b.ReportAllocs()
			cpu0 := redisCPU(b, addr)
			until := time.Now().Add(time.Hour)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := seq.Add(1) + 1
					h := testHold("k-"+strconv.FormatInt(i, 10), i)
					h.Pending = true
					if _, err := g.Reserve(ctx, v.Code, 1, h); err != nil {
						b.Error(err)
						return
					}
					if _, err := g.ClaimOrder(ctx, h.OrderID, v.Code, until); err != nil {
						b.Error(err)
						return
					}
					if _, err := g.Commit(ctx, v.Code, h); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric((redisCPU(b, addr)-cpu0)*1e6/float64(b.N), "redis-µs/op")
			_ = g.Forget(ctx, v.Code)
		})
	}
}
