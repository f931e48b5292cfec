package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/voucherd/voucherd/internal/voucher"
)

// ErrOutcomeUnknown is the cause of the Unavailable error PublishReserved
// returns when it stopped waiting (ProduceTimeout or ctx) while the event
// may already be on its way to the broker: it can still be written later.
// It is voucher.ErrOutcomeUnknown: the service keeps the use held in the
// gate (pending) rather than giving it back, so that a late copy applied by
// the consumer never makes the gate hand out a use twice; reconciliation
// settles the hold once the consumer has caught up.
var ErrOutcomeUnknown = voucher.ErrOutcomeUnknown

// Log is the producer side of the reservation log and its admin queries. It
// implements voucher.EventLog. It is safe for concurrent use.
type Log struct {
	cfg Config
	cl  *kgo.Client
	adm *kadm.Client
	// waves sends the events with Config.SendWhenIdle; nil lingers.
	waves *waveQueue
}

var _ voucher.EventLog = (*Log)(nil)

// New returns a Log. It does not contact the brokers: the first publish or
// admin call does, so a service can start while Kafka is still coming up.
func New(cfg Config) (*Log, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.DefaultProduceTopic(cfg.Topic),
		// Idempotent writes (the default) need acks from all in-sync
		// replicas; say so, since the durability of a reservation rests on it.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(cfg.Linger),
	}
	if cfg.SendWhenIdle {
		// Only a flight's Flush sends (waves.go).
		opts = append(opts, kgo.ManualFlushing())
	}
	cl, err := kgo.NewClient(append(opts, append(cfg.securityOpts(), cfg.ClientOpts...)...)...)
	if err != nil {
		return nil, fmt.Errorf("kafkalog: %w", err)
	}
	l := &Log{cfg: cfg, cl: cl, adm: kadm.NewClient(cl)}
	if cfg.SendWhenIdle {
		l.waves = &waveQueue{cl: cl, timeout: cfg.ProduceTimeout}
	}
	return l, nil
}

// Close flushes the records still buffered (bounded by ProduceTimeout) and
// closes the client.
func (l *Log) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.ProduceTimeout)
	defer cancel()
	_ = l.cl.Flush(ctx)
	l.cl.Close()
}

// EnsureTopics creates the event topic and the dead-letter topic with
// Config.Partitions and Config.ReplicationFactor if they do not exist. With
// more than one replica it sets min.insync.replicas=2, so that acks=all
// means two copies.
func (l *Log) EnsureTopics(ctx context.Context) error {
	return ensureTopics(ctx, l.adm, l.cfg)
}

func ensureTopics(ctx context.Context, adm *kadm.Client, cfg Config) error {
	var configs map[string]*string
	if cfg.ReplicationFactor > 1 {
		two := "2"
		configs = map[string]*string{"min.insync.replicas": &two}
	}
	resps, err := adm.CreateTopics(ctx, cfg.Partitions, cfg.ReplicationFactor, configs, cfg.Topic, cfg.DeadLetterTopic)
	if err != nil {
		return voucher.Unavailable(err, "create Kafka topics %s and %s", cfg.Topic, cfg.DeadLetterTopic)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return voucher.Unavailable(r.Err, "create Kafka topic %s", r.Topic)
		}
	}
	return nil
}

// PublishReserved writes e to the topic, keyed by voucher code so that one
// voucher's events stay in order on one partition. It returns nil only once
// every in-sync replica has the event; otherwise, within ProduceTimeout (or
// when ctx ends, if sooner), an *voucher.Error with CodeUnavailable.
func (l *Log) PublishReserved(ctx context.Context, e voucher.ReservedEvent) error {
	value, err := encodeEvent(e)
	if err != nil {
		return voucher.Unavailable(err, "encode reservation event for order %s", e.OrderID)
	}
	rec := &kgo.Record{Topic: l.cfg.Topic, Key: []byte(e.Code), Value: value}
	if len(l.cfg.SigningKey) > 0 {
		rec.Headers = []kgo.RecordHeader{{Key: HeaderSignature, Value: signature(l.cfg.SigningKey, rec.Key, rec.Value)}}
	}
	if l.waves != nil {
		err = l.waves.publish(ctx, rec)
	} else {
		err = produceWait(ctx, l.cl, l.cfg.ProduceTimeout, rec)
	}
	if err != nil {
		return voucher.Unavailable(err, "publish reservation event for order %s", e.OrderID)
	}
	return nil
}

