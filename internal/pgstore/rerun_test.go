package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
)

// TestReserveRunsAgainAfterDeadlock makes PostgreSQL pick a reservation as
// the victim of a real deadlock and checks that the store runs the statement
// again by itself: the caller gets its 201, not a 503, and the use is taken
// once.
func TestReserveRunsAgainAfterDeadlock(t *testing.T) {
	t.Parallel()
	forEachCombining(t, func(t *testing.T, s *pgstore.Store) {
		ctx := context.Background()
		newVoucher(t, s, "DEADLOCK", 10, 2)
		_, err := s.Reserve(ctx, request("DEADLOCK", 7, "first"), now, ttl)
		require.NoError(t, err)

		other, err := s.Pool().Acquire(ctx)
		require.NoError(t, err)
		t.Cleanup(other.Release)
		watch, err := s.Pool().Acquire(ctx)
		require.NoError(t, err)
		t.Cleanup(watch.Release)

		// The reservation must be the deadlock's victim: the transaction
		// whose deadlock check runs first is, so this session checks late.
		_, err = other.Exec(ctx, `SET deadlock_timeout = '10s'`)
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = other.Exec(context.Background(), `RESET deadlock_timeout`) })

		// Another transaction holds customer 7's counter...
		tx, err := other.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		_, err = tx.Exec(ctx, `UPDATE voucher_customer_usage SET held = held WHERE voucher_code = 'DEADLOCK' AND customer = '7'`)
		require.NoError(t, err)

		// ...so the reservation, having inserted order "second", waits for it.
		type result struct{ err error }
		done := make(chan result, 1)
		go func() {
			_, err := s.Reserve(ctx, request("DEADLOCK", 7, "second"), now, ttl)
			done <- result{err}
		}()
		require.Eventually(t, func() bool {
			select {
			case r := <-done:
				require.FailNow(t, "the reservation ended before it waited for the counter's lock", "err: %v", r.err)
			default:
			}
			// Blocked by the other transaction itself, which holds nothing
			// but the counter: a wait for another lock (a relation's
			// extension, on loaded cores) comes before "second" is inserted.
			var n int
			err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'
				  AND query LIKE '%voucherd_reserve%' AND $1::integer = ANY (pg_blocking_pids(pid))`,
				other.Conn().PgConn().PID()).Scan(&n)
			if err != nil || n > 1 {
				t.Logf("waiting reservations: %d, err: %v", n, err)
			}
			return err == nil && n == 1
		}, 10*time.Second, 10*time.Millisecond)
		// The other transaction now wants order "second": a deadlock.
		// PostgreSQL rolls the reservation back, this insert goes through.
		_, err = tx.Exec(ctx, `INSERT INTO voucher_redemption
			(order_id, voucher_code, customer_id, order_amount, discount_amount, status, created_at, updated_at, expires_at)
			VALUES ('second', 'DEADLOCK', 7, 250000, 100000, 'RESERVED', now(), now(), now() + interval '15 minutes')`)
		require.NoError(t, err, "the reservation should have been the deadlock's victim")
		// Run again at least once (a rerun may itself be rolled back by the
		// server before it waits for "second"); the count is reported.
		if !assert.Eventually(t, func() bool { return s.StatementReruns() >= 1 }, 10*time.Second, time.Millisecond) {
			t.Fatalf("statement reruns: %d", s.StatementReruns())
		}

		// Run again, the reservation waits for the other transaction's
		// "second"; once that is rolled back, it takes its use.
		require.NoError(t, tx.Rollback(ctx))
		select {
		case r := <-done:
			require.NoError(t, r.err, "the reservation must not see the deadlock")
		case <-time.After(10 * time.Second):
			t.Fatal("the reservation did not finish")
		}
		red, err := s.Redemption(ctx, "DEADLOCK", "second")
		require.NoError(t, err)
		require.Equal(t, "7", red.CustomerID)
		assertConsistent(t, s, "DEADLOCK")
		require.EqualValues(t, 2, readCounts(t, s, "DEADLOCK").UsedCount)
	})
}
