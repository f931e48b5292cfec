package pgstore_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// base is the start of every test voucher's window; now is an instant inside
// it. Clocks are passed in, so the tests never depend on the wall clock.
var (
	base = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now  = base.Add(time.Hour)
)

const ttl = 15 * time.Minute

// combiningEnv selects how the tests that do not say otherwise write
// reservations: VOUCHERD_TEST_COMBINING=off runs them with write combining
// disabled, anything else (or unset) with the default, combining on. The
// concurrency tests ignore it and run both ways (forEachCombining); run the
// whole suite both ways with
//
//	go test ./internal/pgstore/ && VOUCHERD_TEST_COMBINING=off go test ./internal/pgstore/
const combiningEnv = "VOUCHERD_TEST_COMBINING"

// combinings are the two ways Reserve writes, by subtest name.
var combinings = []struct {
	name string
	cfg  pgstore.CombinerConfig
}{
	{"combining=on", pgstore.CombinerConfig{}},
	{"combining=off", pgstore.CombinerConfig{Disabled: true}},
}

// newStore returns a migrated store on a fresh database of its own, with
// write combining as combiningEnv says.
func newStore(t testing.TB) *pgstore.Store {
	t.Helper()
	var cfg pgstore.CombinerConfig
	switch v := os.Getenv(combiningEnv); v {
	case "", "on":
	case "off":
		cfg.Disabled = true
	default:
		t.Fatalf("%s must be on or off, got %q", combiningEnv, v)
	}
	return newStoreWith(t, cfg)
}

// newStoreWith returns a migrated store on a fresh database of its own with
// the given write combining. When the test ends, every voucher of the
// database must be consistent (assertConsistent).
func newStoreWith(t testing.TB, combining pgstore.CombinerConfig) *pgstore.Store {
	t.Helper()
	return newStoreOn(t, testenv.Postgres(t), combining)
}

// newStoreOn is newStoreWith on the database pg.
func newStoreOn(t testing.TB, pg *testenv.PG, combining pgstore.CombinerConfig) *pgstore.Store {
	t.Helper()
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: 10, Combining: combining})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.NoError(t, s.Migrate(ctx))
	t.Cleanup(func() { checkAllConsistent(t, s) })
	return s
}

// forEachCombining runs test in a parallel subtest for each way of writing
// reservations, each with its own store.
func forEachCombining(t *testing.T, test func(t *testing.T, s *pgstore.Store)) {
	for _, c := range combinings {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			test(t, newStoreWith(t, c.cfg))
		})
	}
}

// newVoucher creates a voucher valid over [base, base+30 days) with the given
// limits; edit adjusts it before creation.
func newVoucher(t testing.TB, s *pgstore.Store, code string, totalLimit, perUserLimit int32, edit ...func(*voucher.Voucher)) voucher.Voucher {
	t.Helper()
	v := voucher.Voucher{
		Code: code, DiscountAmount: 100_000, TotalLimit: totalLimit, PerUserLimit: perUserLimit,
		StartsAt: base, EndsAt: base.Add(30 * 24 * time.Hour),
	}
	for _, f := range edit {
		f(&v)
	}
	created, err := s.CreateVoucher(context.Background(), v)
	require.NoError(t, err)
	return created
}

func request(code string, customer int64, orderID string) voucher.ReserveRequest {
	return voucher.ReserveRequest{Code: code, CustomerID: strconv.FormatInt(customer, 10), OrderID: orderID, OrderAmount: 250_000}
}

// requireCode asserts that err is a *voucher.Error with the code.
func requireCode(t testing.TB, err error, code voucher.ErrorCode) *voucher.Error {
	t.Helper()
	require.Error(t, err)
	var ve *voucher.Error
	require.True(t, errors.As(err, &ve), "not a *voucher.Error: %v", err)
	require.Equal(t, code, ve.Code, "error: %v", err)
	return ve
}

// counts is what the database holds for one voucher.
type counts struct {
	UsedCount   int32
	Held        int32 // RESERVED + CONFIRMED rows
	Rows        int32 // all redemption rows
	UsageRows   int32 // voucher_customer_usage rows, any held
	CustomerSum int32 // sum of the customer counters
}

