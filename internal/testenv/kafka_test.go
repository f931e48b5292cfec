package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/voucherd/voucherd/internal/testenv"
)

func newKafkaClient(t *testing.T, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// consumeAll reads topic from the start until it has want records.
func consumeAll(t *testing.T, brokers []string, topic string, want int) []*kgo.Record {
	t.Helper()
	cl := newKafkaClient(t, brokers, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < want {
		fetches := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "got %d of %d records", len(got), want)
		fetches.EachError(func(topic string, p int32, err error) {
			t.Logf("fetch %s/%d: %v", topic, p, err)
		})
		got = append(got, fetches.Records()...)
	}
	return got
}

func TestKafka(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testenv.Kafka(t)
	require.Same(t, b, testenv.Kafka(t), "one shared broker per test binary")

	a, c := testenv.Topic(t, b.Brokers, 3), testenv.Topic(t, b.Brokers, 1)
	require.NotEqual(t, a, c, "each call gets its own topic")

	adm := kadm.NewClient(newKafkaClient(t, b.Brokers))
	details, err := adm.ListTopics(ctx, a)
	require.NoError(t, err)
	require.Len(t, details[a].Partitions, 3)

	cl := newKafkaClient(t, b.Brokers)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: a, Key: []byte("k"), Value: []byte("v")}).FirstErr())
	got := consumeAll(t, b.Brokers, a, 1)
	require.Equal(t, "v", string(got[0].Value))

	// Auto-creation is off: a mistyped topic fails instead of appearing.
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: a + "-typo", Value: []byte("v")}).FirstErr()
	require.Error(t, err)
}

func TestTopicDeletedAtCleanup(t *testing.T) {
	t.Parallel()
	b := testenv.Kafka(t)
	var name string
	t.Run("owner", func(t *testing.T) {
		name = testenv.Topic(t, b.Brokers, 1)
	})
	adm := kadm.NewClient(newKafkaClient(t, b.Brokers))
	require.Eventually(t, func() bool {
		topics, err := adm.ListTopics(context.Background())
		return err == nil && !topics.Has(name)
	}, 10*time.Second, 100*time.Millisecond, "topic %s is deleted when its test ends", name)
}

func TestNewKafkaStopStartKill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testenv.NewKafka(t)
	addr := b.Brokers[0]
	topic := testenv.Topic(t, b.Brokers, 1)
	cl := newKafkaClient(t, b.Brokers, kgo.RecordDeliveryTimeout(3*time.Second))
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("one")}).FirstErr())

	b.Stop(t)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := kadm.NewClient(newKafkaClient(t, b.Brokers)).BrokerMetadata(short)
	cancel()
	require.Error(t, err, "a stopped broker does not answer")

	b.Start(t)
	require.Equal(t, addr, b.Brokers[0], "the address survives a restart")
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("two")}).FirstErr())

	b.Kill(t)
	b.Start(t)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("three")}).FirstErr())

	got := consumeAll(t, b.Brokers, topic, 3)
	var values []string
	for _, r := range got {
		values = append(values, string(r.Value))
	}
	require.Equal(t, []string{"one", "two", "three"}, values, "data survives stop and kill (acks=all)")
}
