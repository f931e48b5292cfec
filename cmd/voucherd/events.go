package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"time"

	"github.com/voucherd/voucherd/internal/httpapi"
	"github.com/voucherd/voucherd/internal/kafkalog"
	"github.com/voucherd/voucherd/internal/metrics"
	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/voucher"
	"github.com/voucherd/voucherd/internal/webhook"
)

// EventsConfig configures events out: webhooks, the feed's retention and
// the events topic (docs/events.md).
type EventsConfig struct {
	// AllowPrivate allows http webhook URLs and loopback, private and
	// link-local addresses (development and tests only).
	AllowPrivate bool
	// RetryFor, BackoffBase, BackoffMax and Timeout pace deliveries
	// (webhook.Config).
	RetryFor, BackoffBase, BackoffMax, Timeout time.Duration
	// Poll is the wait of the delivery loop when it found nothing to do.
	Poll time.Duration
	// Retention is how long events are kept.
	Retention time.Duration
	// Topic, when set (and Kafka brokers are), receives every event.
	Topic string
	// Reserved writes reservation.reserved for the feed and the topic even
	// while no webhook subscribes to it.
	Reserved bool
}

func registerEventsFlags(fs *flag.FlagSet, c *EventsConfig) {
	fs.BoolVar(&c.AllowPrivate, "webhook-allow-private", envBool("VOUCHERD_WEBHOOK_ALLOW_PRIVATE", false), "allow http webhook URLs and loopback, private and link-local addresses, for local development and tests (VOUCHERD_WEBHOOK_ALLOW_PRIVATE)")
	fs.DurationVar(&c.RetryFor, "webhook-retry-for", envDuration("VOUCHERD_WEBHOOK_RETRY_FOR", webhook.DefaultRetryFor), "how long a webhook delivery is retried before it is marked failed (VOUCHERD_WEBHOOK_RETRY_FOR)")
	fs.DurationVar(&c.BackoffBase, "webhook-backoff", envDuration("VOUCHERD_WEBHOOK_BACKOFF", webhook.DefaultBackoffBase), "wait after a delivery's first failed attempt, doubled after each further one, with jitter (VOUCHERD_WEBHOOK_BACKOFF)")
	fs.DurationVar(&c.BackoffMax, "webhook-backoff-max", envDuration("VOUCHERD_WEBHOOK_BACKOFF_MAX", webhook.DefaultBackoffMax), "longest wait between two attempts of a delivery (VOUCHERD_WEBHOOK_BACKOFF_MAX)")
	fs.DurationVar(&c.Timeout, "webhook-timeout", envDuration("VOUCHERD_WEBHOOK_TIMEOUT", webhook.DefaultTimeout), "bound on one delivery attempt (VOUCHERD_WEBHOOK_TIMEOUT)")
	fs.DurationVar(&c.Poll, "events-poll", envDuration("VOUCHERD_EVENTS_POLL", webhook.DefaultPoll), "wait of the events loop (sequencing, deliveries, topic) when it found nothing to do (VOUCHERD_EVENTS_POLL)")
	fs.DurationVar(&c.Retention, "events-retention", envDuration("VOUCHERD_EVENTS_RETENTION", webhook.DefaultRetention), "how long events stay in the feed (VOUCHERD_EVENTS_RETENTION)")
	fs.StringVar(&c.Topic, "events-topic", envOr("VOUCHERD_EVENTS_TOPIC", ""), "Kafka topic that receives every event, at least once (key = voucher code); empty: none (VOUCHERD_EVENTS_TOPIC)")
	fs.BoolVar(&c.Reserved, "events-reserved", envBool("VOUCHERD_EVENTS_RESERVED", false), "write reservation.reserved events for the feed and the topic even while no webhook subscribes to them; they cost a row per reservation (VOUCHERD_EVENTS_RESERVED)")
}

func (c EventsConfig) validate(brokers []string) error {
	if c.RetryFor < 0 || c.BackoffBase < 0 || c.BackoffMax < 0 || c.Timeout < 0 || c.Poll < 0 || c.Retention < 0 {
		return errors.New("webhook and events durations must not be negative")
	}
	if c.Topic != "" && len(brokers) == 0 {
		return errors.New("--events-topic needs --kafka-brokers")
	}
	return nil
}

// eventsParts are the event feed's and the webhooks' parts of one process.
type eventsParts struct {
	admin  *webhook.Service
	runner *webhook.Runner
	sink   *kafkalog.OutboxProducer
}

// openEvents wires events out. The store's event settings (the service's
// low-stock share, reserved events for the feed) are written here, so the
// triggers follow the configuration of the instance started last.
func openEvents(ctx context.Context, cfg Config, store *pgstore.Store, m *metrics.Metrics, log *slog.Logger) (*eventsParts, error) {
	c := cfg.Events
	share := cfg.LowStockShare
	if share == 0 { // as voucher.ServiceConfig reads it
		share = voucher.DefaultLowStockShare
	}
	if err := store.SetEventSettings(ctx, share, c.Reserved); err != nil {
		log.Warn("could not write the event settings; the previous ones stay", "err", err)
	}
	wcfg := webhook.Config{
		Store: store, RetryFor: c.RetryFor, BackoffBase: c.BackoffBase, BackoffMax: c.BackoffMax, Timeout: c.Timeout,
		Poll: c.Poll, AllowPrivate: c.AllowPrivate, Retention: c.Retention, Logger: log,
		Observer: metrics.NewWebhookMetrics(m.Registry),
	}
	e := &eventsParts{}
	if c.Topic != "" {
		kcfg, err := kafkaSecure(kafkaConfig(cfg, log), cfg)
		if err != nil {
			return nil, err
		}
		if e.sink, err = kafkalog.NewOutboxProducer(kcfg, c.Topic); err != nil {
			return nil, err
		}
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = e.sink.EnsureTopic(ectx)
		cancel()
		if kafkalog.IsConfigError(err) {
			e.sink.Close()
			return nil, kafkaStartError(err)
		} else if err != nil {
			log.Warn("could not create the events topic; events wait in the outbox until it exists", "topic", c.Topic, "err", err)
		}
		wcfg.Sink = e.sink
		// Before the first request: every event of a change made after the
		// start reaches the topic.
		if err := store.StartCursor(ctx, "kafka"); err != nil {
			e.close()
			return nil, err
		}
	}
	var err error
	if e.admin, err = webhook.NewService(wcfg); err != nil {
		e.close()
		return nil, err
	}
	if e.runner, err = webhook.NewRunner(wcfg); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *eventsParts) routes() func(mux *http.ServeMux, wrap func(route string, admin bool, h httpapi.HandlerFunc) http.Handler) {
	return httpapi.EventRoutes(e.admin)
}

func (e *eventsParts) close() {
	if e.runner != nil {
		e.runner.Stop()
	}
	if e.sink != nil {
		e.sink.Close()
	}
}

// bothRoutes registers a's routes then b's.
func bothRoutes(a, b func(*http.ServeMux, func(string, bool, httpapi.HandlerFunc) http.Handler)) func(*http.ServeMux, func(string, bool, httpapi.HandlerFunc) http.Handler) {
	return func(mux *http.ServeMux, wrap func(string, bool, httpapi.HandlerFunc) http.Handler) {
		a(mux, wrap)
		b(mux, wrap)
	}
}