func readCounts(t testing.TB, s *pgstore.Store, code string) counts {
	t.Helper()
	var c counts
	err := s.Pool().QueryRow(context.Background(), `
		SELECT v.used_count,
		       (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = v.code AND r.status IN ('RESERVED', 'CONFIRMED'))::int,
		       (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = v.code)::int,
		       (SELECT count(*) FROM voucher_customer_usage u WHERE u.voucher_code = v.code)::int,
		       (SELECT coalesce(sum(held), 0) FROM voucher_customer_usage u WHERE u.voucher_code = v.code)::int
		FROM voucher v WHERE v.code = $1`, code).Scan(&c.UsedCount, &c.Held, &c.Rows, &c.UsageRows, &c.CustomerSum)
	require.NoError(t, err)
	return c
}

// assertConsistent checks the invariants of the stored counters for one
// voucher (pgstore.Violations).
func assertConsistent(t testing.TB, s *pgstore.Store, code string) {
	t.Helper()
	bad, err := pgstore.Violations(context.Background(), s.Pool(), code)
	require.NoError(t, err)
	require.Empty(t, bad, "voucher %s", code)
}

// checkAllConsistent checks the invariants of the stored counters for every
// voucher of the store's database, reported with Errorf so that it can run
// in a cleanup.
func checkAllConsistent(t testing.TB, s *pgstore.Store) {
	t.Helper()
	bad, err := pgstore.Violations(context.Background(), s.Pool())
	if err != nil {
		t.Errorf("consistency check: %v", err)
		return
	}
	for _, b := range bad {
		t.Errorf("inconsistent: %s", b.Message)
	}
}

// concurrently runs fn(i) for i in [0, n) in n goroutines released at once,
// and returns the results in order.
func concurrently[T any](n int, fn func(i int) T) []T {
	out := make([]T, n)
	var start, done sync.WaitGroup
	start.Add(1)
	done.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer done.Done()
			start.Wait()
			out[i] = fn(i)
		}()
	}
	start.Done()
	done.Wait()
	return out
}

type reserveResult struct {
	res voucher.Reservation
	err error
}

func TestOpenConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := pgstore.Open(ctx, pgstore.Config{})
	require.ErrorContains(t, err, "URL is required")
	_, err = pgstore.Open(ctx, pgstore.Config{URL: "postgres://127.0.0.1/x", MaxConns: -1})
	require.Error(t, err)
	_, err = pgstore.Open(ctx, pgstore.Config{URL: "postgres://127.0.0.1/x", MaxConns: 2, MinConns: 3})
	require.Error(t, err)
	_, err = pgstore.Open(ctx, pgstore.Config{URL: "::not a url"})
	require.Error(t, err)
}

// A database that does not answer is CodeUnavailable, with the cause kept.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Port 1 on loopback: nothing listens there, the connection is refused.
	s, err := pgstore.Open(ctx, pgstore.Config{URL: "postgres://postgres@127.0.0.1:1/x?sslmode=disable", ConnectTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer s.Close()

	ve := requireCode(t, s.Ping(ctx), voucher.CodeUnavailable)
	require.NotNil(t, ve.Err, "the cause is kept")
	_, err = s.Reserve(ctx, request("X", 1, "o-1"), now, ttl)
	requireCode(t, err, voucher.CodeUnavailable)
	_, err = s.Voucher(ctx, "X")
	requireCode(t, err, voucher.CodeUnavailable)
}

func TestMigrateIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.Postgres(t)
	stores := make([]*pgstore.Store, 3)
	for i := range stores {
		s, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: 2})
		require.NoError(t, err)
		defer s.Close()
		stores[i] = s
	}
	errs := concurrently(len(stores), func(i int) error { return stores[i].Migrate(ctx) })
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, stores[0].Migrate(ctx), "a second run is a no-op")
	require.NoError(t, pgstore.Migrate(ctx, pg.URL))

	migrations, err := pgstore.Migrations()
	require.NoError(t, err)
	require.NotEmpty(t, migrations)
	var n int
	require.NoError(t, stores[0].Pool().QueryRow(ctx, "SELECT count(*) FROM voucherd_migration").Scan(&n))
	require.Equal(t, len(migrations), n, "each migration recorded once")
	for i, m := range migrations {
		require.Equal(t, i+1, m.Version, "versions are 1..n without gaps")
	}
}

func TestQueriesCounter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "COUNT", 10, 1)
	before := s.Queries()
	for i := 0; i < 5; i++ {
		_, err := s.Voucher(ctx, "COUNT")
		require.NoError(t, err)
	}
	require.Equal(t, int64(5), s.Queries()-before, "one statement per Voucher read")
	before = s.Queries()
	_, err := s.Reserve(ctx, request("COUNT", 1, "o-1"), now, ttl)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.Queries()-before, "reserve is one statement")
}
