package kafkalog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// testWriter sends log lines to the test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

func uniqueGroup() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "test-group-" + hex.EncodeToString(b)
}

// testConfig returns a configuration with a throwaway topic, dead-letter
// topic and group on brokers.
func testConfig(t *testing.T, brokers []string, partitions int) Config {
	t.Helper()
	return Config{
		Brokers:         brokers,
		Topic:           testenv.Topic(t, brokers, partitions),
		DeadLetterTopic: testenv.Topic(t, brokers, 1),
		Group:           uniqueGroup(),
		RetryBackoff:    20 * time.Millisecond,
		MaxRetryBackoff: 200 * time.Millisecond,
		Logger:          slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

func newLog(t *testing.T, cfg Config) *Log {
	t.Helper()
	l, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(l.Close)
	return l
}

func newConsumer(t *testing.T, cfg Config, a Applier) *Consumer {
	t.Helper()
	c, err := NewConsumer(cfg, a)
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	return c
}

// fakeStore applies events idempotently in memory, like the store's
// ApplyReserved, and records every call. fail, when set, can fail a call
// before anything is applied.
type fakeStore struct {
	mu      sync.Mutex
	orders  map[string]voucher.ReservedEvent
	applied map[string]int // orderId -> times inserted (must stay 1)
	seen    map[string]int // orderId -> times passed to ApplyReserved
	reject  map[string]string
	calls   int
	fail    func(call int) error
	after   func(call int) // runs after a successful apply
}

func newFakeStore() *fakeStore {
	return &fakeStore{
		orders:  map[string]voucher.ReservedEvent{},
		applied: map[string]int{},
		seen:    map[string]int{},
		reject:  map[string]string{},
	}
}

func (s *fakeStore) ApplyReserved(ctx context.Context, events []voucher.ReservedEvent) ([]voucher.ApplyResult, error) {
	s.mu.Lock()
	s.calls++
	call := s.calls
	for _, e := range events {
		s.seen[e.OrderID]++
	}
	if s.fail != nil {
		if err := s.fail(call); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	results := make([]voucher.ApplyResult, len(events))
	for i, e := range events {
		switch {
		case s.reject[e.OrderID] != "":
			results[i] = voucher.ApplyResult{Outcome: voucher.Rejected, Reason: s.reject[e.OrderID]}
		case s.applied[e.OrderID] > 0:
			results[i] = voucher.ApplyResult{Outcome: voucher.AlreadyApplied}
		default:
			s.applied[e.OrderID]++
			s.orders[e.OrderID] = e
			results[i] = voucher.ApplyResult{Outcome: voucher.Applied}
		}
	}
	after := s.after
	s.mu.Unlock()
	if after != nil {
		after(call)
	}
	return results, nil
}

func (s *fakeStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.orders)
}

// requireAppliedOnce checks that exactly the events were inserted, each once.
func (s *fakeStore) requireAppliedOnce(t *testing.T, events []voucher.ReservedEvent) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.orders, len(events))
	for _, e := range events {
		got, ok := s.orders[e.OrderID]
		require.True(t, ok, "order %s applied", e.OrderID)
		require.Equal(t, 1, s.applied[e.OrderID], "order %s inserted once", e.OrderID)
		require.Equal(t, e.Code, got.Code)
		require.Equal(t, e.CustomerID, got.CustomerID)
		require.True(t, e.ReservedAt.Equal(got.ReservedAt))
	}
}

func events(n int, code string) []voucher.ReservedEvent {
	out := make([]voucher.ReservedEvent, n)
	for i := range out {
		e := sampleEvent(i)
		e.Code = fmt.Sprintf("%s%d", code, i%4) // several keys, so several partitions
		e.OrderID = fmt.Sprintf("order-%s-%d", code, i)
		out[i] = e
	}
	return out
}

