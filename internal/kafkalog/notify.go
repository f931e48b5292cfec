package kafkalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/voucherd/voucherd/internal/voucher"
)

// ThresholdEventVersion is the version of the threshold events this build
// writes.
const ThresholdEventVersion = 1

// ThresholdEventJSON is a threshold event on the events topic (key = the
// voucher code, so one voucher's events stay in order on one partition).
// Shops read it to switch banners or stop promoting a code.
type ThresholdEventJSON struct {
	Version int `json:"version"`
	// Type is VoucherLowStock or VoucherSoldOut.
	Type string `json:"type"`
	Code string `json:"code"`
	// TotalLimit and Remaining are the voucher's stock right after the
	// reservation that crossed the threshold.
	TotalLimit int32 `json:"totalLimit"`
	Remaining  int64 `json:"remaining"`
	// Threshold is the number of free uses below which the voucher is low
	// on stock (0 for VoucherSoldOut).
	Threshold int64     `json:"threshold"`
	OrderID   string    `json:"orderId"`
	Mode      string    `json:"mode"`
	At        time.Time `json:"at"`
}

func encodeThreshold(e voucher.ThresholdEvent) ([]byte, error) {
	return json.Marshal(ThresholdEventJSON{
		Version: ThresholdEventVersion, Type: string(e.Type), Code: e.Code, TotalLimit: e.TotalLimit,
		Remaining: e.Remaining, Threshold: e.Threshold, OrderID: e.OrderID, Mode: string(e.Mode), At: e.At.UTC(),
	})
}

// DecodeThresholdEvent parses a record value of the events topic.
func DecodeThresholdEvent(value []byte) (voucher.ThresholdEvent, error) {
	var w ThresholdEventJSON
	dec := json.NewDecoder(bytes.NewReader(value))
	if err := dec.Decode(&w); err != nil {
		return voucher.ThresholdEvent{}, fmt.Errorf("kafkalog: threshold event: %w", err)
	}
	switch voucher.ThresholdType(w.Type) {
	case voucher.ThresholdLowStock, voucher.ThresholdSoldOut:
	default:
		return voucher.ThresholdEvent{}, fmt.Errorf("kafkalog: unknown threshold event type %q", w.Type)
	}
	if w.Version != ThresholdEventVersion {
		return voucher.ThresholdEvent{}, fmt.Errorf("kafkalog: unsupported threshold event version %d", w.Version)
	}
	return voucher.ThresholdEvent{
		Type: voucher.ThresholdType(w.Type), Code: w.Code, TotalLimit: w.TotalLimit, Remaining: w.Remaining,
		Threshold: w.Threshold, OrderID: w.OrderID, Mode: voucher.Mode(w.Mode), At: w.At,
	}, nil
}

// Notifier produces threshold events to Config.EventsTopic. It implements
// voucher.Notifier.
//
// Delivery is at most once: Notify hands the event to the client's buffer
// (at most Config.EventsBuffer events) and returns; the idempotent producer
// retries it for up to Config.EventsDelivery without duplicating it. An
// event is lost when the buffer is full, when Kafka stays unreachable
// longer than that, or when the process dies first; each loss is logged
// and counted (Stats). The structured log line and the metric the service
// emits for every crossing are the complete record; the topic is the
// convenient one.
type Notifier struct {
	cfg  Config
	cl   *kgo.Client
	adm  *kadm.Client
	log  *slog.Logger
	sent atomic.Uint64
	lost atomic.Uint64
}

var _ voucher.Notifier = (*Notifier)(nil)

// NewNotifier returns a Notifier. Like New, it does not contact the brokers.
func NewNotifier(cfg Config) (*Notifier, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.DefaultProduceTopic(cfg.EventsTopic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(cfg.Linger),
		kgo.MaxBufferedRecords(cfg.EventsBuffer),
		kgo.RecordDeliveryTimeout(cfg.EventsDelivery),
	}, append(cfg.securityOpts(), cfg.ClientOpts...)...)...)
	if err != nil {
		return nil, fmt.Errorf("kafkalog: %w", err)
	}
	return &Notifier{cfg: cfg, cl: cl, adm: kadm.NewClient(cl), log: cfg.Logger}, nil
}

// EnsureTopic creates the events topic with Config.Partitions and
// Config.ReplicationFactor if it does not exist.
func (n *Notifier) EnsureTopic(ctx context.Context) error {
	var configs map[string]*string
	if n.cfg.ReplicationFactor > 1 {
		two := "2"
		configs = map[string]*string{"min.insync.replicas": &two}
	}
	resps, err := n.adm.CreateTopics(ctx, n.cfg.Partitions, n.cfg.ReplicationFactor, configs, n.cfg.EventsTopic)
	if err != nil {
		return voucher.Unavailable(err, "create Kafka topic %s", n.cfg.EventsTopic)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return voucher.Unavailable(r.Err, "create Kafka topic %s", r.Topic)
		}
	}
	return nil
}

// Notify implements voucher.Notifier: it queues the event and returns at
// once.
func (n *Notifier) Notify(e voucher.ThresholdEvent) {
	value, err := encodeThreshold(e)
	if err != nil {
		n.dropped(e, err)
		return
	}
	rec := &kgo.Record{Topic: n.cfg.EventsTopic, Key: []byte(e.Code), Value: value}
	// TryProduce fails at once on a full buffer instead of blocking the
	// request that crossed the threshold.
	n.cl.TryProduce(context.Background(), rec, func(_ *kgo.Record, err error) {
		if err != nil {
			n.dropped(e, err)
			return
		}
		n.sent.Add(1)
	})
}

func (n *Notifier) dropped(e voucher.ThresholdEvent, err error) {
	n.lost.Add(1)
	n.log.Warn("threshold event not published", "event", string(e.Type), "code", e.Code,
		"topic", n.cfg.EventsTopic, "err", err)
}

// Stats returns the number of events acknowledged by Kafka and lost.
func (n *Notifier) Stats() (sent, lost uint64) { return n.sent.Load(), n.lost.Load() }

// Close sends the buffered events, waiting at most Config.ProduceTimeout,
// and closes the client.
func (n *Notifier) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ProduceTimeout)
	defer cancel()
	_ = n.cl.Flush(ctx)
	n.cl.Close()
}
