package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/redisgate"
	"github.com/voucherd/voucherd/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// mirror writes the fake server's state for the run's vouchers into
// PostgreSQL, as a correct voucherd would have.
func mirror(t *testing.T, ctx context.Context, conn *pgx.Conn, f *fakeAPI, rep *Report) {
	t.Helper()
	now := time.Now()
	for _, code := range rep.Vouchers {
		v, ok := f.snapshot(code)
		require.True(t, ok)
		_, err := conn.Exec(ctx, `INSERT INTO voucher (code, discount_amount, total_limit, per_user_limit, starts_at, ends_at, flash_sale, used_count)
			VALUES ($1, 1000, $2, $3, $4, $5, $6, $7)`,
			code, v.totalLimit, v.perUserLimit, now.Add(-time.Minute), now.Add(time.Hour), v.flashSale, len(v.orders))
		require.NoError(t, err)
		for id, cust := range v.orders {
			_, err := conn.Exec(ctx, `INSERT INTO voucher_redemption (order_id, voucher_code, customer, customer_id, order_amount,
				discount_amount, status, created_at, updated_at, expires_at)
				VALUES ($1, $2, $3, voucherd_customer_legacy($3), 5000, 1000, 'RESERVED', $4, $4, $5)`,
				id, code, cust, now, now.Add(15*time.Minute))
			require.NoError(t, err)
		}
		for cust, held := range v.perCustomer {
			_, err := conn.Exec(ctx, `INSERT INTO voucher_customer_usage (voucher_code, customer, customer_id, held)
				VALUES ($1, $2, voucherd_customer_legacy($2), $3)`,
				code, cust, held)
			require.NoError(t, err)
		}
	}
}

// verifyFixture runs a small bench against the fake and mirrors its state
// into a fresh, migrated database.
func verifyFixture(t *testing.T, cfg func(*Config)) (context.Context, *pgx.Conn, *Report, VerifyConfig) {
	t.Helper()
	ctx := context.Background()
	pg := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(ctx, pg.URL))
	conn, err := pgx.Connect(ctx, pg.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	f, srv := newFakeServer(t)
	c := baseConfig(srv.URL)
	c.Requests = 400
	c.TotalLimit = 60
	c.PerUserLimit = 2
	c.Customers = 100
	c.RetryShare = 0.2
	c.RepeatShare = 0.3
	if cfg != nil {
		cfg(&c)
	}
	rep, err := Run(ctx, c)
	require.NoError(t, err)
	require.Nil(t, rep.Verification, "no database URL in the config: not verified")
	mirror(t, ctx, conn, f, rep)
	return ctx, conn, rep, VerifyConfig{DatabaseURL: pg.URL, Wait: -1}
}

func requireViolation(t *testing.T, v *Verification, want string) {
	t.Helper()
	for _, s := range v.Violations {
		if strings.Contains(s, want) {
			return
		}
	}
	t.Fatalf("no violation containing %q in %q", want, v.Violations)
}