// publishAll publishes events from a few goroutines at once, as concurrent
// checkouts would.
func publishAll(t *testing.T, l *Log, evs []voucher.ReservedEvent) {
	t.Helper()
	const workers = 8
	errs := make(chan error, len(evs))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(evs); i += workers {
				errs <- l.PublishReserved(context.Background(), evs[i])
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// drain calls runOnce until n records have been committed.
func drain(t *testing.T, c *Consumer, n int) []batchResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var results []batchResult
	done := 0
	for done < n {
		res, err := c.runOnce(ctx)
		require.NoError(t, err, "after %d of %d records", done, n)
		require.True(t, res.Committed || res.Polled == 0)
		done += res.Polled
		results = append(results, res)
	}
	require.Equal(t, n, done, "no more records than published")
	return results
}

func sum(results []batchResult) batchResult {
	var s batchResult
	for _, r := range results {
		s.Polled += r.Polled
		s.Applied += r.Applied
		s.AlreadyApplied += r.AlreadyApplied
		s.Rejected += r.Rejected
		s.Undecodable += r.Undecodable
		for reason, n := range r.Mismatched {
			if s.Mismatched == nil {
				s.Mismatched = map[string]int{}
			}
			s.Mismatched[reason] += n
		}
	}
	return s
}

func requireLag(t *testing.T, l *Log, want int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lag, err := l.Lag(ctx)
	require.NoError(t, err)
	require.Equal(t, want, lag)
}

func TestProduceConsumeAppliesEachEventOnce(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, testenv.Kafka(t).Brokers, 3)
	l := newLog(t, cfg)
	evs := events(300, "ONCE")
	publishAll(t, l, evs)

	store := newFakeStore()
	c := newConsumer(t, cfg, store)
	c.Start(context.Background())
	require.Eventually(t, func() bool { return store.count() == len(evs) }, 60*time.Second, 20*time.Millisecond)
	c.Stop()

	store.requireAppliedOnce(t, evs)
	st := c.Stats()
	require.EqualValues(t, len(evs), st.Applied)
	require.Zero(t, st.AlreadyApplied+st.Rejected+st.Undecodable+st.Failures)
	requireLag(t, l, 0)
	require.NoError(t, l.CaughtUp(context.Background()))
}

func TestRedeliveryToAFreshGroupChangesNothing(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, testenv.Kafka(t).Brokers, 2)
	l := newLog(t, cfg)
	evs := events(50, "REDELIVER")
	publishAll(t, l, evs)

	store := newFakeStore()
	first := sum(drain(t, newConsumer(t, cfg, store), len(evs)))
	require.Equal(t, len(evs), first.Applied)

	cfg.Group = uniqueGroup()
	again := sum(drain(t, newConsumer(t, cfg, store), len(evs)))
	require.Equal(t, len(evs), again.AlreadyApplied, "the second group sees every event")
	require.Zero(t, again.Applied)
	store.requireAppliedOnce(t, evs)
}

func TestTransientApplyFailureIsRetriedWithoutCommitting(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, testenv.Kafka(t).Brokers, 3)
	l := newLog(t, cfg)
	evs := events(100, "RETRY")
	publishAll(t, l, evs)

	store := newFakeStore()
	outage := voucher.Unavailable(errors.New("connection refused"), "database is down")
	store.fail = func(call int) error {
		if call <= 3 {
			return outage
		}
		return nil
	}
	c := newConsumer(t, cfg, store)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for range 3 {
		res, err := c.runOnce(ctx)
		require.ErrorIs(t, err, outage)
		require.False(t, res.Committed)
		require.Positive(t, res.Polled)
		requireLag(t, l, int64(len(evs)))
	}
	require.Zero(t, store.count())

	results := drain(t, c, len(evs))
	require.Equal(t, len(evs), sum(results).Applied)
	store.requireAppliedOnce(t, evs)
	require.EqualValues(t, 3, c.Stats().Failures)
	requireLag(t, l, 0)

	// The background loop retries by itself, with backoff.
	more := events(40, "RETRYLOOP")
	publishAll(t, l, more)
	var failed int
	store.mu.Lock()
	store.fail = func(int) error {
		if failed < 2 {
			failed++
			return outage
		}
		return nil
	}
	store.mu.Unlock()
	c.Start(context.Background())
	require.Eventually(t, func() bool { return store.count() == len(evs)+len(more) }, 30*time.Second, 20*time.Millisecond)
	c.Stop()
	store.requireAppliedOnce(t, append(evs, more...))
	require.EqualValues(t, 5, c.Stats().Failures)
	requireLag(t, l, 0)
}

