// Package webhook carries the outbox's events out (docs/events.md): it
// sequences the committed events, delivers them to the webhooks that
// subscribe to them (signed, at least once, in order per voucher, with
// backoff), produces them to a sink (the Kafka events topic), prunes them
// after their retention, and administers the webhooks and the feed.
//
// Nothing here is on the request path: the store's triggers write the
// events in the transactions of the changes, and a slow receiver only
// delays its own deliveries.
package webhook

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Defaults of Config.
const (
	DefaultRetryFor     = 72 * time.Hour
	DefaultBackoffBase  = 5 * time.Second
	DefaultBackoffMax   = time.Hour
	DefaultTimeout      = 10 * time.Second
	DefaultPoll         = 200 * time.Millisecond
	DefaultBatch        = 64
	DefaultRetention    = 30 * 24 * time.Hour
	DefaultPruneEvery   = time.Minute
	DefaultPruneBatch   = 1000
	DefaultSinkBatch    = 500
	DefaultSequenceSize = 1000
)

// Store is the store's side of events out (pgstore implements it).
type Store interface {
	SequenceEvents(ctx context.Context, limit int) (int, error)
	ClaimDeliveries(ctx context.Context, limit int, lease time.Duration) ([]voucher.DeliveryJob, error)
	RecordDelivery(ctx context.Context, r voucher.DeliveryResult) error
	PruneEvents(ctx context.Context, cutoff time.Time, limit int) (int, error)
	ProduceEvents(ctx context.Context, name string, limit int, produce func(ctx context.Context, events []voucher.Event) error) (int, error)

	Events(ctx context.Context, f voucher.EventFilter) (voucher.EventPage, error)
	CreateWebhook(ctx context.Context, w voucher.Webhook) (voucher.Webhook, error)
	ListWebhooks(ctx context.Context, p voucher.PageRequest) (voucher.WebhookPage, error)
	Webhook(ctx context.Context, id string) (voucher.Webhook, error)
	PatchWebhook(ctx context.Context, id string, p voucher.WebhookPatch) (voucher.Webhook, error)
	DeleteWebhook(ctx context.Context, id string) error
	Deliveries(ctx context.Context, f voucher.DeliveryFilter) (voucher.DeliveryPage, error)
}

// Sink receives the events in id order, at least once (the Kafka events
// topic). Produce returns once every event is durably written.
type Sink interface {
	Produce(ctx context.Context, events []voucher.Event) error
}

// Observer receives one observation per delivery attempt: outcome is
// delivered, retry or failed; lag, for a delivered one, is the time from
// the event's commit to the receiver's answer.
type Observer interface {
	WebhookDelivery(outcome string, lag time.Duration)
}

// Config configures a Runner and a Service. Zero values mean the defaults.
type Config struct {
	Store Store
	// RetryFor is how long a delivery is retried before it is marked
	// failed (default 72h).
	RetryFor time.Duration
	// BackoffBase and BackoffMax bound the exponential backoff between
	// attempts: the n-th retry waits a random time in [d/2, d] with
	// d = min(BackoffBase × 2^(n-1), BackoffMax).
	BackoffBase, BackoffMax time.Duration
	// Timeout bounds one attempt (default 10s); the lease is twice it.
	Timeout time.Duration
	// Poll is the wait between rounds that found nothing to do.
	Poll time.Duration
	// Batch is how many deliveries one round claims (default 64); they are
	// sent concurrently.
	Batch int
	// AllowPrivate allows http URLs and loopback, private and link-local
	// addresses (development and tests).
	AllowPrivate bool
	// Retention is how long events are kept (default 30 days); PruneEvery
	// and PruneBatch pace their deletion.
	Retention  time.Duration
	PruneEvery time.Duration
	PruneBatch int
	// Sink, when set, receives every event (cursor SinkName).
	Sink     Sink
	SinkName string
	// Resolver resolves webhook hosts at creation (default net's).
	Resolver *net.Resolver
	// Transport, when set, replaces the delivery transport (tests); the
	// address checks then are its own business.
	Transport  *http.Transport
	Observer   Observer
	Logger     *slog.Logger
	Clock      func() time.Time
	RandomTime func(d time.Duration) time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Store == nil {
		return c, errors.New("webhook: Config.Store is required")
	}
	if c.RetryFor < 0 || c.BackoffBase < 0 || c.BackoffMax < 0 || c.Timeout < 0 || c.Poll < 0 || c.Retention < 0 ||
		c.Batch < 0 || c.PruneBatch < 0 || c.PruneEvery < 0 {
		return c, errors.New("webhook: Config durations and sizes must be >= 0")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.RetryFor, DefaultRetryFor)
	def(&c.BackoffBase, DefaultBackoffBase)
	def(&c.BackoffMax, DefaultBackoffMax)
	def(&c.Timeout, DefaultTimeout)
	def(&c.Poll, DefaultPoll)
	def(&c.Retention, DefaultRetention)
	def(&c.PruneEvery, DefaultPruneEvery)
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.PruneBatch == 0 {
		c.PruneBatch = DefaultPruneBatch
	}
	if c.SinkName == "" {
		c.SinkName = "kafka"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.RandomTime == nil {
		c.RandomTime = randomTime
	}
	return c, nil
}
