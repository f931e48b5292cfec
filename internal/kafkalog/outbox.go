package kafkalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/voucherd/voucherd/internal/voucher"
)

// OutboxProducer produces the outbox's events (docs/events.md) to a topic:
// key = the voucher code, so one voucher's events stay in order on one
// partition; value = the event JSON as webhooks receive it; headers
// Voucherd-Event-Id and Voucherd-Event-Type. Produce returns once every
// record is acknowledged by all in-sync replicas; the caller moves its
// cursor only then, so events are produced at least once.
type OutboxProducer struct {
	cl    *kgo.Client
	adm   *kadm.Client
	topic string
	cfg   Config
}

// NewOutboxProducer returns a producer to topic with cfg's brokers and
// security.
func NewOutboxProducer(cfg Config, topic string) (*OutboxProducer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if !topicPattern.MatchString(topic) {
		return nil, fmt.Errorf("kafkalog: invalid events topic name %q", topic)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(cfg.Linger),
	}, append(cfg.securityOpts(), cfg.ClientOpts...)...)...)
	if err != nil {
		return nil, fmt.Errorf("kafkalog: %w", err)
	}
	return &OutboxProducer{cl: cl, adm: kadm.NewClient(cl), topic: topic, cfg: cfg}, nil
}

// EnsureTopic creates the topic with Config.Partitions and
// Config.ReplicationFactor if it does not exist.
func (p *OutboxProducer) EnsureTopic(ctx context.Context) error {
	resps, err := p.adm.CreateTopics(ctx, p.cfg.Partitions, p.cfg.ReplicationFactor, nil, p.topic)
	if err != nil {
		return voucher.Unavailable(err, "create Kafka topic %s", p.topic)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return voucher.Unavailable(r.Err, "create Kafka topic %s", r.Topic)
		}
	}
	return nil
}

// Produce writes events and waits for every acknowledgement.
func (p *OutboxProducer) Produce(ctx context.Context, events []voucher.Event) error {
	recs := make([]*kgo.Record, len(events))
	for i, e := range events {
		recs[i] = &kgo.Record{Key: []byte(e.VoucherCode), Value: e.JSON(), Headers: []kgo.RecordHeader{
			{Key: "Voucherd-Event-Id", Value: []byte(e.IDString())},
			{Key: "Voucherd-Event-Type", Value: []byte(e.Type)},
		}}
	}
	if err := p.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return voucher.Unavailable(err, "produce events to Kafka topic %s", p.topic)
	}
	return nil
}

// Close flushes nothing (Produce waits) and closes the client.
func (p *OutboxProducer) Close() { p.cl.Close() }
