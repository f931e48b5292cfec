package pgstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// integerRelease holds the SQL of the release whose customerIds were
// integers (commit 81f8d46): migrations, functions and statements.
const integerRelease = "testdata/release-81f8d46"

// oldBinary sends the statements of the integer release, through a pool
// configured as that release's store configured it (pgx's default statement
// cache), so that the statements it prepared before the upgrade are reused
// after it, as a running instance reuses them.
type oldBinary struct {
	t    *testing.T
	pool *pgxpool.Pool
	sql  map[string]string
}

func newOldBinary(t *testing.T, url string) *oldBinary {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	files, err := filepath.Glob(filepath.Join(integerRelease, "queries", "*.sql"))
	require.NoError(t, err)
	o := &oldBinary{t: t, pool: pool, sql: map[string]string{}}
	for _, f := range files {
		body, err := os.ReadFile(f)
		require.NoError(t, err)
		o.sql[strings.TrimSuffix(filepath.Base(f), ".sql")] = string(body)
	}
	return o
}

// migrate runs the integer release's migrator on its own files: the
// migrations it has not recorded, then each function whose text the
// database never had (or has as the current one but lacks), as
// migrate.go's Migrate of that release does. It is what an instance of that
// release does when it starts, before or during the upgrade.
func (o *oldBinary) migrate() {
	o.t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(0x766f75636865)); err != nil {
			return err
		}
		for _, q := range []string{
			`CREATE TABLE IF NOT EXISTS voucherd_migration (version integer PRIMARY KEY, name text NOT NULL,
			     applied_at timestamptz NOT NULL DEFAULT now())`,
			`CREATE TABLE IF NOT EXISTS voucherd_function (name text NOT NULL, checksum text NOT NULL,
			     seq bigserial NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (name, checksum))`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		migrations, err := filepath.Glob(filepath.Join(integerRelease, "migrations", "*.sql"))
		if err != nil {
			return err
		}
		name := regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.sql$`)
		for _, f := range migrations {
			m := name.FindStringSubmatch(filepath.Base(f))
			version, _ := strconv.Atoi(m[1])
			var done bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM voucherd_migration WHERE version = $1)", version).Scan(&done); err != nil {
				return err
			}
			if done {
				continue
			}
			body, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO voucherd_migration (version, name) VALUES ($1, $2)", version, m[2]); err != nil {
				return err
			}
		}
		functions, err := filepath.Glob(filepath.Join(integerRelease, "functions", "*.sql"))
		if err != nil {
			return err
		}
		for _, f := range functions {
			body, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			fn := strings.TrimSuffix(filepath.Base(f), ".sql")
			sum := sha256.Sum256(body)
			checksum := hex.EncodeToString(sum[:])
			var seen, current, exists bool
			if err := tx.QueryRow(ctx, `
				SELECT EXISTS (SELECT 1 FROM voucherd_function WHERE name = $1 AND checksum = $2),
				       coalesce((SELECT checksum = $2 FROM voucherd_function WHERE name = $1 ORDER BY seq DESC LIMIT 1), false),
				       EXISTS (SELECT 1 FROM pg_proc WHERE proname = $1 AND pronamespace = current_schema()::regnamespace)`,
				fn, checksum).Scan(&seen, &current, &exists); err != nil {
				return err
			}
			if seen && (!current || exists) {
				continue
			}
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO voucherd_function (name, checksum) VALUES ($1, $2)
				ON CONFLICT (name, checksum) DO UPDATE SET seq = DEFAULT, applied_at = now()`, fn, checksum); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(o.t, err)
}

// oldRow is a redemption as the integer release scans it.
type oldRow struct {
	OrderID, Code string
	Customer      int64
	Status        string
}

var ttlInterval = pgtype.Interval{Microseconds: ttl.Microseconds(), Valid: true}

