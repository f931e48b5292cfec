package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func baseConfig(url string) Config {
	return Config{
		BaseURL:     url,
		APIToken:    fakeAPIToken,
		AdminToken:  fakeAdminToken,
		Concurrency: 4,
		Seed:        42,
		MaxDuration: 20 * time.Second,
	}
}

func TestClosedLoopRetriesAndRepeats(t *testing.T) {
	t.Parallel()
	f, srv := newFakeServer(t)
	cfg := baseConfig(srv.URL)
	cfg.Requests = 2000
	cfg.TotalLimit = 100
	cfg.PerUserLimit = 1
	cfg.Customers = 5000
	cfg.RetryShare = 0.2
	cfg.RepeatShare = 0.1

	rep, err := Run(context.Background(), cfg)
	require.NoError(t, err)

	require.Equal(t, "closed", rep.Loop)
	require.Equal(t, int64(2000), rep.Requests)
	require.Equal(t, rep.Requests, rep.NewOrders+rep.Repeats+rep.Retries)
	require.InDelta(t, 400, rep.Retries, 80, "about 20%% retries")
	require.InDelta(t, 200, rep.Repeats, 60, "about 10%% repeat customers")
	require.Zero(t, rep.Failures)
	require.Equal(t, rep.Requests, rep.Status[http.StatusCreated]+rep.Status[http.StatusConflict])
	require.Greater(t, rep.Errors["OUT_OF_STOCK"], int64(0))

	require.Len(t, rep.Vouchers, 1)
	v, ok := f.snapshot(rep.Vouchers[0])
	require.True(t, ok)
	require.Len(t, v.orders, 100, "the fake sold out")
	require.Equal(t, int64(100), rep.Reserved, "distinct orderIds answered 201")
	require.GreaterOrEqual(t, rep.Status[http.StatusCreated], rep.Reserved, "retries of granted orders are replays")
	for id, cust := range v.orders {
		seq, ours := rep.seqOf(id)
		require.True(t, ours)
		require.Equal(t, cust, rep.cfg.customerID(rep.granted[0][seq].customer))
	}
	require.Equal(t, int64(2000), rep.Histogram.TotalCount())
	require.Greater(t, rep.Latency.Max, 0.0)
	require.LessOrEqual(t, rep.Latency.P50, rep.Latency.P99)
}

func TestRepeatCustomersHitPerUserLimit(t *testing.T) {
	t.Parallel()
	_, srv := newFakeServer(t)
	cfg := baseConfig(srv.URL)
	cfg.Requests = 500
	cfg.TotalLimit = 10000
	cfg.PerUserLimit = 2
	cfg.Customers = 50 // few customers: most requests repeat one

	rep, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, int64(50), rep.NewOrders)
	require.Equal(t, int64(450), rep.Repeats)
	require.Equal(t, int64(100), rep.Reserved, "50 customers x perUserLimit 2")
	require.Equal(t, int64(400), rep.Errors["ALREADY_USED"])
}

func TestOpenLoopSchedulesRequests(t *testing.T) {
	t.Parallel()
	_, srv := newFakeServer(t)

	t.Run("fixed count", func(t *testing.T) {
		t.Parallel()
		cfg := baseConfig(srv.URL)
		cfg.Rate = 2000
		cfg.Requests = 600
		start := time.Now()
		rep, err := Run(context.Background(), cfg)
		require.NoError(t, err)
		require.Equal(t, "open", rep.Loop)
		require.Equal(t, int64(600), rep.Requests)
		// The last request is scheduled at 599/2000 s: the run cannot be
		// faster than its schedule.
		require.GreaterOrEqual(t, time.Since(start), 299*time.Millisecond)
		require.LessOrEqual(t, rep.Rate, 2000*1.05)
	})
	t.Run("duration", func(t *testing.T) {
		t.Parallel()
		cfg := baseConfig(srv.URL)
		cfg.Rate = 1000
		cfg.Duration = 300 * time.Millisecond
		rep, err := Run(context.Background(), cfg)
		require.NoError(t, err)
		require.Equal(t, int64(300), rep.Requests, "one request per millisecond scheduled before the end")
		require.False(t, rep.StoppedByMaxDuration)
	})
}

