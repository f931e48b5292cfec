package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// On a database whose tables were never analyzed (a new deployment, a fresh
// bench or test stack: autovacuum's first visit comes up to a minute later),
// a plan PostgreSQL caches for a statement while voucher_redemption is nearly
// empty may scan the whole table, and a pooled connection or a stored
// function keeps reusing it as the table grows: every call then reads every
// row. The store's paths, used from the first reservation on, must still
// find their rows through indexes once the table is large.
func TestStorePathsStayIndexedOnAYoungTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.Postgres(t)
	const conns = 1 // one connection: every call meets the plans of the calls before
	s, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: conns})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.NoError(t, s.Migrate(ctx))
	newVoucher(t, s, "YOUNG", 1_000_000, 1)
	newVoucher(t, s, "STD", 1_000_000, 1)
	newVoucher(t, s, "TINY", 1, 1)
	_, err = s.Reserve(ctx, request("TINY", 1, "tiny-1"), now, 24*time.Hour) // never due for the sweep below
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, pg.URL)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })

	applied, expired, taken := 0, 0, 0
	sale := func(calls int) {
		for i := range calls {
			// Kafka mode: the consumer's apply, the orderId lookups (concurrent
			// ones share a statement: arrays of many sizes), the sweep.
			batch := make([]voucher.ReservedEvent, 1+(i*7)%40)
			for j := range batch {
				batch[j] = event("YOUNG", int64(applied+1), fmt.Sprintf("young-%d", applied))
				applied++
			}
			results, err := s.ApplyReserved(ctx, batch)
			require.NoError(t, err)
			require.Len(t, results, len(batch))
			for _, err := range concurrently(1+(i*13)%64, func(k int) error {
				_, err := s.Order(ctx, fmt.Sprintf("young-%d", (k*7919)%applied))
				return err
			}) {
				require.NoError(t, err)
			}
			released, err := s.ExpireDue(ctx, now.Add(ttl+time.Second), 3)
			require.NoError(t, err)
			expired += len(released)

			// Standard mode: combined reservations, a confirmation, a
			// release, a replay, a refusal while a use is held.
			for _, r := range concurrently(1+(i*5)%20, func(k int) error {
				_, err := s.Reserve(ctx, request("STD", int64(taken+k+1), fmt.Sprintf("std-%d", taken+k)), now, ttl)
				return err
			}) {
				require.NoError(t, r)
			}
			taken += 1 + (i*5)%20
			_, err = s.Confirm(ctx, "STD", fmt.Sprintf("std-%d", taken-1), now)
			require.NoError(t, err)
			if taken >= 2 {
				_, _, err = s.Release(ctx, "STD", fmt.Sprintf("std-%d", taken-2), now)
				require.NoError(t, err)
			}
			_, err = s.Redemption(ctx, "STD", fmt.Sprintf("std-%d", taken-1))
			require.NoError(t, err)
			_, err = s.Reserve(ctx, request("TINY", int64(1000+i), fmt.Sprintf("tiny-x-%d", i)), now, ttl)
			requireCode(t, err, voucher.CodeHeldOut)
			_, err = s.Voucher(ctx, "STD")
			require.NoError(t, err)
			// Reconciliation: a page of held rows, a chunk of orderIds.
			_, err = s.HeldPage(ctx, "YOUNG", voucher.StatusReserved, voucher.PageKey{OrderID: fmt.Sprint(i)}, 50)
			require.NoError(t, err)
			_, err = s.RedemptionsAmong(ctx, "YOUNG", []string{fmt.Sprintf("young-%d", i), fmt.Sprintf("young-%d", applied-1)})
			require.NoError(t, err)
		}
	}
	// rowsRead returns the rows sequential scans read from voucher_redemption
	// and the rows read from voucher_customer_usage by any scan.
	rowsRead := func() (int64, int64) {
		// Each backend reports its table statistics when it goes idle
		// after pg_stat_force_next_flush.
		held := make([]*pgxpool.Conn, conns)
		for i := range held {
			held[i], err = s.Pool().Acquire(ctx)
			require.NoError(t, err)
			_, err = held[i].Exec(ctx, "SELECT pg_stat_force_next_flush()")
			require.NoError(t, err)
		}
		for _, c := range held {
			c.Release()
		}
		_, err := conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()")
		require.NoError(t, err)
		var seq, counters int64
		require.NoError(t, conn.QueryRow(ctx,
			"SELECT seq_tup_read FROM pg_stat_user_tables WHERE relname = 'voucher_redemption'").Scan(&seq))
		require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)
			FROM pg_stat_user_tables WHERE relname = 'voucher_customer_usage'`).Scan(&counters))
		return seq, counters
	}

	sale(30) // the plans are made while the table is small

	// The table grows (released rows of another voucher, which neither the
	// counters nor the sweep's index see).
	const grown = 200_000
	newVoucher(t, s, "BULK", 1, 1)
	_, err = conn.Exec(ctx, `
		INSERT INTO voucher_redemption (order_id, voucher_code, customer, customer_id, order_amount, discount_amount,
		                                status, created_at, updated_at, expires_at)
		SELECT 'bulk-' || g, 'BULK', 'c' || g, g, 100, 10, 'RELEASED', $1, $1, $1
		FROM generate_series(1, $2::integer) g`, now, grown)
	require.NoError(t, err)
	// So do the usage counters of the voucher the standard path reserves
	// (customers who hold nothing): a plan that finds a batch's counters by
	// the voucher alone, then filters by customer, reads all of them.
	_, err = conn.Exec(ctx, `
		INSERT INTO voucher_customer_usage (voucher_code, customer, customer_id, held)
		SELECT 'STD', 'bulk-' || g, voucherd_customer_legacy('bulk-' || g), 0 FROM generate_series(1, $1::integer) g`, grown)
	require.NoError(t, err)
	seqBefore, countersBefore := rowsRead()
	sale(30)
	seqAfter, countersAfter := rowsRead()
	read, counters := seqAfter-seqBefore, countersAfter-countersBefore

	require.Greater(t, expired, 3*40, "the sweep released due rows")
	require.Equal(t, int32(applied), readCounts(t, s, "YOUNG").Rows)
	assertConsistent(t, s, "YOUNG")
	assertConsistent(t, s, "STD")
	// Sequential scans of a table this size are the planner's choice; one
	// scan of the grown table alone reads more than this.
	require.Less(t, read, int64(grown),
		"after the table grew, sequential scans of voucher_redemption read %d rows: a plan made for the small table scans the grown one", read)
	require.Less(t, counters, int64(grown),
		"after the counters grew, reading voucher_customer_usage took %d rows: a plan made for the small table scans the grown one", counters)

	// Autovacuum measures the growing tables only once they are past a
	// page (migration 013), so that no plan is made for a measured one-page
	// table.
	for _, table := range []string{"voucher_redemption", "voucher_customer_usage"} {
		var opts []string
		require.NoError(t, conn.QueryRow(ctx, "SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass", table).Scan(&opts))
		require.Subset(t, opts, []string{"autovacuum_analyze_threshold=1000", "autovacuum_vacuum_threshold=1000",
			"autovacuum_vacuum_insert_threshold=1000"}, table)
	}
}