// reserve sends the integer release's reserve statement; it answers the
// row, or the rejection's code (the MESSAGE of its VD00x error).
func (o *oldBinary) reserve(code string, customer int64, order string) (oldRow, string) {
	o.t.Helper()
	var r oldRow
	var amount, discount int64
	var created, updated, expires time.Time
	var replay bool
	var used, total int32
	err := o.pool.QueryRow(context.Background(), o.sql["reserve"], code, customer, order, int64(250_000), now, ttlInterval).
		Scan(&r.OrderID, &r.Code, &r.Customer, &amount, &discount, &r.Status, &created, &updated, &expires, &replay, &used, &total)
	return r, o.rejection(err)
}

// rejection is the code of a rejection raised by the functions, "" for
// none; any other error fails the test.
func (o *oldBinary) rejection(err error) string {
	o.t.Helper()
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "VD00"):
		return pgErr.Message
	}
	require.NoError(o.t, err)
	return ""
}

// rows runs one of the integer release's statements answering redemption
// rows (their first nine columns) and scans them as it does.
func (o *oldBinary) rows(name string, args ...any) []oldRow {
	o.t.Helper()
	rows, err := o.pool.Query(context.Background(), o.sql[name], args...)
	require.NoError(o.t, err)
	var out []oldRow
	for rows.Next() {
		vals, err := rows.Values()
		require.NoError(o.t, err)
		var r oldRow
		dest := make([]any, len(vals))
		dest[0], dest[1], dest[2], dest[5] = &r.OrderID, &r.Code, &r.Customer, &r.Status
		for i := range dest {
			if dest[i] == nil {
				dest[i] = new(any)
			}
		}
		require.NoError(o.t, rows.Scan(dest...), name)
		out = append(out, r)
	}
	require.NoError(o.t, rows.Err(), name)
	return out
}