func TestCrashBetweenStoreCommitAndOffsetCommit(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, testenv.Kafka(t).Brokers, 3)
	l := newLog(t, cfg)
	evs := events(60, "CRASH")
	publishAll(t, l, evs)

	store := newFakeStore()
	var crash context.CancelFunc
	// The store commits, then the process dies before the offset commit.
	store.after = func(int) { crash() }
	first := newConsumer(t, cfg, store)
	var applied int
	for i := 0; applied < len(evs); i++ {
		require.Less(t, i, 50, "every event gets applied within a few polls")
		var ctx context.Context
		ctx, crash = context.WithCancel(context.Background())
		res, err := first.runOnce(ctx)
		crash()
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, res.Committed)
		applied += res.Applied
	}
	first.Stop()
	require.Equal(t, len(evs), store.count())
	requireLag(t, l, int64(len(evs)))

	store.after = nil
	restarted := newConsumer(t, cfg, store)
	res := sum(drain(t, restarted, len(evs)))
	require.Equal(t, len(evs), res.AlreadyApplied, "the restarted consumer replays the batch")
	require.Zero(t, res.Applied)
	store.requireAppliedOnce(t, evs)
	requireLag(t, l, 0)
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, testenv.Kafka(t).Brokers, 1)
	l := newLog(t, cfg)
	evs := events(10, "DLQ")
	store := newFakeStore()
	store.reject[evs[4].OrderID] = "voucher DLQ0 does not exist"

	ctx := context.Background()
	raw := newClient(t, cfg.Brokers)
	publishAll(t, l, evs[:5])
	poison := []*kgo.Record{
		{Topic: cfg.Topic, Key: []byte("DLQ0"), Value: []byte("not json at all")},
		{Topic: cfg.Topic, Key: []byte("DLQ0"), Value: []byte(`{"version":99,"type":"VoucherReserved"}`),
			Headers: []kgo.RecordHeader{{Key: "origin", Value: []byte("v2")}}},
	}
	require.NoError(t, raw.ProduceSync(ctx, poison...).FirstErr())
	publishAll(t, l, evs[5:])

	c := newConsumer(t, cfg, store)
	res := sum(drain(t, c, len(evs)+len(poison)))
	require.Equal(t, 9, res.Applied)
	require.Equal(t, 1, res.Rejected)
	require.Equal(t, 2, res.Undecodable)
	st := c.Stats()
	require.EqualValues(t, 1, st.Rejected)
	require.EqualValues(t, 2, st.Undecodable)
	requireLag(t, l, 0)

	dead := consume(t, cfg.Brokers, cfg.DeadLetterTopic, 3)
	reasons := map[string]string{}
	for _, r := range dead {
		h := headers(r)
		require.Equal(t, cfg.Topic, h[HeaderDeadLetterTopic])
		require.Equal(t, "0", h[HeaderDeadLetterPartition])
		require.NotEmpty(t, h[HeaderDeadLetterOffset])
		reasons[string(r.Value)] = h[HeaderDeadLetterReason]
		if string(r.Value) == string(poison[1].Value) {
			require.Equal(t, "v2", h["origin"], "original headers are kept")
		}
	}
	rejected, err := encodeEvent(evs[4])
	require.NoError(t, err)
	require.Equal(t, "voucher DLQ0 does not exist", reasons[string(rejected)])
	require.Contains(t, reasons["not json at all"], "undecodable event")
	require.Contains(t, reasons[string(poison[1].Value)], "unsupported event version 99")
}

func TestCaughtUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(t, testenv.Kafka(t).Brokers, 3)
	l := newLog(t, cfg)
	require.NoError(t, l.CaughtUp(ctx), "an empty topic and a group that never committed")

	evs := events(37, "LAG")
	publishAll(t, l, evs)
	err := l.CaughtUp(ctx)
	require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), "%v", err)
	require.Contains(t, err.Error(), "consumer is 37 events behind; refusing to load the voucher into Redis until it catches up")

	store := newFakeStore()
	c := newConsumer(t, cfg, store)
	// Apply part of the log: still behind.
	c.cfg.BatchSize = 10
	res, err := c.runOnce(ctx)
	require.NoError(t, err)
	require.Positive(t, res.Polled)
	err = l.CaughtUp(ctx)
	require.Error(t, err)
	require.Contains(t, err.Error(), fmt.Sprintf("consumer is %d events behind", len(evs)-res.Polled))

	drain(t, c, len(evs)-res.Polled)
	require.NoError(t, l.CaughtUp(ctx))

	// The topic must exist: an unknown topic is an error, not "caught up".
	bad := cfg
	bad.Topic = cfg.Topic + "-missing"
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.True(t, voucher.IsCode(newLog(t, bad).CaughtUp(short), voucher.CodeUnavailable))
}