func TestVerifyFlagsViolations(t *testing.T) {
	t.Parallel()
	ctx, conn, rep, vc := verifyFixture(t, nil)
	code := rep.Vouchers[0]
	require.Equal(t, int64(60), rep.Reserved)

	v, err := Verify(ctx, vc, rep)
	require.NoError(t, err)
	require.Empty(t, v.Violations)
	require.Equal(t, []VoucherCheck{{Code: code, TotalLimit: 60, PerUserLimit: 2, UsedCount: 60, Granted: 60,
		HeldRows: 60, RowsWritten: 60}}, v.Vouchers)

	var someOrder string
	var someCustomer string
	require.NoError(t, conn.QueryRow(ctx, `SELECT order_id, customer FROM voucher_redemption WHERE voucher_code = $1 LIMIT 1`, code).
		Scan(&someOrder, &someCustomer))

	// Each case breaks the state, checks the violation, and restores it.
	tests := []struct {
		name             string
		breakSQL, fixSQL string
		args             []any
		wantViolation    string
	}{
		{
			name:          "used_count drifts",
			breakSQL:      `UPDATE voucher SET used_count = used_count - 1 WHERE code = $1`,
			fixSQL:        `UPDATE voucher SET used_count = used_count + 1 WHERE code = $1`,
			args:          []any{code},
			wantViolation: "used_count 59 != held rows 60",
		},
		{
			name:          "orderId answered for another customer",
			breakSQL:      `UPDATE voucher_redemption SET customer = 'other-' || customer WHERE order_id = $1`,
			fixSQL:        `UPDATE voucher_redemption SET customer = substr(customer, 7) WHERE order_id = $1`,
			args:          []any{someOrder},
			wantViolation: "answered 201 for customer",
		},
		{
			name:          "granted order missing",
			breakSQL:      `UPDATE voucher_redemption SET order_id = 'other-' || order_id WHERE order_id = $1`,
			fixSQL:        `UPDATE voucher_redemption SET order_id = substr(order_id, 7) WHERE order_id = 'other-' || $1`,
			args:          []any{someOrder},
			wantViolation: "answered 201 has no row",
		},
		{
			name:          "customer over the per-user limit",
			breakSQL:      `UPDATE voucher SET per_user_limit = 1 WHERE code = $1`,
			fixSQL:        `UPDATE voucher SET per_user_limit = 2 WHERE code = $1`,
			args:          []any{code},
			wantViolation: "perUserLimit 1",
		},
		{
			name:          "customer usage counter drifts",
			breakSQL:      `UPDATE voucher_customer_usage SET held = held + 1 WHERE voucher_code = $1 AND customer = $2`,
			fixSQL:        `UPDATE voucher_customer_usage SET held = held - 1 WHERE voucher_code = $1 AND customer = $2`,
			args:          []any{code, someCustomer},
			wantViolation: "voucher_customer_usage.held",
		},
	}
	for _, tc := range tests {
		_, err := conn.Exec(ctx, tc.breakSQL, tc.args...)
		require.NoError(t, err, tc.name)
		v, err := Verify(ctx, vc, rep)
		require.NoError(t, err, tc.name)
		requireViolation(t, v, tc.wantViolation)
		_, err = conn.Exec(ctx, tc.fixSQL, tc.args...)
		require.NoError(t, err, tc.name)
	}

	// A held row the server never granted: an oversell the clients did not
	// see as a 201.
	_, err = conn.Exec(ctx, `UPDATE voucher SET total_limit = 61, used_count = 61 WHERE code = $1`, code)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO voucher_redemption (order_id, voucher_code, customer_id, order_amount, discount_amount,
		status, created_at, updated_at, expires_at) VALUES ($1, $2, 99999, 1, 1, 'CONFIRMED', now(), now(), now())`,
		rep.orderID(1_000_000), code)
	require.NoError(t, err)
	v, err = Verify(ctx, vc, rep)
	require.NoError(t, err)
	requireViolation(t, v, "was never answered 201")
	requireViolation(t, v, "held rows 61")

	// The report carries the violations.
	rep.Verification = v
	require.False(t, rep.OK())
	require.NotEmpty(t, rep.Violations())
}

func TestVerifyOversellSeenByClients(t *testing.T) {
	t.Parallel()
	ctx, conn, rep, vc := verifyFixture(t, nil)
	// One more orderId answered 201 than the voucher has uses (as if the
	// server had answered 201 without writing it).
	var limit int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT total_limit FROM voucher WHERE code = $1`, rep.Vouchers[0]).Scan(&limit))
	require.Equal(t, int64(60), limit)
	rep.granted[0][1_000_001] = order{seq: 1_000_001, customer: 1}
	v, err := Verify(ctx, vc, rep)
	require.NoError(t, err)
	requireViolation(t, v, "OVERSELL: 61 distinct orderIds answered 201, totalLimit 60")
}

