package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/redisgate"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

const (
	apiToken   = "faults-api-token"
	adminToken = "faults-admin-token"
)

// Write modes of a scenario.
const (
	modeStandard = "standard" // flashSale false: PostgreSQL only
	modeSync     = "sync"     // flash, VOUCHERD_FLASH_WRITES=sync
	modeKafka    = "kafka"    // flash, VOUCHERD_FLASH_WRITES=kafka, separate consumer
)

// cluster is one scenario's system: private PostgreSQL, Redis and (Kafka
// mode) Kafka, two or more voucherd serve instances and, in Kafka mode, a
// separate `voucherd consume` process.
type cluster struct {
	t     *testing.T
	mode  string
	dir   string
	pg    *testenv.PGServer
	dbURL string
	redis *testenv.RedisServer
	kafka *testenv.KafkaBroker
	// redisProxy and pgProxy stand between the voucherd processes and
	// Redis and PostgreSQL, so that their calls can be made to hang; the
	// checks read both directly.
	redisProxy, pgProxy *testenv.Proxy
	instances           []*proc
	consumer            *proc

	// down marks dependencies the nemesis has stopped, so that heal knows
	// what to start again.
	mu   sync.Mutex
	down map[string]bool
}

// newCluster starts the dependencies and n instances for mode; extraEnv
// is added to the voucherd processes' environment.
func newCluster(t *testing.T, mode string, n int, extraEnv []string) *cluster {
	t.Helper()
	bin := voucherdBinary(t)
	c := &cluster{t: t, mode: mode, dir: t.TempDir(), down: map[string]bool{}}
	if os.Getenv("VOUCHERD_FAULTS_SAVE") != "" {
		// Keep the voucherd logs beside the saved history.
		dir, err := os.MkdirTemp("", "voucherd-faults-logs-")
		require.NoError(t, err)
		c.dir = dir
		t.Logf("voucherd logs in %s", dir)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if mode == modeKafka {
			// The JVM takes longest; start it while PostgreSQL starts.
			c.kafka = testenv.NewKafka(t)
		}
	}()
	c.pg = testenv.NewPostgres(t)
	c.dbURL = c.pg.NewDatabase(t).URL
	c.redis = testenv.NewRedis(t)
	c.redisProxy = testenv.NewProxy(t, c.redis.Addr)
	dbu, err := url.Parse(c.dbURL)
	require.NoError(t, err)
	c.pgProxy = testenv.NewProxy(t, dbu.Host)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Kafka names allow [a-zA-Z0-9._-] only.
	suffix := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, t.Name())
	env := []string{
		"VOUCHERD_DATABASE_URL=" + c.pgProxy.URL(t, c.dbURL),
		"VOUCHERD_REDIS_ADDR=" + c.redisProxy.Addr,
		"VOUCHERD_API_TOKEN=" + apiToken,
		"VOUCHERD_ADMIN_TOKEN=" + adminToken,
		// Long enough that nothing expires during a run: expiry would
		// release holds the model does not know about.
		"VOUCHERD_RESERVATION_TTL=30m",
		"VOUCHERD_RECONCILE_INTERVAL=1s",
		// Longer than the produce timeout (2s), so that a Kafka-mode hold
		// whose event is still being produced is not taken for an orphan.
		"VOUCHERD_RECONCILE_GRACE=3s",
		"VOUCHERD_DB_MAX_CONNS=8",
		"VOUCHERD_SHUTDOWN_TIMEOUT=2s",
		"VOUCHERD_LOG_FORMAT=text",
		"VOUCHERD_LOG_LEVEL=info",
	}
	switch mode {
	case modeKafka:
		env = append(env,
			"VOUCHERD_FLASH_WRITES=kafka",
			// Below the clients' patience, so that a reservation waiting on a
			// dead broker is answered 503 rather than given up on.
			"VOUCHERD_PRODUCE_TIMEOUT=500ms",
			"VOUCHERD_KAFKA_BROKERS="+strings.Join(c.kafka.Brokers, ","),
			"VOUCHERD_KAFKA_TOPIC=faults-"+suffix,
			"VOUCHERD_KAFKA_DLQ_TOPIC=faults-"+suffix+"-dlq",
			"VOUCHERD_KAFKA_GROUP=faults-"+suffix,
			"VOUCHERD_CONSUMER=false",
		)
	default:
		env = append(env, "VOUCHERD_FLASH_WRITES=sync")
	}
	base := os.Environ()[:0:0]
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VOUCHERD_") {
			base = append(base, kv)
		}
	}
	common := append(base, env...)
	env = append(append([]string(nil), common...), extraEnv...)

	for i := 0; i < n; i++ {
		// Both PostgreSQL write paths run side by side: the first instance
		// combines concurrent reservations of a voucher into one
		// transaction (the default), the others write each on its own,
		// where several transactions race on the voucher row.
		ienv := append([]string(nil), common...)
		if i > 0 {
			ienv = append(ienv, "VOUCHERD_COMBINE_WRITES=false")
		}
		ienv = append(ienv, extraEnv...)
		p := &proc{
			name: fmt.Sprintf("voucherd-%d", i), bin: bin, args: []string{"serve"},
			logPath: filepath.Join(c.dir, fmt.Sprintf("voucherd-%d.log", i)),
		}
		c.instances = append(c.instances, p)
		t.Cleanup(p.stop)
		// One at a time, so that only the first one migrates. A port that
		// another process took in the meantime is replaced.
		var err error
		for try := 0; try < 3; try++ {
			addr := freeAddr(t)
			p.addr = addr
			p.env = append(append([]string(nil), ienv...), "VOUCHERD_ADDR="+addr)
			if err = p.startUntilHealthy(60 * time.Second); err == nil || !strings.Contains(err.Error(), "address already in use") {
				break
			}
			p.kill()
		}
		require.NoError(t, err)
	}
	if mode == modeKafka {
		c.consumer = &proc{
			name: "voucherd-consume", bin: bin, args: []string{"consume"},
			env: env, logPath: filepath.Join(c.dir, "voucherd-consume.log"),
		}
		t.Cleanup(c.consumer.stop)
		require.NoError(t, c.consumer.startUntilHealthy(30*time.Second))
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range append(append([]*proc(nil), c.instances...), c.consumer) {
				if p != nil {
					t.Logf("%s log (%s), last lines:\n%s", p.name, p.logPath, tail(p.logPath))
				}
			}
		}
	})
	return c
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// addrs returns the instances' addresses, for the clients' round robin.
func (c *cluster) addrs() []string {
	out := make([]string, len(c.instances))
	for i, p := range c.instances {
		out[i] = p.addr
	}
	return out
}

