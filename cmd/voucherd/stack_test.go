package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// TestMain runs the tests, or, when the bench stack started this binary as
// a voucherd process (`serve` or `consume`: the bench runs os.Executable()),
// that command.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "serve" || os.Args[1] == "consume") {
		main()
		os.Exit(0)
	}
	testenv.Main(m)
}

const (
	testAPIToken   = "test-api-token"
	testAdminToken = "test-admin-token"
	// testReadToken is the secret of the read key "dash": the live view's
	// ?token= accepts only read keys.
	testReadToken = "test-read-token"
)

// stackOptions selects the mode of a test stack.
type stackOptions struct {
	// flash creates flash-sale vouchers by default and starts Redis.
	flash bool
	// kafka selects Kafka writes (implies flash).
	kafka bool
	// ttl is the reservation TTL (default 15m).
	ttl time.Duration
	// redisAddrs overrides the shared Redis (for fault tests).
	redisAddrs []string
	// databaseURL overrides the per-test database.
	databaseURL string
	// tweak changes the config before the app starts.
	tweak func(*Config)
	// logs, when set, receives the app's log at debug level, as JSON.
	logs io.Writer
}

// stack is a running voucherd on a free port with its own database, Redis
// key prefix and Kafka topics.
type stack struct {
	t     testing.TB
	app   *App
	base  string
	db    *pgxpool.Pool
	opts  stackOptions
	cfg   Config
	codes atomic.Int64
}

// modes are the three write paths every behavioural test runs through.
var modes = []struct {
	name string
	opts stackOptions
}{
	{"standard", stackOptions{}},
	{"flash-sync", stackOptions{flash: true}},
	{"flash-kafka", stackOptions{flash: true, kafka: true}},
}

// combineWritesFromEnv is on (as in production) unless
// VOUCHERD_TEST_COMBINING=off: make test runs the suite both ways.
func combineWritesFromEnv(t testing.TB) bool {
	switch v := os.Getenv("VOUCHERD_TEST_COMBINING"); v {
	case "", "on":
		return true
	case "off":
		return false
	default:
		t.Fatalf("VOUCHERD_TEST_COMBINING must be on or off, got %q", v)
		return false
	}
}

