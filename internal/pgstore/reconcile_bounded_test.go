package pgstore_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/voucher"
)

// The stamp of a voucher's counter rows is what their marker reads until a
// write gives a use or takes one back (a reservation, a replacement, a
// release), locks the voucher row, or writes the budget's counter; a
// confirmation leaves it (the store's walk detects those by their
// updated_at). A stamp asked while a writer holds any lock on the voucher
// row is empty, at once.
func TestReconcileStampSeesEveryWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "STAMP", 20, 5, func(v *voucher.Voucher) { v.DiscountAmount, v.Budget.Amount = 1_000, 100_000 })
	stamp := func() string {
		t.Helper()
		st, err := s.StampCounters(ctx, "STAMP")
		require.NoError(t, err)
		require.NotEmpty(t, st)
		return st
	}
	marker := func() string {
		t.Helper()
		m, err := s.CountersMarker(ctx, "STAMP")
		require.NoError(t, err)
		return m
	}
	st := stamp()
	_, err := s.ReconcileCounts(ctx, "STAMP")
	require.NoError(t, err)
	require.Equal(t, st, marker(), "reads change nothing")
	require.Equal(t, st, marker())

	_, err = s.Reserve(ctx, request("STAMP", 1, "s-1"), now, ttl)
	require.NoError(t, err)
	require.NotEqual(t, st, marker(), "a reservation")
	_, err = s.Reserve(ctx, request("STAMP", 2, "s-2"), now, ttl)
	require.NoError(t, err)

	st = stamp()
	_, err = s.Confirm(ctx, "STAMP", "s-2", now)
	require.NoError(t, err)
	require.Equal(t, st, marker(), "a confirmation locks only its redemption")

	st = stamp()
	req := request("STAMP", 1, "s-3")
	req.ReplacesOrderID = "s-1"
	_, err = s.Reserve(ctx, req, now, ttl)
	require.NoError(t, err)
	require.NotEqual(t, st, marker(), "a replacement")

	st = stamp()
	_, released, err := s.Release(ctx, "STAMP", "s-3", now)
	require.NoError(t, err)
	require.True(t, released)
	require.NotEqual(t, st, marker(), "a release")

	st = stamp()
	_, err = s.Pool().Exec(ctx, `UPDATE voucher_limit SET held = held WHERE voucher_code = 'STAMP'`)
	require.NoError(t, err)
	require.NotEqual(t, st, marker(), "a write of the budget's counter")

	for _, lock := range []string{"FOR KEY SHARE", "FOR NO KEY UPDATE"} {
		st = stamp()
		tx, err := s.Pool().Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SELECT 1 FROM voucher WHERE code = 'STAMP' `+lock)
		require.NoError(t, err)
		busy, err := s.StampCounters(ctx, "STAMP")
		require.NoError(t, err)
		require.Empty(t, busy, "stamped while locked %s", lock)
		require.NoError(t, tx.Commit(ctx))
		require.NotEqual(t, st, marker(), "locked %s after the stamp", lock)
	}
	none, err := s.StampCounters(ctx, "NOPE")
	require.NoError(t, err)
	require.Empty(t, none)
}

// planCost runs EXPLAIN (ANALYZE, BUFFERS) of q and returns the shared
// blocks its plan touched (its functions' included) and the rows its plan
// nodes read from voucher_redemption and its indexes.
func planCost(t testing.TB, s *pgstore.Store, q string, args ...any) (blocks, rows int64) {
	t.Helper()
	var out []byte
	err := pgx.BeginFunc(context.Background(), s.Pool(), func(tx pgx.Tx) error {
		return tx.QueryRow(context.Background(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+q, args...).Scan(&out)
	})
	require.NoError(t, err)
	var plans []struct {
		Plan map[string]any `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(out, &plans))
	top := plans[0].Plan
	num := func(n map[string]any, k string) int64 { f, _ := n[k].(float64); return int64(f) }
	blocks = num(top, "Shared Hit Blocks") + num(top, "Shared Read Blocks")
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if n["Relation Name"] == "voucher_redemption" {
			rows += num(n, "Actual Rows") * max(num(n, "Actual Loops"), 1)
		}
		children, _ := n["Plans"].([]any)
		for _, c := range children {
			walk(c.(map[string]any))
		}
	}
	walk(top)
	return blocks, rows
}