// A database of the integer release upgraded by this one keeps every count,
// and while an instance of each release serves it (a rolling upgrade), the
// integer release's exact statements and this release's store share each
// customer's counter: the per-user limit holds across both, every counter
// matches its rows, and the integer release reads every row, a string
// customer's included.
func TestRollingUpgradeFromIntegerCustomers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.Postgres(t)
	old := newOldBinary(t, pg.URL)
	old.migrate()

	// Before the upgrade: the integer release alone.
	_, err := old.pool.Exec(ctx, old.sql["voucher_insert"], "ROLL", int64(100_000), int64(0), int32(40), int32(2),
		base, base.Add(30*24*time.Hour), false, false)
	require.NoError(t, err)
	for _, r := range []struct {
		customer int64
		order    string
	}{{1, "a1"}, {1, "a2"}, {2, "a3"}, {3, "a4"}} {
		_, rej := old.reserve("ROLL", r.customer, r.order)
		require.Empty(t, rej, r.order)
	}
	require.Len(t, old.rows("confirm", "ROLL", "a2", now), 1)
	require.Len(t, old.rows("release", "ROLL", "a4", now), 1)

	// This release migrates the database while the old instance keeps its
	// connections and prepared statements.
	s, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: 10})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.NoError(t, s.Migrate(ctx))
	t.Cleanup(func() { checkAllConsistent(t, s) })

	st := readState(t, s, "ROLL")
	require.Equal(t, map[string]int32{"1": 2, "2": 1, "3": 0}, st.Counters, "every count kept, by the decimal form")
	v, err := s.Voucher(ctx, "ROLL")
	require.NoError(t, err)
	require.Equal(t, int32(3), v.UsedCount)
	require.Equal(t, voucher.NormalizeNone, v.CustomerIDNormalization)
	red, err := s.Redemption(ctx, "ROLL", "a1")
	require.NoError(t, err)
	require.Equal(t, "1", red.CustomerID)

	newReserve := func(customer, order string) voucher.ErrorCode {
		t.Helper()
		_, err := s.Reserve(ctx, voucher.ReserveRequest{Code: "ROLL", CustomerID: customer, OrderID: order, OrderAmount: 250_000}, now, ttl)
		return voucher.CodeOf(err)
	}
	// One counter per customer, whichever release takes or gives back.
	require.Equal(t, voucher.CodeAlreadyUsed, newReserve("1", "b1"))
	_, rej := old.reserve("ROLL", 1, "a5")
	require.Equal(t, "ALREADY_USED", rej)
	require.Len(t, old.rows("release", "ROLL", "a1", now), 1)
	require.Equal(t, voucher.ErrorCode(""), newReserve("1", "b1"))
	_, rej = old.reserve("ROLL", 1, "a6")
	require.Equal(t, "ALREADY_USED", rej)
	_, released, err := s.Release(ctx, "ROLL", "b1", now)
	require.NoError(t, err)
	require.True(t, released)
	row, rej := old.reserve("ROLL", 1, "a6")
	require.Empty(t, rej)
	require.Equal(t, int64(1), row.Customer)

	require.Equal(t, voucher.ErrorCode(""), newReserve("4", "b2"))
	_, rej = old.reserve("ROLL", 4, "a7")
	require.Empty(t, rej)
	_, rej = old.reserve("ROLL", 4, "a8")
	require.Equal(t, "ALREADY_USED", rej)
	require.Equal(t, voucher.CodeAlreadyUsed, newReserve("4", "b3"))
	// Replays and conflicts across releases.
	row, rej = old.reserve("ROLL", 4, "b2")
	require.Empty(t, rej)
	require.Equal(t, oldRow{OrderID: "b2", Code: "ROLL", Customer: 4, Status: "RESERVED"}, row)
	_, rej = old.reserve("ROLL", 5, "b2")
	require.Equal(t, "ORDER_CONFLICT", rej)
	require.Equal(t, voucher.CodeOrderConflict, newReserve("04", "a7"), `"04" is not the customer 4`)
	require.Equal(t, voucher.ErrorCode(""), newReserve("4", "a7"), "a replay")

	// Each release confirms, releases and extends the other's orders.
	require.Equal(t, []oldRow{{OrderID: "b2", Code: "ROLL", Customer: 4, Status: "CONFIRMED"}}, old.rows("confirm", "ROLL", "b2", now))
	_, released, err = s.Release(ctx, "ROLL", "a7", now)
	require.NoError(t, err)
	require.True(t, released)
	require.Equal(t, voucher.ErrorCode(""), newReserve("2", "b4"))
	require.Len(t, old.rows("extend", "ROLL", "b4", now, now.Add(2*ttl), 2*time.Hour), 1)

	// A string customer: its rows carry a negative stand-in that the
	// integer release scans like any id and never sends.
	require.Equal(t, voucher.ErrorCode(""), newReserve("cus_X@shop.example", "b5"))
	got := old.rows("redemption_get", "ROLL", "b5")
	require.Len(t, got, 1)
	require.Less(t, got[0].Customer, int64(0))
	all := old.rows("redemptions_of_voucher", "ROLL")
	require.Len(t, all, len(readState(t, s, "ROLL").Redemptions))
	require.Len(t, old.rows("orders_get", []string{"a1", "b1", "b5"}), 3)
	require.ElementsMatch(t, []string{"a1", "a2", "b1", "a6"}, orderIDsOf(old.rows("admin_customer_redemptions", int64(1), 10)))
	var maxCustomer int64
	var maxHeld int32
	require.NoError(t, old.pool.QueryRow(ctx, old.sql["voucher_max_customer_held"], "ROLL").Scan(&maxCustomer, &maxHeld))
	require.Equal(t, int32(2), maxHeld)

	// The integer release's batch (write combining) and Kafka writes share
	// the counters too.
	var answers []string
	rows, err := old.pool.Query(ctx, old.sql["reserve_batch"], "ROLL", []int64{5, 5, 5}, []string{"a9", "a10", "a11"},
		[]int64{250_000, 250_000, 250_000}, []time.Time{now, now, now}, ttlInterval)
	require.NoError(t, err)
	for rows.Next() {
		vals, err := rows.Values()
		require.NoError(t, err)
		require.Equal(t, int64(5), vals[2], "o_customer_id")
		answers = append(answers, vals[10].(string))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"", "", "ALREADY_USED"}, answers)
	require.Equal(t, voucher.CodeAlreadyUsed, newReserve("5", "b6"))

	ev := func(customer int64, order string) voucher.ReservedEvent {
		return voucher.ReservedEvent{Version: 1, Code: "ROLL", CustomerID: strconv.FormatInt(customer, 10), OrderID: order,
			OrderAmount: 250_000, DiscountAmount: 100_000, ReservedAt: now, ExpiresAt: now.Add(ttl)}
	}
	rows, err = old.pool.Query(ctx, old.sql["apply_reserved"], []string{"a12"}, []string{"ROLL"}, []int64{6},
		[]int64{250_000}, []int64{100_000}, []time.Time{now}, []time.Time{now.Add(ttl)})
	require.NoError(t, err)
	rows.Close()
	require.NoError(t, rows.Err())
	results, err := s.ApplyReserved(ctx, []voucher.ReservedEvent{ev(6, "b7")})
	require.NoError(t, err)
	require.Equal(t, voucher.Applied, results[0].Outcome)
	require.Equal(t, voucher.CodeAlreadyUsed, newReserve("6", "b8"))

	// The integer release fences an order itself (a row with customer_id
	// only): the trigger fills customer.
	require.Len(t, old.rows("abandon_order", "a13", "ROLL", int64(7), int64(250_000), int64(100_000), now, now.Add(ttl), now), 1)
	red, err = s.Redemption(ctx, "ROLL", "a13")
	require.NoError(t, err)
	require.Equal(t, "7", red.CustomerID)
	require.Equal(t, voucher.StatusReleased, red.Status)

	// An instance of the integer release that starts now runs its migrator:
	// it leaves this release's schema and functions as they are.
	before := catalog(t, s)
	old.migrate()
	require.Equal(t, before, catalog(t, s))

	// Either release's expiry sweep gives every customer's use back once.
	_ = old.rows("expire", now.Add(24*time.Hour), 1000)
	_, err = s.ExpireDue(ctx, now.Add(24*time.Hour), 1000)
	require.NoError(t, err)
	st = readState(t, s, "ROLL")
	for c, n := range st.Counters {
		want := map[string]int32{"1": 1, "4": 1}[c] // a2 and b2 are confirmed
		require.Equal(t, want, n, "customer %s", c)
	}

	// Both releases at once on one voucher: customers of both forms race.
	_, err = old.pool.Exec(ctx, old.sql["voucher_insert"], "RACE", int64(100_000), int64(0), int32(30), int32(3),
		base, base.Add(30*24*time.Hour), false, false)
	require.NoError(t, err)
	var mu sync.Mutex
	taken := map[string]int{}
	concurrently(8, func(w int) error {
		for i := range 30 {
			customer := int64(1 + (w+i)%6)
			order := fmt.Sprintf("r-%d-%d", w, i)
			var ok bool
			if (w+i)%2 == 0 {
				_, rej := old.reserve("RACE", customer, order)
				ok = rej == ""
			} else {
				_, err := s.Reserve(ctx, voucher.ReserveRequest{Code: "RACE", CustomerID: strconv.FormatInt(customer, 10),
					OrderID: order, OrderAmount: 250_000}, now, ttl)
				ok = err == nil
			}
			if ok {
				mu.Lock()
				taken[strconv.FormatInt(customer, 10)]++
				mu.Unlock()
			}
		}
		return nil
	})
	st = readState(t, s, "RACE")
	require.Equal(t, int32(18), st.Counts.UsedCount, "6 customers x perUserLimit 3, below totalLimit 30")
	for c, n := range taken {
		require.Equal(t, 3, n, "customer %s", c)
		require.Equal(t, int32(3), st.Counters[c], "customer %s", c)
	}

	// The integer release's own invariant check agrees with this one's.
	rows, err = old.pool.Query(ctx, old.sql["invariants"], []string{"ROLL", "RACE"})
	require.NoError(t, err)
	breaches, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var kind, code, message string
		err := row.Scan(&kind, &code, &message)
		return message, err
	})
	require.NoError(t, err)
	require.Empty(t, breaches)
	bad, err := pgstore.Violations(ctx, s.Pool(), "ROLL", "RACE")
	require.NoError(t, err)
	require.Empty(t, bad)
}

func orderIDsOf(rows []oldRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.OrderID
	}
	return out
}