func TestWarmupLeavesTheFirstRequestsOutOfLatency(t *testing.T) {
	t.Parallel()
	const slow = 300 * time.Millisecond
	for _, tc := range []struct {
		name   string
		warmup time.Duration
	}{{"without warm-up", 0}, {"with warm-up", 100 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, srv := newFakeServer(t)
			f.slowFirst, f.slowFor = 20, slow // a cold server: its first answers are slow
			cfg := baseConfig(srv.URL)
			cfg.Rate = 1000
			cfg.Requests = 400
			cfg.Concurrency = 64 // enough workers that the slow answers delay no later request
			cfg.Warmup = tc.warmup
			rep, err := Run(context.Background(), cfg)
			require.NoError(t, err)
			require.Equal(t, int64(400), rep.Requests, "warm-up requests are sent and counted")
			require.Equal(t, int64(400), rep.Histogram.TotalCount()+rep.WarmupRequests)
			if tc.warmup == 0 {
				require.Zero(t, rep.WarmupRequests)
				require.GreaterOrEqual(t, rep.Latency.Max, float64(slow.Milliseconds()))
				return
			}
			// Requests 0-99 are scheduled in the first 100ms.
			require.Equal(t, int64(100), rep.WarmupRequests)
			if !raceEnabled {
				// The race detector slows the fake server's answers past any
				// latency bound; the first pass of make test checks it.
				require.Less(t, rep.Latency.Max, float64(slow.Milliseconds()), "the cold answers are left out")
			}
			var table bytes.Buffer
			require.NoError(t, rep.WriteTable(&table))
			require.Contains(t, table.String(), "100 requests of the first 0.1s left out of the latency figures")
		})
	}
}

func TestNoopTarget(t *testing.T) {
	t.Parallel()
	f, srv := newFakeServer(t)
	cfg := baseConfig(srv.URL)
	cfg.Target = RouteNoop
	cfg.Requests = 300
	rep, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, map[int]int64{http.StatusOK: 300}, rep.Status)
	require.Empty(t, rep.Vouchers)
	require.Zero(t, rep.Reserved)
	require.Zero(t, f.reserves.Load())
}

func TestTrafficSpreadAcrossVouchers(t *testing.T) {
	t.Parallel()
	f, srv := newFakeServer(t)
	cfg := baseConfig(srv.URL)
	cfg.Vouchers = 4
	cfg.TotalLimit = 50
	cfg.Requests = 800
	rep, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, rep.Vouchers, 4)
	require.Equal(t, int64(200), rep.Reserved, "each voucher sold out")
	for _, code := range rep.Vouchers {
		v, ok := f.snapshot(code)
		require.True(t, ok)
		require.Len(t, v.orders, 50)
	}
}

func TestLostAnswersAreCountedAndUnknown(t *testing.T) {
	t.Parallel()
	f, srv := newFakeServer(t)
	f.dropEvery = 10
	cfg := baseConfig(srv.URL)
	cfg.Requests = 300
	cfg.TotalLimit = 1000
	rep, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, int64(30), rep.Errors[ErrConnection])
	require.Equal(t, int64(30), rep.Status[0])
	require.Equal(t, int64(30), rep.Failures)
	require.Len(t, rep.unknown[0], 30)
	v, _ := f.snapshot(rep.Vouchers[0])
	require.Len(t, v.orders, 300, "the server took the lost ones too")
	require.Equal(t, int64(270), rep.Reserved)
}

