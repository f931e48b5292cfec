package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// On a database whose tables were never analyzed (a new deployment, a fresh
// bench or test stack: autovacuum's first visit comes up to a minute later),
// a plan PostgreSQL caches for a lookup by an array of orderIds while the
// table is nearly empty scans the whole table, and a stored function keeps
// reusing it as the table grows: every call then reads every row. The
// consumer's apply and the expiry sweep, called from the first event on,
// must still look orderIds up by the primary key once the table is large.
func TestArrayLookupsStayIndexedOnAYoungTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.Postgres(t)
	s, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: 1}) // one connection: one plan cache
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	newVoucher(t, s, "YOUNG", 1_000_000, 1)
	conn, err := pgx.Connect(ctx, pg.URL)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })

	rows, expired := 0, 0
	sale := func(calls int) {
		for i := range calls {
			batch := make([]voucher.ReservedEvent, 1+(i*7)%40)
			for j := range batch {
				batch[j] = event("YOUNG", int64(rows+1), fmt.Sprintf("young-%d", rows))
				rows++
			}
			results, err := s.ApplyReserved(ctx, batch)
			require.NoError(t, err)
			require.Len(t, results, len(batch))
			released, err := s.ExpireDue(ctx, now.Add(ttl+time.Second), 3)
			require.NoError(t, err)
			expired += len(released)
		}
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
	sale(30)

	c := readCounts(t, s, "YOUNG")
	require.Greater(t, expired, 3*50, "the sweep released due rows")
	require.Equal(t, counts{UsedCount: int32(rows - expired), Held: int32(rows - expired), Rows: int32(rows),
		UsageRows: c.UsageRows, CustomerSum: int32(rows - expired)}, c)
	s.Close()

	// A backend reports its table statistics when it exits.
	require.Eventually(t, func() bool {
		var others int
		require.NoError(t, conn.QueryRow(ctx,
			"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()").Scan(&others))
		return others == 0
	}, 10*time.Second, 20*time.Millisecond)
	var scans, read int64
	require.NoError(t, conn.QueryRow(ctx,
		"SELECT seq_scan, seq_tup_read FROM pg_stat_user_tables WHERE relname = 'voucher_redemption'").Scan(&scans, &read))
	// Scans of the small table are the planner's choice and cheap; one scan
	// of the grown table alone reads more than this.
	require.Less(t, read, int64(grown),
		"%d sequential scans of voucher_redemption read %d rows: a plan made for the small table scans the grown one", scans, read)
}