func TestEnsureTopics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	brokers := testenv.Kafka(t).Brokers
	suffix := uniqueGroup()
	cfg := Config{Brokers: brokers, Topic: "ensure." + suffix, DeadLetterTopic: "ensure." + suffix + ".dlq", Partitions: 4}
	adm := kadm.NewClient(newClient(t, brokers))
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), cfg.Topic, cfg.DeadLetterTopic) })

	l := newLog(t, cfg)
	require.NoError(t, l.EnsureTopics(ctx))
	require.NoError(t, l.EnsureTopics(ctx), "existing topics are fine")
	// Metadata catches up with a new topic a moment after its creation.
	require.Eventually(t, func() bool {
		details, err := adm.ListTopics(ctx, cfg.Topic, cfg.DeadLetterTopic)
		return err == nil && len(details[cfg.Topic].Partitions) == 4 && len(details[cfg.DeadLetterTopic].Partitions) == 4
	}, 10*time.Second, 50*time.Millisecond, "both topics with Config.Partitions partitions")
	require.NoError(t, l.Ping(ctx))
}

func TestPublishUnavailableWhenBrokerIsDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	broker := testenv.NewKafka(t)
	cfg := testConfig(t, broker.Brokers, 1)
	cfg.ProduceTimeout = time.Second
	l := newLog(t, cfg)
	require.NoError(t, l.PublishReserved(ctx, sampleEvent(1)))

	broker.Stop(t)
	began := time.Now()
	err := l.PublishReserved(ctx, sampleEvent(2))
	took := time.Since(began)
	require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), "%v", err)
	require.Less(t, took, cfg.ProduceTimeout+500*time.Millisecond, "the caller waits no longer than ProduceTimeout")
	t.Logf("publish to a stopped broker failed after %s: %v", took.Round(time.Millisecond), err)

	gone, cancel := context.WithCancel(ctx)
	cancel()
	require.True(t, voucher.IsCode(l.PublishReserved(gone, sampleEvent(3)), voucher.CodeUnavailable), "a caller that gave up")

	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	require.True(t, voucher.IsCode(l.CaughtUp(short), voucher.CodeUnavailable))
	require.True(t, voucher.IsCode(l.Ping(short), voucher.CodeUnavailable))

	broker.Start(t)
	require.Eventually(t, func() bool {
		return l.PublishReserved(ctx, sampleEvent(4)) == nil
	}, 30*time.Second, 100*time.Millisecond, "publishing recovers with the broker")
}

func newClient(t *testing.T, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// consume reads want records of topic from the start.
func consume(t *testing.T, brokers []string, topic string, want int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, brokers, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < want {
		fetches := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records of %s", len(got), want, topic)
		got = append(got, fetches.Records()...)
	}
	require.Len(t, got, want)
	return got
}

func headers(r *kgo.Record) map[string]string {
	m := map[string]string{}
	for _, h := range r.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}

// With a signing key, the log signs what it publishes and the consumer
// applies only signed records: a valid event written by hand without the
// key's signature, or with a signature of other bytes, is dead-lettered
// and never reaches the store.
func TestSignedEvents(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, testenv.Kafka(t).Brokers, 1)
	cfg.SigningKey = []byte("0123456789abcdef0123456789abcdef")
	l := newLog(t, cfg)
	evs := events(3, "SIG")
	publishAll(t, l, evs)

	forged := sampleEvent(7)
	forged.Code, forged.OrderID = "SIG0", "forged-1"
	value, err := encodeEvent(forged)
	require.NoError(t, err)
	other := sampleEvent(8)
	other.Code, other.OrderID = "SIG0", "forged-2"
	otherValue, err := encodeEvent(other)
	require.NoError(t, err)
	raw := newClient(t, cfg.Brokers)
	require.NoError(t, raw.ProduceSync(context.Background(),
		&kgo.Record{Topic: cfg.Topic, Key: []byte("SIG0"), Value: value},
		&kgo.Record{Topic: cfg.Topic, Key: []byte("SIG0"), Value: otherValue, Headers: []kgo.RecordHeader{
			{Key: HeaderSignature, Value: signature(cfg.SigningKey, []byte("SIG0"), value)}}},
	).FirstErr())

	store := newFakeStore()
	c := newConsumer(t, cfg, store)
	res := sum(drain(t, c, len(evs)+2))
	require.Equal(t, len(evs), res.Applied)
	require.Equal(t, map[string]int{MismatchSignature: 2}, res.Mismatched)
	store.requireAppliedOnce(t, evs)

	dead := consume(t, cfg.Brokers, cfg.DeadLetterTopic, 2)
	for _, r := range dead {
		require.Contains(t, headers(r)[HeaderDeadLetterReason], MismatchSignature)
	}

	_, err = New(Config{Brokers: cfg.Brokers, SigningKey: []byte("short")})
	require.ErrorContains(t, err, "SigningKey")
}