func newStack(t testing.TB, opts stackOptions) *stack {
	t.Helper()
	if opts.kafka {
		opts.flash = true
	}
	ctx := context.Background()
	url := opts.databaseURL
	if url == "" {
		url = testenv.Postgres(t).URL
	}
	cfg := Config{
		Addr: "127.0.0.1:0", DatabaseURL: url, APIToken: testAPIToken, AdminToken: testAdminToken,
		Access:         AccessConfig{ReadKeys: "dash:" + testReadToken},
		ReservationTTL: opts.ttl, ExpiryInterval: 200 * time.Millisecond, FlashWrites: "sync",
		SoldOutTTL: time.Second, MigrateOnStart: true, ShutdownTimeout: 10 * time.Second,
		LogFormat: "text", LogLevel: "warn", MaxDBConns: 40, VoucherCacheTTL: time.Second,
		ProduceTimeout: 2 * time.Second, WriteTimeout: 5 * time.Second,
		// Exactness tests count every answer; on CI's loaded cores a Redis
		// call can wait past the 500 ms default for a CPU. Timeouts are
		// exercised by the fault suite and the tests that set their own.
		RedisTimeout:    3 * time.Second,
		KafkaPartitions: 3, RunConsumer: true, ReconcileGrace: 30 * time.Second,
		CombineWrites: combineWritesFromEnv(t),
	}
	if cfg.ReservationTTL == 0 {
		cfg.ReservationTTL = 15 * time.Minute
	}
	if opts.flash {
		cfg.RedisAddrs = opts.redisAddrs
		if len(cfg.RedisAddrs) == 0 {
			cfg.RedisAddrs = []string{testenv.Redis(t).Addr}
		}
		cfg.RedisKeyPrefix = "t" + strings.ReplaceAll(fmt.Sprint(time.Now().UnixNano()), "-", "") + ":"
	}
	if opts.kafka {
		k := testenv.Kafka(t)
		cfg.FlashWrites = "kafka"
		cfg.KafkaBrokers = k.Brokers
		cfg.KafkaTopic = testenv.Topic(t, k.Brokers, 3)
		cfg.KafkaDLQTopic = testenv.Topic(t, k.Brokers, 1)
		cfg.KafkaGroup = "g-" + cfg.KafkaTopic
	}
	if opts.tweak != nil {
		opts.tweak(&cfg)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if opts.logs != nil {
		log = slog.New(slog.NewJSONHandler(opts.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	app, err := NewApp(ctx, cfg, log)
	require.NoError(t, err)
	require.NoError(t, app.Start(ctx))
	t.Cleanup(func() { _ = app.Close() })
	db, err := pgxpool.New(ctx, cfg.DatabaseURL)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	return &stack{t: t, app: app, base: "http://" + app.Addr(), db: db, opts: opts, cfg: cfg}
}

var httpClient = &http.Client{
	Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256},
	Timeout:   30 * time.Second,
}

// response is a decoded HTTP answer.
type response struct {
	status int
	body   map[string]any
	raw    []byte
	header http.Header
}

func (r response) str(key string) string {
	s, _ := r.body[key].(string)
	return s
}

func (r response) num(key string) int64 {
	f, _ := r.body[key].(float64)
	return int64(f)
}

// do sends a request with the API token (admin routes and /metrics with
// the admin token): body may be a string (sent as is) or a value (JSON-encoded).
func (s *stack) do(method, path string, body any) response {
	s.t.Helper()
	token := testAPIToken
	if (method == http.MethodPost && path == "/vouchers") || method == http.MethodPatch || strings.HasSuffix(path, "/warmup") || strings.HasSuffix(path, "/reconciliation") || path == "/metrics" {
		token = testAdminToken
	}
	return s.doToken(method, path, body, token)
}

func (s *stack) doToken(method, path string, body any, token string) response {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		require.NoError(s.t, err)
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	require.NoError(s.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	if req.URL.Path != "/metrics" {
		checkAgainstOpenAPI(s.t, req, resp.StatusCode, resp.Header, raw)
	}
	out := response{status: resp.StatusCode, raw: raw, header: resp.Header}
	if len(raw) > 0 && raw[0] == '{' {
		require.NoError(s.t, json.Unmarshal(raw, &out.body), string(raw))
	}
	return out
}

// voucherSpec describes a voucher to create; zero fields get defaults.
type voucherSpec struct {
	TotalLimit     int32
	PerUserLimit   int32
	MinOrderAmount int64
	StartsAt       time.Time
	EndsAt         time.Time
	Flash          *bool
}

// createVoucher creates a voucher with a unique code and returns the code.
func (s *stack) createVoucher(spec voucherSpec) string {
	s.t.Helper()
	code := fmt.Sprintf("V%d%d", time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
	if spec.TotalLimit == 0 {
		spec.TotalLimit = 10
	}
	if spec.PerUserLimit == 0 {
		spec.PerUserLimit = 1
	}
	if spec.StartsAt.IsZero() {
		spec.StartsAt = time.Now().Add(-time.Hour)
	}
	if spec.EndsAt.IsZero() {
		spec.EndsAt = time.Now().Add(24 * time.Hour)
	}
	flash := s.opts.flash
	if spec.Flash != nil {
		flash = *spec.Flash
	}
	r := s.do(http.MethodPost, "/vouchers", map[string]any{
		"code": code, "discountAmount": 1000, "minOrderAmount": spec.MinOrderAmount,
		"totalLimit": spec.TotalLimit, "perUserLimit": spec.PerUserLimit,
		"startsAt": spec.StartsAt.UTC().Format(time.RFC3339Nano), "endsAt": spec.EndsAt.UTC().Format(time.RFC3339Nano),
		"flashSale": flash,
	})
	require.Equal(s.t, http.StatusCreated, r.status, string(r.raw))
	return code
}

// createEndedVoucher returns a voucher whose window has ended. The API
// refuses to create one that has ended already, so it is created with a
// window ending a moment ahead and then left to end.
func (s *stack) createEndedVoucher() string {
	s.t.Helper()
	ends := time.Now().Add(2 * time.Second)
	code := s.createVoucher(voucherSpec{StartsAt: time.Now().Add(-2 * time.Hour), EndsAt: ends})
	time.Sleep(time.Until(ends) + 10*time.Millisecond)
	return code
}

func (s *stack) reserve(code string, customer int64, orderID string, amount int64) response {
	s.t.Helper()
	return s.do(http.MethodPost, "/vouchers/"+code+"/reservations", map[string]any{
		"customerId": customer, "orderId": orderID, "orderAmount": amount,
	})
}

// parallel runs fn(i) for i in [0, n) on at most width goroutines.
func parallel(n, width int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, width)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}(i)
	}
	wg.Wait()
}

// dbState is what PostgreSQL says of a voucher.
type dbState struct {
	totalLimit, usedCount         int
	reserved, confirmed, released int
}

func (s *stack) state(code string) dbState {
	s.t.Helper()
	var st dbState
	err := s.db.QueryRow(context.Background(), `
		SELECT v.total_limit, v.used_count,
		       count(r.*) FILTER (WHERE r.status = 'RESERVED'),
		       count(r.*) FILTER (WHERE r.status = 'CONFIRMED'),
		       count(r.*) FILTER (WHERE r.status = 'RELEASED')
		FROM voucher v LEFT JOIN voucher_redemption r ON r.voucher_code = v.code
		WHERE v.code = $1 GROUP BY v.code`, code).
		Scan(&st.totalLimit, &st.usedCount, &st.reserved, &st.confirmed, &st.released)
	require.NoError(s.t, err)
	return st
}

// settle waits, in Kafka mode, until PostgreSQL holds want held rows for
// the voucher (the consumer is asynchronous); in other modes it returns at
// once.
func (s *stack) settle(code string, want int) {
	s.t.Helper()
	if !s.opts.kafka {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st := s.state(code)
		if st.reserved+st.confirmed >= want && st.usedCount == st.reserved+st.confirmed {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := s.state(code)
	s.t.Fatalf("Kafka consumer did not apply %d reservations of %s within 30s: %+v", want, code, st)
}

// assertConsistent checks the invariants of the stored counters for a
// voucher (pgstore.Violations) and, in the flash modes, that Redis
// remaining = totalLimit - held.
func (s *stack) assertConsistent(code string) {
	s.t.Helper()
	ctx := context.Background()
	bad, err := pgstore.Violations(ctx, s.db, code)
	require.NoError(s.t, err)
	require.Empty(s.t, bad, "stored counters of %s", code)
	st := s.state(code)
	held := st.reserved + st.confirmed
	if s.opts.flash && s.app.gate != nil {
		st, err := s.app.gate.Inspect(ctx, code)
		require.NoError(s.t, err)
		if st.Loaded {
			require.Equal(s.t, int64(st.Remaining), int64(s.state(code).totalLimit-held), "Redis remaining of %s", code)
		}
	}
}

// sampleOversell checks every 20 ms that PostgreSQL never holds more than
// totalLimit uses of the voucher, counting violations, until the returned
// function is called.
func (s *stack) sampleOversell(code string, violations *atomic.Int64) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var held, total int
			err := s.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM voucher_redemption
				WHERE voucher_code = $1 AND status IN ('RESERVED','CONFIRMED')), total_limit FROM voucher WHERE code = $1`, code).Scan(&held, &total)
			if err == nil && held > total {
				violations.Add(1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

// reconcile asks the server to reconcile a flash voucher with repairs and
// returns the report.
func (s *stack) reconcile(code string) response {
	s.t.Helper()
	r := s.do(http.MethodPost, "/vouchers/"+code+"/reconciliation", nil)
	require.Equal(s.t, http.StatusOK, r.status, string(r.raw))
	return r
}

// assertConsistentAfterReconcile runs reconciliation, then checks that the
// stores agree.
func (s *stack) assertConsistentAfterReconcile(code string) {
	s.t.Helper()
	s.reconcile(code)
	s.assertConsistent(code)
}

// pendingOrders lists the orderIds of pending holds.
func pendingOrders(orders map[string]voucher.Hold) []string {
	var ids []string
	for id, h := range orders {
		if h.Pending && !h.Released {
			ids = append(ids, id)
		}
	}
	return ids
}
