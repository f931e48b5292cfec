package kafkalog

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// With SendWhenIdle, concurrent publishes leave in flights and each event
// is applied once, as with the linger.
func TestSendWhenIdleAppliesEachEventOnce(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, testenv.Kafka(t).Brokers, 3)
	cfg.SendWhenIdle = true
	l := newLog(t, cfg)
	evs := events(300, "WAVE")
	publishAll(t, l, evs)
	// A publish while nothing flies leaves at once, not after a linger.
	cfg2 := cfg
	cfg2.Linger = time.Minute
	slow := newLog(t, cfg2)
	began := time.Now()
	last := sampleEvent(999)
	last.Code, last.OrderID = "WAVE0", "order-WAVE-last"
	require.NoError(t, slow.PublishReserved(context.Background(), last))
	require.Less(t, time.Since(began), 30*time.Second, "no linger waited out")
	evs = append(evs, last)

	store := newFakeStore()
	c := newConsumer(t, cfg, store)
	c.Start(context.Background())
	require.Eventually(t, func() bool { return store.count() == len(evs) }, 60*time.Second, 20*time.Millisecond)
	c.Stop()
	store.requireAppliedOnce(t, evs)
	requireLag(t, l, 0)
}

// With SendWhenIdle, a stopped broker fails publishes within
// ProduceTimeout, a caller that gave up is answered at once, and
// publishing recovers with the broker.
func TestSendWhenIdleUnavailableWhenBrokerIsDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	broker := testenv.NewKafka(t)
	cfg := testConfig(t, broker.Brokers, 1)
	cfg.ProduceTimeout = time.Second
	cfg.SendWhenIdle = true
	l := newLog(t, cfg)
	require.NoError(t, l.PublishReserved(ctx, sampleEvent(1)))

	broker.Stop(t)
	began := time.Now()
	err := l.PublishReserved(ctx, sampleEvent(2))
	took := time.Since(began)
	require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), "%v", err)
	require.Less(t, took, cfg.ProduceTimeout+500*time.Millisecond, "the caller waits no longer than ProduceTimeout")

	gone, cancel := context.WithCancel(ctx)
	cancel()
	require.True(t, voucher.IsCode(l.PublishReserved(gone, sampleEvent(3)), voucher.CodeUnavailable), "a caller that gave up")

	broker.Start(t)
	require.Eventually(t, func() bool {
		return l.PublishReserved(ctx, sampleEvent(4)) == nil
	}, 30*time.Second, 100*time.Millisecond, "publishing recovers with the broker")
}