// A 503 that says its outcome is unknown may have taken a use: the order
// counts as unknown, not as refused.
func TestOutcomeUnknown503IsUnknown(t *testing.T) {
	t.Parallel()
	f, srv := newFakeServer(t)
	f.unknownEvery = 10
	cfg := baseConfig(srv.URL)
	cfg.Requests = 300
	cfg.TotalLimit = 1000
	rep, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, int64(30), rep.Status[http.StatusServiceUnavailable])
	require.Equal(t, int64(30), rep.Errors[ErrOutcomeUnknown])
	require.Len(t, rep.unknown[0], 30)
	v, _ := f.snapshot(rep.Vouchers[0])
	require.Len(t, v.orders, 300)
}

func TestMaxDurationStopsTheRun(t *testing.T) {
	t.Parallel()
	_, srv := newFakeServer(t)
	cfg := baseConfig(srv.URL)
	cfg.Target = RouteNoop
	cfg.Rate = 100
	cfg.Duration = time.Hour
	cfg.MaxDuration = 300 * time.Millisecond
	start := time.Now()
	rep, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
	require.True(t, rep.StoppedByMaxDuration)
	if !raceEnabled {
		// Under the race detector the schedule falls behind; the first
		// pass of make test checks the count.
		require.InDelta(t, 30, rep.Requests, 2)
	}
}

// A worker waiting for a job scheduled past MaxDuration stops at
// MaxDuration, not at the job's time.
func TestMaxDurationStopsWaitingWorkers(t *testing.T) {
	t.Parallel()
	_, srv := newFakeServer(t)
	cfg := baseConfig(srv.URL)
	cfg.Target = RouteNoop
	cfg.Rate = 2
	cfg.Concurrency = 64
	cfg.Duration = time.Hour
	cfg.MaxDuration = 300 * time.Millisecond
	start := time.Now()
	rep, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 10*time.Second, "the 64th job is scheduled at 31.5s")
	require.True(t, rep.StoppedByMaxDuration)
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	_, srv := newFakeServer(t)
	cfg := baseConfig(srv.URL)
	cfg.Target = RouteNoop
	cfg.Rate = 100
	cfg.Duration = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	rep, err := Run(ctx, cfg)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotNil(t, rep)
	require.True(t, rep.Interrupted)
}

func TestCreateVoucherFailureIsReported(t *testing.T) {
	t.Parallel()
	_, srv := newFakeServer(t)
	cfg := baseConfig(srv.URL)
	cfg.AdminToken = "wrong"
	_, err := Run(context.Background(), cfg)
	require.ErrorContains(t, err, "FORBIDDEN")
}

