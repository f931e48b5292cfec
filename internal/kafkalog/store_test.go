package kafkalog

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// The whole Kafka path against the real store: events published by the
// producer are written by the consumer through pgstore.ApplyReserved, the
// events PostgreSQL refuses go to the dead-letter topic, and a redelivery of
// the whole topic to a fresh group changes nothing in the database.
func TestConsumerWithPostgresStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.Postgres(t)
	store, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	require.NoError(t, store.Migrate(ctx))

	now := time.Now().UTC().Truncate(time.Microsecond)
	const code, limit = "PGKAFKA", 40
	_, err = store.CreateVoucher(ctx, voucher.Voucher{
		Code: code, DiscountAmount: 100_000, TotalLimit: limit, PerUserLimit: 1,
		StartsAt: now.Add(-time.Hour), EndsAt: now.Add(24 * time.Hour),
	})
	require.NoError(t, err)

	// Two more events than uses (the CHECK constraint refuses them) and one
	// for a voucher that does not exist.
	var evs []voucher.ReservedEvent
	for i := range limit + 2 {
		evs = append(evs, voucher.EventFromHold(code, voucher.Hold{
			OrderID: fmt.Sprintf("pg-order-%d", i), CustomerID: strconv.Itoa(i + 1),
			OrderAmount: 250_000, DiscountAmount: 100_000,
			ReservedAt: now, ExpiresAt: now.Add(15 * time.Minute),
		}))
	}
	ghost := evs[0]
	ghost.Code, ghost.OrderID = "GHOST", "pg-ghost"
	evs = append(evs, ghost)

	cfg := testConfig(t, testenv.Kafka(t).Brokers, 3)
	l := newLog(t, cfg)
	publishAll(t, l, evs)
	require.Error(t, l.CaughtUp(ctx))

	c := newConsumer(t, cfg, store)
	c.Start(ctx)
	require.Eventually(t, func() bool { return l.CaughtUp(ctx) == nil }, 60*time.Second, 50*time.Millisecond)
	c.Stop()
	st := c.Stats()
	require.EqualValues(t, limit, st.Applied)
	require.EqualValues(t, 3, st.Rejected)

	v, err := store.Voucher(ctx, code)
	require.NoError(t, err)
	require.EqualValues(t, limit, v.UsedCount)
	require.EqualValues(t, limit, v.Reserved)
	dead := consume(t, cfg.Brokers, cfg.DeadLetterTopic, 3)
	for _, r := range dead {
		require.NotEmpty(t, headers(r)[HeaderDeadLetterReason])
	}
	r, err := store.Redemption(ctx, code, "pg-order-0")
	if err == nil {
		require.Equal(t, voucher.StatusReserved, r.Status)
		require.True(t, r.ExpiresAt.Equal(evs[0].ExpiresAt))
	}

	// A fresh group replays the whole topic: the store changes nothing.
	cfg.Group = uniqueGroup()
	replay := sum(drain(t, newConsumer(t, cfg, store), len(evs)))
	require.Equal(t, limit, replay.AlreadyApplied)
	require.Equal(t, 3, replay.Rejected)
	require.Zero(t, replay.Applied)
	again, err := store.Voucher(ctx, code)
	require.NoError(t, err)
	require.Equal(t, v.UsedCount, again.UsedCount)
	require.Equal(t, v.Reserved, again.Reserved)
}