// admin sends an admin request to the first instance that answers.
func (c *cluster) admin(ctx context.Context, method, path string, body any, out any) (int, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return 0, err
		}
	}
	var lastErr error
	for _, addr := range c.addrs() {
		req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, bytes.NewReader(payload))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			lastErr = err
			continue
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			lastErr = fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
			continue
		}
		if out != nil && resp.StatusCode < 300 {
			if err := json.Unmarshal(data, out); err != nil {
				return resp.StatusCode, fmt.Errorf("%s %s: decode %s: %w", method, path, data, err)
			}
		}
		if resp.StatusCode >= 300 {
			return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
		}
		return resp.StatusCode, nil
	}
	return 0, lastErr
}

// createVoucher creates the scenario's voucher, valid from an hour ago for
// a day.
func (c *cluster) createVoucher(spec VoucherSpec, flash bool, extra ...map[string]any) {
	c.t.Helper()
	now := time.Now().UTC()
	body := map[string]any{
		"code": spec.Code, "discountAmount": 1000, "minOrderAmount": 0,
		"totalLimit": spec.TotalLimit, "perUserLimit": spec.PerUserLimit,
		"startsAt": now.Add(-time.Hour).Format(time.RFC3339), "endsAt": now.Add(24 * time.Hour).Format(time.RFC3339),
		"flashSale": flash,
	}
	for _, m := range extra {
		for k, v := range m {
			body[k] = v
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.admin(ctx, http.MethodPost, "/vouchers", body, nil)
	require.NoError(c.t, err)
	if flash {
		_, err = c.admin(ctx, http.MethodPost, "/vouchers/"+spec.Code+"/warmup", nil, nil)
		require.NoError(c.t, err)
	}
}

// createCampaign creates a campaign of n codes with spec's budget and
// per-customer limit, valid from an hour ago for a day, and returns spec
// with the campaign id as Code and its codes as Codes. The codes' prefix is
// prefix.
func (c *cluster) createCampaign(spec VoucherSpec, prefix string, n int, flash bool) VoucherSpec {
	c.t.Helper()
	now := time.Now().UTC()
	body := map[string]any{
		"name": prefix, "codeCount": n, "codePrefix": prefix, "discountAmount": 1000, "minOrderAmount": 0,
		"totalLimit": spec.TotalLimit, "perUserLimit": spec.PerUserLimit,
		"startsAt": now.Add(-time.Hour).Format(time.RFC3339), "endsAt": now.Add(24 * time.Hour).Format(time.RFC3339),
	}
	if flash {
		body["flashSale"] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var created struct {
		ID string `json:"id"`
	}
	_, err := c.admin(ctx, http.MethodPost, "/campaigns", body, &created)
	require.NoError(c.t, err)
	spec.Code, spec.Codes = created.ID, nil
	for after := ""; ; {
		var page struct {
			Codes []struct {
				Code string `json:"code"`
			} `json:"codes"`
			Next string `json:"next"`
		}
		_, err := c.admin(ctx, http.MethodGet, "/campaigns/"+created.ID+"/codes?limit=500&after="+after, nil, &page)
		require.NoError(c.t, err)
		for _, code := range page.Codes {
			spec.Codes = append(spec.Codes, code.Code)
		}
		if after = page.Next; after == "" {
			break
		}
	}
	require.Len(c.t, spec.Codes, n, "codes of campaign %s", created.ID)
	if flash {
		_, err = c.admin(ctx, http.MethodPost, "/vouchers/"+spec.Code+"/warmup", nil, nil)
		require.NoError(c.t, err)
	}
	return spec
}

// reconcileReport is the part of the admin reconciliation report the suite
// reads.
type reconcileReport struct {
	Loaded            bool     `json:"loaded"`
	Drift             int64    `json:"drift"`
	RedisRemaining    int64    `json:"redisRemaining"`
	ExpectedRemaining int64    `json:"expectedRemaining"`
	InFlight          []string `json:"inFlight"`
	Abandoned         []string `json:"abandoned"`
	Orphans           []string `json:"orphans"`
	Stale             []string `json:"stale"`
	Missing           []string `json:"missing"`
	Uncommitted       []string `json:"uncommitted"`
	Unconfirmed       []string `json:"unconfirmed"`
	Skipped           string   `json:"skipped"`
}

func (r reconcileReport) settled() bool {
	return r.Loaded && r.Drift == 0 && len(r.InFlight) == 0 && len(r.Abandoned) == 0 && len(r.Orphans) == 0 && len(r.Stale) == 0 &&
		len(r.Missing) == 0 && len(r.Uncommitted) == 0 && len(r.Unconfirmed) == 0
}

// errNotLoaded: reconciliation found the voucher not loaded into Redis.
var errNotLoaded = errors.New("voucher not loaded into Redis")

// reconcile runs repairing reconciliations until a dry run finds Redis and
// PostgreSQL in agreement, or timeout, or the voucher is not loaded
// (errNotLoaded); it returns the rounds and the last report.
func (c *cluster) reconcile(code string, timeout time.Duration) (int, reconcileReport, error) {
	deadline := time.Now().Add(timeout)
	var last reconcileReport
	var lastErr error
	for round := 1; ; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.admin(ctx, http.MethodPost, "/vouchers/"+code+"/reconciliation", nil, nil)
		if err == nil {
			last = reconcileReport{}
			_, err = c.admin(ctx, http.MethodGet, "/vouchers/"+code+"/reconciliation", nil, &last)
		}
		cancel()
		lastErr = err
		if err == nil && last.settled() {
			return round, last, nil
		}
		if err == nil && !last.Loaded {
			// Redis lost the voucher and nothing loaded it again: the
			// caller warms it up; waiting changes nothing.
			return round, last, errNotLoaded
		}
		if time.Now().After(deadline) {
			if lastErr == nil {
				lastErr = fmt.Errorf("not settled: %+v", last)
			}
			return round, last, lastErr
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// warmup loads the voucher into Redis again (after Redis lost it), retrying
// while the instances answer 503 (a Kafka consumer still catching up).
func (c *cluster) warmup(code string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.admin(ctx, http.MethodPost, "/vouchers/"+code+"/warmup", nil, nil)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// dbState reads the final state of the voucher (or campaign budget) code
// from PostgreSQL.
func (c *cluster) dbState(code string) DBState {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.dbURL)
	require.NoError(c.t, err)
	defer conn.Close(context.Background())
	st := DBState{Rows: map[string]Row{}}
	err = conn.QueryRow(ctx, `SELECT total_limit, per_user_limit, used_count FROM voucher WHERE code = $1`, code).
		Scan(&st.TotalLimit, &st.PerUserLimit, &st.UsedCount)
	require.NoError(c.t, err)
	rows, err := conn.Query(ctx, `SELECT order_id, customer, status, coalesce(code, '') FROM voucher_redemption WHERE voucher_code = $1`, code)
	require.NoError(c.t, err)
	for rows.Next() {
		var r Row
		require.NoError(c.t, rows.Scan(&r.OrderID, &r.Customer, &r.Status, &r.Code))
		st.Rows[r.OrderID] = r
	}
	require.NoError(c.t, rows.Err())
	err = conn.QueryRow(ctx, `SELECT coalesce(l.cap, 0), coalesce(l.held, 0),
		       (SELECT coalesce(sum(r.discount_amount), 0) FROM voucher_redemption r
		        WHERE r.voucher_code = $1 AND r.status IN ('RESERVED', 'CONFIRMED'))::bigint
		FROM (SELECT 1) one LEFT JOIN voucher_limit l ON l.voucher_code = $1 AND l.kind = 'budget'`, code).
		Scan(&st.BudgetAmount, &st.BudgetHeld, &st.BudgetRowsHeld)
	require.NoError(c.t, err)
	wrows, err := conn.Query(ctx, `SELECT w.start, coalesce(l.cap, 0), coalesce(l.held, 0), l.voucher_code IS NOT NULL,
		       (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = $1 AND r.window_start = w.start
		          AND r.status IN ('RESERVED', 'CONFIRMED'))
		FROM (SELECT DISTINCT r.window_start AS start FROM voucher_redemption r
		      WHERE r.voucher_code = $1 AND r.window_start IS NOT NULL
		      UNION SELECT l.period_start FROM voucher_limit l WHERE l.voucher_code = $1 AND l.kind = 'window') w
		LEFT JOIN voucher_limit l ON l.voucher_code = $1 AND l.kind = 'window' AND l.period_start = w.start`, code)
	require.NoError(c.t, err)
	for wrows.Next() {
		var w WindowCounter
		require.NoError(c.t, wrows.Scan(&w.Start, &w.Cap, &w.Held, &w.HasCounterRow, &w.RowsHeld))
		w.Start = w.Start.UTC()
		st.Windows = append(st.Windows, w)
	}
	require.NoError(c.t, wrows.Err())
	stored, err := pgstore.Violations(ctx, conn, code)
	require.NoError(c.t, err)
	for _, b := range stored {
		st.Stored = append(st.Stored, b.Message)
	}
	return st
}

// gateHolds reads the voucher's orders from Redis with the gate's own
// reader, as the gate keeps them (released markers included); ok is false
// when Redis did not answer within timeout.
func (c *cluster) gateHolds(code string, timeout time.Duration) (map[string]voucher.Hold, bool) {
	g, err := redisgate.New(redisgate.Config{Addrs: []string{c.redis.Addr}})
	if err != nil {
		return nil, false
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		s, err := g.Inspect(ctx, code)
		if err == nil {
			return s.Orders, s.Loaded
		}
		if ctx.Err() != nil {
			return nil, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gateState reads the voucher's state from Redis with the gate's own
// reader.
func (c *cluster) gateState(code string) GateState {
	c.t.Helper()
	g, err := redisgate.New(redisgate.Config{Addrs: []string{c.redis.Addr}})
	require.NoError(c.t, err)
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var gs GateState
	for {
		s, err := g.Inspect(ctx, code)
		if err == nil {
			gs = GateState{Loaded: s.Loaded, Remaining: s.Remaining, Users: map[string]int{}, Holds: map[string]string{},
				BudgetHeld: s.BudgetHeld, BudgetHolds: s.BudgetHeldOrders(), Windows: s.Windows, WindowHolds: map[time.Time]int64{}}
			for cust, n := range s.Users {
				gs.Users[cust] = int(n)
			}
			for id, h := range s.Orders {
				if !h.Released {
					gs.Holds[id] = h.CustomerID
					if !h.Window.IsZero() {
						gs.WindowHolds[h.Window.UTC()]++
					}
				}
			}
			return gs
		}
		// New connects in the background; give it a moment.
		if ctx.Err() != nil {
			require.NoError(c.t, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sample is one reading of the sampler.
type sample struct {
	at          time.Duration
	held        int
	usedCount   int
	totalLimit  int
	maxCustomer int
	perUser     int
	maxCode     int // the most held rows of one campaign code (0 for a voucher)
}

// sampler reads PostgreSQL every interval and records every reading where
// more uses are held than totalLimit, a customer holds more than
// perUserLimit, or a campaign code is held by more than one row.
type sampler struct {
	mu         sync.Mutex
	samples    int
	errors     int
	maxHeld    int
	violations []sample
}

const sampleSQL = `
WITH held AS (
    SELECT customer, code FROM voucher_redemption
    WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED')
)
SELECT (SELECT count(*) FROM held),
       (SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM held GROUP BY customer) x),
       v.used_count, v.total_limit, v.per_user_limit,
       (SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM held WHERE code IS NOT NULL GROUP BY code) y)
FROM voucher v WHERE v.code = $1`

func (s *sampler) run(ctx context.Context, dbURL, code string, every time.Duration) {
	start := time.Now()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for waitCtx(ctx, every) {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		if conn == nil || conn.IsClosed() {
			var err error
			if conn, err = pgx.Connect(qctx, dbURL); err != nil {
				conn = nil
				cancel()
				s.mu.Lock()
				s.errors++
				s.mu.Unlock()
				continue
			}
		}
		var r sample
		err := conn.QueryRow(qctx, sampleSQL, code).Scan(&r.held, &r.maxCustomer, &r.usedCount, &r.totalLimit, &r.perUser, &r.maxCode)
		cancel()
		s.mu.Lock()
		if err != nil {
			s.errors++
			if conn != nil {
				conn.Close(context.Background())
				conn = nil
			}
		} else {
			s.samples++
			s.maxHeld = max(s.maxHeld, r.held)
			r.at = time.Since(start)
			if r.held > r.totalLimit || r.usedCount > r.totalLimit || r.maxCustomer > r.perUser || r.maxCode > 1 {
				s.violations = append(s.violations, r)
			}
		}
		s.mu.Unlock()
	}
}