// Every statement a reconciliation pass runs besides its pages reads a few
// rows, however many redemptions the voucher has: the counters
// (reconcile_counts), the marker and the drift's bracket (voucher_holds)
// touch the same few blocks at n held rows as at none, while the read of a
// voucher with its live counts (voucher_get, which the admin endpoint no
// longer makes) reads every one of them. VOUCHERD_RECONCILE_PLAN_ROWS sets
// n (default 20,000); the figures are logged.
func TestReconcileCountsReadNoRedemptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := 20_000
	if v := os.Getenv("VOUCHERD_RECONCILE_PLAN_ROWS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	s := newStore(t)
	newVoucher(t, s, "HUGE", int32(n+10), 1, func(v *voucher.Voucher) { v.DiscountAmount, v.Budget.Amount = 10, int64(n+10)*10 })
	newVoucher(t, s, "EMPTY", 10, 1, func(v *voucher.Voucher) { v.DiscountAmount, v.Budget.Amount = 10, 100 })
	// n held rows, two in three RESERVED, written as the functions would
	// leave them (used_count and the budget's held by the triggers' rule).
	_, err := s.Pool().Exec(ctx, `
		INSERT INTO voucher_redemption (order_id, voucher_code, customer, customer_id, order_amount, discount_amount,
		                                status, created_at, updated_at, expires_at)
		SELECT 'h-' || i, 'HUGE', 'c' || i, voucherd_customer_legacy('c' || i), 1000, 10,
		       CASE WHEN i % 3 = 0 THEN 'CONFIRMED' ELSE 'RESERVED' END,
		       $2::timestamptz + i * interval '1 ms', $2::timestamptz + i * interval '1 ms', $2::timestamptz + interval '1 day'
		FROM generate_series(1, $1::integer) AS i`, n, now)
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `
		INSERT INTO voucher_customer_usage (voucher_code, customer, customer_id, held)
		SELECT 'HUGE', 'c' || i, voucherd_customer_legacy('c' || i), 1 FROM generate_series(1, $1::integer) AS i`, n)
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `UPDATE voucher SET used_count = $1 WHERE code = 'HUGE'`, n)
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `ANALYZE voucher_redemption`)
	require.NoError(t, err)
	c, err := s.ReconcileCounts(ctx, "HUGE")
	require.NoError(t, err)
	require.EqualValues(t, n, c.Held)
	require.EqualValues(t, n*10, c.BudgetHeld)

	read := func(name string) string {
		b, err := os.ReadFile("queries/" + name + ".sql")
		require.NoError(t, err)
		return string(b)
	}
	for _, name := range []string{"reconcile_counts", "reconcile_marker", "voucher_holds"} {
		q := read(name)
		emptyBlocks, _ := planCost(t, s, q, "EMPTY")
		blocks, rows := planCost(t, s, q, "HUGE")
		t.Logf("%s at %d held rows: %d shared blocks, %d rows of voucher_redemption (%d blocks at none)", name, n, blocks, rows, emptyBlocks)
		require.Zero(t, rows, "%s reads no redemption in its plan", name)
		require.LessOrEqual(t, blocks, emptyBlocks+8, "%s touches about what it touches at no rows", name)
	}
	const page = 500
	ids := make([]string, page)
	for i := range ids {
		ids[i] = "h-" + strconv.Itoa(n/2+i)
	}
	for _, q := range []struct {
		name string
		args []any
	}{
		{"held_page", []any{"HUGE", "RESERVED", now.Add(time.Duration(n/2) * time.Millisecond), "", page}},
		{"redemptions_among", []any{"HUGE", ids}},
	} {
		blocks, rows := planCost(t, s, read(q.name), q.args...)
		t.Logf("%s of %d at %d held rows: %d shared blocks, %d rows of voucher_redemption", q.name, page, n, blocks, rows)
		require.LessOrEqual(t, rows, int64(page), "%s reads a chunk", q.name)
	}
	blocks, rows := planCost(t, s, read("voucher_get"), "HUGE")
	t.Logf("voucher_get at %d held rows: %d shared blocks, %d rows of voucher_redemption", n, blocks, rows)
	require.GreaterOrEqual(t, rows, int64(n), "voucher_get counts every held row")
}