// produceWait produces recs and waits for their acks, at most timeout.
//
// Each record carries a context that expires after timeout, so that a record
// not yet sent by then is failed by the client and never written later (a
// record already sent cannot be recalled: its outcome is unknown until the
// broker answers). It is not the caller's context: franz-go fails a whole
// batch by its first record's context, and one caller giving up early must
// not fail the records of others batched with it; it keeps the caller's
// values (its trace span, for the client's hooks). When the wait ends before
// the client has decided, the error wraps ErrOutcomeUnknown.
func produceWait(ctx context.Context, cl *kgo.Client, timeout time.Duration, recs ...*kgo.Record) error {
	results := make(chan error, len(recs))
	for _, r := range recs {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		// TryProduce fails at once when the client's buffer is full instead
		// of blocking: a backlog that large means Kafka is not keeping up.
		cl.TryProduce(rctx, r, func(_ *kgo.Record, err error) {
			cancel()
			results <- err
		})
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var first error
	for range recs {
		select {
		case err := <-results:
			if err != nil && first == nil {
				first = err
			}
		case <-timer.C:
			return fmt.Errorf("%w (waited %s)", ErrOutcomeUnknown, timeout)
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
		}
	}
	return first
}

// CaughtUp returns nil when the writer group's committed offsets have
// reached the end of every partition of the topic as of the call, that is
// when every event acknowledged before the call has been applied (or dead
// lettered). Otherwise it returns an *voucher.Error with CodeUnavailable
// that says how far behind the consumer is.
func (l *Log) CaughtUp(ctx context.Context) error {
	lag, err := l.Lag(ctx)
	if err != nil {
		return err
	}
	if lag > 0 {
		return &voucher.Error{
			Code:       voucher.CodeUnavailable,
			Message:    fmt.Sprintf("consumer is %d events behind; refusing to load the voucher into Redis until it catches up", lag),
			RetryAfter: time.Second,
		}
	}
	return nil
}

// Lag returns how many events of the topic the writer group has not
// committed yet, summed over partitions. A partition the group has never
// committed counts from its log start. Retriable broker errors (a group
// coordinator still loading, say) are retried for a moment, within ctx.
func (l *Log) Lag(ctx context.Context) (int64, error) {
	deadline := time.Now().Add(lagRetryWindow)
	for {
		lag, err := l.lag(ctx)
		if err == nil || !kerr.IsRetriable(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return lag, err
		}
		select {
		case <-ctx.Done():
			return lag, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lagRetryWindow bounds Lag's retries of retriable errors.
const lagRetryWindow = 3 * time.Second

func (l *Log) lag(ctx context.Context) (int64, error) {
	ends, err := l.adm.ListEndOffsets(ctx, l.cfg.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, voucher.Unavailable(err, "list end offsets of Kafka topic %s", l.cfg.Topic)
	}
	if len(ends[l.cfg.Topic]) == 0 {
		return 0, voucher.Unavailable(kerr.UnknownTopicOrPartition, "Kafka topic %s has no partitions", l.cfg.Topic)
	}
	commits, err := l.adm.FetchOffsets(ctx, l.cfg.Group)
	if err == nil {
		err = commits.Error()
	}
	if err != nil {
		return 0, voucher.Unavailable(err, "fetch committed offsets of Kafka group %s", l.cfg.Group)
	}
	var starts kadm.ListedOffsets
	var lag int64
	for p, end := range ends[l.cfg.Topic] {
		from := int64(-1)
		if c, ok := commits.Lookup(l.cfg.Topic, p); ok && c.At >= 0 {
			from = c.At
		}
		if from < 0 {
			if starts == nil {
				if starts, err = l.adm.ListStartOffsets(ctx, l.cfg.Topic); err == nil {
					err = starts.Error()
				}
				if err != nil {
					return 0, voucher.Unavailable(err, "list start offsets of Kafka topic %s", l.cfg.Topic)
				}
			}
			if s, ok := starts.Lookup(l.cfg.Topic, p); ok {
				from = s.Offset
			}
		}
		if end.Offset > from {
			lag += end.Offset - from
		}
	}
	return lag, nil
}

// Ping checks that a broker answers (an ApiVersions round trip; metadata
// requests may be answered from the client's cache).
func (l *Log) Ping(ctx context.Context) error {
	if err := l.cl.Ping(ctx); err != nil {
		return voucher.Unavailable(err, "Kafka does not answer")
	}
	return nil
}

// offsetString formats an offset or partition for a header.
func offsetString[T int32 | int64](v T) []byte { return []byte(strconv.FormatInt(int64(v), 10)) }