func TestSameSeedSameWorkload(t *testing.T) {
	t.Parallel()
	cfg := Config{Seed: 7, RetryShare: 0.3, RepeatShare: 0.3, Customers: 100, Vouchers: 3}
	a, b := newGenerator(cfg), newGenerator(cfg)
	cfg.Seed = 8
	c := newGenerator(cfg)
	same := true
	for range 1000 {
		ja, jb, jc := a.next(), b.next(), c.next()
		require.Equal(t, ja, jb)
		same = same && ja == jc
		require.Less(t, ja.order.seq, a.orders)
		require.True(t, ja.order.customer >= 1 && ja.order.customer <= 100)
		require.True(t, ja.order.voucher >= 0 && ja.order.voucher < 3)
	}
	require.False(t, same, "another seed gives another workload")
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no url", Config{}, "BaseURL"},
		{"bad scheme", Config{BaseURL: "ftp://x"}, "BaseURL"},
		{"bad target", Config{BaseURL: "http://127.0.0.1:1", Target: "x"}, "Target"},
		{"shares over 1", Config{BaseURL: "http://127.0.0.1:1", RetryShare: 0.6, RepeatShare: 0.5}, "RetryShare"},
		{"negative rate", Config{BaseURL: "http://127.0.0.1:1", Rate: -1}, "Rate"},
		{"too many vouchers", Config{BaseURL: "http://127.0.0.1:1", Vouchers: 5000}, "Vouchers"},
		{"stack of 6", Config{BaseURL: "http://127.0.0.1:1", Vouchers: 6, Stack: 6}, "Stack"},
		{"stack over the vouchers", Config{BaseURL: "http://127.0.0.1:1", Vouchers: 2, Stack: 3}, "Stack"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Run(context.Background(), tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}

	cfg, err := Config{BaseURL: "http://127.0.0.1:1/"}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:1", cfg.BaseURL)
	require.Equal(t, RouteReserve, cfg.Target)
	require.Equal(t, int64(DefaultRequests), cfg.Requests)
	require.Equal(t, DefaultMaxDuration, cfg.MaxDuration)
	require.NotZero(t, cfg.Seed)
}

func TestReportTableJSONAndProgress(t *testing.T) {
	t.Parallel()
	_, srv := newFakeServer(t)
	var progress bytes.Buffer
	cfg := baseConfig(srv.URL)
	cfg.Name = "table"
	cfg.Requests = 400
	cfg.TotalLimit = 100
	cfg.FlashSale = true
	cfg.Rate = 1000
	cfg.Progress = &progress
	rep, err := Run(context.Background(), cfg)
	require.NoError(t, err)

	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	out := table.String()
	for _, want := range []string{"flash sale", "open loop at 1000 req/s", "400 in", "p99 ", "p99.9 ",
		"201 Created: 100", "409 Conflict: 300", "OUT_OF_STOCK: 300", "100 distinct orderIds answered 201"} {
		require.Contains(t, out, want)
	}

	var js bytes.Buffer
	require.NoError(t, rep.WriteJSON(&js))
	var back map[string]any
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	require.Equal(t, "table", back["name"])
	require.Equal(t, "reserve", back["target"])
	require.Equal(t, float64(400), back["requests"])
	require.Equal(t, float64(100), back["reserved"])
	require.Equal(t, map[string]any{"201": float64(100), "409": float64(300)}, back["status"])
	lat := back["latencyMs"].(map[string]any)
	for _, k := range []string{"p50", "p90", "p99", "p999", "max", "mean"} {
		require.Contains(t, lat, k)
	}

	p := progress.String()
	require.True(t, strings.HasPrefix(p, "\r"), "progress lines are carriage-return updated: %q", p)
	require.Contains(t, p, "sent 400/400")
	require.True(t, strings.HasSuffix(p, "\n"))
}

func TestCompare(t *testing.T) {
	t.Parallel()
	_, srv := newFakeServer(t)
	cfg := baseConfig(srv.URL)
	cfg.BaseURL = ""
	cfg.Requests = 300
	cfg.TotalLimit = 50
	cmp, err := Compare(context.Background(), cfg, []Target{
		{Name: "standard", BaseURL: srv.URL},
		{Name: "flash-sync", BaseURL: srv.URL, FlashSale: true},
	})
	require.NoError(t, err)
	require.Len(t, cmp.Rows, 3)
	require.Equal(t, "noop", cmp.Rows[0].Name)
	require.Equal(t, RouteNoop, cmp.Rows[0].Target)
	require.InDelta(t, 1.0, cmp.Rows[0].RateVsNoop, 1e-9)
	require.Zero(t, cmp.Rows[0].RateVsStandard)
	require.Equal(t, "standard", cmp.Rows[1].Name)
	require.InDelta(t, 1.0, cmp.Rows[1].RateVsStandard, 1e-9)
	require.True(t, cmp.Rows[2].FlashSale)
	require.Greater(t, cmp.Rows[2].RateVsNoop, 0.0)
	require.Greater(t, cmp.Rows[2].RateVsStandard, 0.0)
	for _, r := range cmp.Rows[1:] {
		require.Equal(t, int64(50), r.Reserved)
		require.Equal(t, -1, r.Violations)
	}
	require.Equal(t, cmp.Reports[1].Seed, cmp.Reports[2].Seed, "same workload")

	var table bytes.Buffer
	require.NoError(t, cmp.WriteTable(&table))
	require.Contains(t, table.String(), "flash-sync")
	require.Contains(t, table.String(), "rate/noop")
	_, err = json.Marshal(cmp)
	require.NoError(t, err)
}