func TestVerifyWaitsForTheDatabaseToCatchUp(t *testing.T) {
	t.Parallel()
	ctx, conn, rep, vc := verifyFixture(t, nil)
	code := rep.Vouchers[0]

	// Like a Kafka consumer lagging behind: the rows are there only later.
	_, err := conn.Exec(ctx, `ALTER TABLE voucher_redemption RENAME TO lagging`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `CREATE TABLE voucher_redemption (LIKE lagging)`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE voucher SET used_count = 0 WHERE code = $1`, code)
	require.NoError(t, err)

	v, err := Verify(ctx, vc, rep)
	require.NoError(t, err)
	requireViolation(t, v, "has no row")

	done := make(chan error, 1)
	go func() {
		time.Sleep(600 * time.Millisecond)
		_, err := conn.Exec(ctx, `INSERT INTO voucher_redemption SELECT * FROM lagging;
			UPDATE voucher SET used_count = 60 WHERE code = '`+code+`'`)
		done <- err
	}()
	vc.Wait = 10 * time.Second
	// Verify uses its own connection; the fixture's conn is only used by the
	// goroutine until done.
	v, err = Verify(ctx, vc, rep)
	require.NoError(t, <-done)
	require.NoError(t, err)
	require.Empty(t, v.Violations)
	require.GreaterOrEqual(t, v.WaitedSeconds, 0.5)
	require.Less(t, v.WaitedSeconds, 9.0)
}

func TestVerifyRedisRemaining(t *testing.T) {
	t.Parallel()
	ctx, _, rep, vc := verifyFixture(t, func(c *Config) { c.FlashSale = true })
	code := rep.Vouchers[0]
	rs := testenv.Redis(t)
	vc.RedisAddrs = []string{rs.Addr}
	vc.KeyPrefix = "benchtest:" + rep.prefix + ":"
	key := redisgate.RemainingKey(vc.KeyPrefix, code)

	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{rs.Addr}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)

	// Not loaded: nothing to compare.
	v, err := Verify(ctx, vc, rep)
	require.NoError(t, err)
	require.Empty(t, v.Violations)
	require.Nil(t, v.Vouchers[0].RedisRemaining)

	require.NoError(t, rdb.Do(ctx, rdb.B().Set().Key(key).Value("0").Build()).Error())
	v, err = Verify(ctx, vc, rep)
	require.NoError(t, err)
	require.Empty(t, v.Violations)
	require.Equal(t, int64(0), *v.Vouchers[0].RedisRemaining)

	require.NoError(t, rdb.Do(ctx, rdb.B().Set().Key(key).Value("3").Build()).Error())
	v, err = Verify(ctx, vc, rep)
	require.NoError(t, err)
	requireViolation(t, v, "Redis remaining 3 != totalLimit 60 - held 60 = 0")
}

func TestRunVerifiesWhenConfigured(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.Postgres(t)
	require.NoError(t, pgstore.Migrate(ctx, pg.URL))
	_, srv := newFakeServer(t)
	cfg := baseConfig(srv.URL)
	cfg.Requests = 50
	cfg.TotalLimit = 10
	cfg.Verify = VerifyConfig{DatabaseURL: pg.URL, Wait: -1}
	// The fake writes nothing to the database, so the voucher is missing:
	// Run must report it as a violation, not as an error.
	rep, err := Run(ctx, cfg)
	require.NoError(t, err)
	require.NotNil(t, rep.Verification)
	require.False(t, rep.OK())
	requireViolation(t, rep.Verification, "voucher row missing")
}

// TestReportOK checks which reports pass: a reserve run only once verified
// clean, a no-op run always (it has nothing to verify).
func TestReportOK(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rep  Report
		want bool
	}{
		{"noop", Report{Target: RouteNoop}, true},
		{"reserve, not verified", Report{Target: RouteReserve}, false},
		{"reserve, verified clean", Report{Target: RouteReserve, Verification: &Verification{}}, true},
		{"reserve, violations", Report{Target: RouteReserve, Verification: &Verification{Violations: []string{"oversold"}}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, tc.rep.OK())
		})
	}
}

// A run with string customerIds is verified against the rows' customer.
func TestVerifyStringCustomerIDs(t *testing.T) {
	t.Parallel()
	ctx, conn, rep, vc := verifyFixture(t, func(c *Config) { c.StringCustomerIDs = true })
	require.Equal(t, int64(60), rep.Reserved)
	var customer string
	require.NoError(t, conn.QueryRow(ctx, `SELECT customer FROM voucher_redemption LIMIT 1`).Scan(&customer))
	require.True(t, strings.HasPrefix(customer, "cus-"), customer)
	v, err := Verify(ctx, vc, rep)
	require.NoError(t, err)
	require.Empty(t, v.Violations)
	_, err = conn.Exec(ctx, `UPDATE voucher_redemption SET customer = customer || 'x', customer_id = voucherd_customer_legacy(customer || 'x')
		WHERE order_id = (SELECT min(order_id) FROM voucher_redemption)`)
	require.NoError(t, err)
	v, err = Verify(ctx, vc, rep)
	require.NoError(t, err)
	requireViolation(t, v, "answered 201 for customer cus-")
}
