// Package kafkalog is the Kafka adapter of voucherd (franz-go): it carries
// reservations decided by the Redis gate to PostgreSQL in flash-Kafka mode.
//
// Log implements voucher.EventLog. PublishReserved writes a VoucherReserved
// event (key = voucher code, acks=all, idempotent producer) and answers only
// once Kafka has it; CaughtUp tells the warm-up whether the writer group has
// applied everything published so far.
//
// Consumer is the writer: a consumer group that applies batches of events to
// the store, sends the events the store rejects (and records it cannot
// decode, that are not signed when they must be, and events Config.Check
// refuses) to a dead-letter topic, and commits offsets only after the store
// has committed. A store failure is retried on the same records; nothing is
// skipped, and replays are harmless because the store applies idempotently.
//
// Notifier publishes threshold events (VoucherLowStock, VoucherSoldOut) to
// an events topic for shops to consume, asynchronously and at most once
// (notify.go).
//
// Driver errors become voucher.Unavailable here, once.
package kafkalog

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/voucherd/voucherd/internal/tlserr"
)

// Defaults of Config.
const (
	DefaultTopic             = "voucherd.reservations"
	DefaultDeadLetterTopic   = "voucherd.reservations.dlq"
	DefaultEventsTopic       = "voucherd.events"
	DefaultEventsBuffer      = 1000
	DefaultEventsDelivery    = 30 * time.Second
	DefaultGroup             = "voucherd-writer"
	DefaultClientID          = "voucherd"
	DefaultPartitions        = 3
	DefaultReplicationFactor = 1
	DefaultProduceTimeout    = 2 * time.Second
	DefaultSessionTimeout    = 10 * time.Second
	DefaultLinger            = 5 * time.Millisecond
	DefaultBatchSize         = 500
	DefaultFetchMinBytes     = 1
	DefaultFetchMaxWait      = 5 * time.Second
	DefaultBatchTimeout      = 30 * time.Second
	DefaultRetryBackoff      = 200 * time.Millisecond
	DefaultMaxRetryBackoff   = time.Second
)

// HeaderDeadLetterReason is the header of a dead-letter record that says why
// the record was not applied.
const HeaderDeadLetterReason = "voucherd-dlq-reason"

// Headers of a dead-letter record that say where the record came from.
const (
	HeaderDeadLetterTopic     = "voucherd-dlq-topic"
	HeaderDeadLetterPartition = "voucherd-dlq-partition"
	HeaderDeadLetterOffset    = "voucherd-dlq-offset"
)

// Config configures Log and Consumer. Zero values mean the defaults above.
type Config struct {
	// Brokers are the seed brokers, "host:port". Required.
	Brokers []string
	// Topic carries VoucherReserved events.
	Topic string
	// DeadLetterTopic receives events the store rejects or Check refuses,
	// and records that cannot be decoded, with the reason in
	// HeaderDeadLetterReason.
	DeadLetterTopic string
	// EventsTopic carries threshold events (Notifier).
	EventsTopic string
	// EventsBuffer bounds the threshold events waiting to be sent; a full
	// buffer drops new ones (Notifier).
	EventsBuffer int
	// EventsDelivery bounds how long the producer keeps trying to send a
	// threshold event before it drops it (Notifier; at least 1s).
	EventsDelivery time.Duration
	// Group is the writer's consumer group; CaughtUp and Lag read its
	// committed offsets.
	Group string
	// ClientID names the clients in broker logs and quotas.
	ClientID string

	// Partitions and ReplicationFactor are used by EnsureTopics when it
	// creates a topic; existing topics are left as they are.
	Partitions        int32
	ReplicationFactor int16

	// ProduceTimeout bounds PublishReserved: without an ack by then the
	// caller gets CodeUnavailable.
	ProduceTimeout time.Duration
	// Linger is how long the producer waits for more records before it
	// sends a batch. The idempotent producer keeps up to five requests in
	// flight, so a request leaves after each linger: the linger sets how
	// many records share a request, and the broker's cost is mostly per
	// request. Negative means no linger.
	Linger time.Duration
	// SendWhenIdle, when set, replaces the linger of the reservation
	// events: the events published while a produce awaits its
	// acknowledgement leave together as soon as it is answered, and an
	// event published while none is in flight leaves at once (waves.go).
	// In a contended sale the requests then wait for the produce in
	// flight, not for a fixed linger on top of it.
	SendWhenIdle bool

	// SessionTimeout is how long the group waits for a consumer that stopped
	// heartbeating (a crash) before it hands its partitions to another. It
	// bounds how long events wait after a consumer crash, and so how long
	// warm-up refuses after Redis lost a voucher. Brokers accept 6s-30min by
	// default (group.min/max.session.timeout.ms).
	SessionTimeout time.Duration

	// BatchSize is the most records the consumer applies at once.
	BatchSize int
	// FetchMinBytes and FetchMaxWait let the broker hold the consumer's
	// fetch until FetchMinBytes of events have arrived or FetchMaxWait has
	// passed. The defaults answer a fetch as soon as one event is there;
	// larger values trade up to FetchMaxWait of lag between a 201 and its
	// row for fewer, larger store writes. A backlog is fetched at once.
	FetchMinBytes int32
	FetchMaxWait  time.Duration
	// BatchTimeout bounds applying one batch (store, dead letters, commit).
	BatchTimeout time.Duration
	// RetryBackoff is the first pause after a failed batch; it doubles up
	// to MaxRetryBackoff while failures go on.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration

	// Logger receives warnings about failed batches; nil means slog.Default().
	Logger *slog.Logger

	// TLS, when set, is how every client (producer, consumer, admin,
	// notifier) dials the brokers; nil dials plain TCP.
	TLS *tls.Config
	// SASL, when set, authenticates every client's connections (PLAIN or
	// SCRAM, from franz-go's pkg/sasl); nil does not authenticate.
	SASL sasl.Mechanism

	// ClientOpts are added to the options of every franz-go client (the
	// producer, the consumer, the notifier), after voucherd's own: hooks
	// such as tracing.
	ClientOpts []kgo.Opt
	// SigningKey, when set (at least MinSigningKeyLen bytes), signs every
	// reservation event PublishReserved writes (HeaderSignature), and the
	// consumer dead-letters every record without a valid signature before
	// it decodes it: only holders of the key can add reservations through
	// the topic. Every producing and consuming instance needs the same key.
	SigningKey []byte
	// Check, when set, is asked about every decoded event before the
	// consumer applies it; an event it refuses is dead-lettered with the
	// verdict as the reason, and never reaches the store. An error from it
	// fails the batch, which is retried. voucherd sets it to a
	// voucher.EventChecker; nil checks nothing (tests of the transport).
	Check EventCheck
	// ApplyContext, when set, wraps the context of the consumer's write of a
	// batch: it gets the context of each record written (set by the client's
	// hooks) and returns the context to write with and a function called
	// once the write is done. Tracing uses it to put the write in the
	// records' traces.
	ApplyContext func(ctx context.Context, records []context.Context) (context.Context, func())
}

// topicPattern is Kafka's rule for topic names.
var topicPattern = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// withDefaults fills zero values and validates the result.
func (c Config) withDefaults() (Config, error) {
	if len(c.Brokers) == 0 {
		return c, errors.New("kafkalog: Config.Brokers is required")
	}
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = DefaultDeadLetterTopic
	}
	if c.EventsTopic == "" {
		c.EventsTopic = DefaultEventsTopic
	}
	if c.EventsBuffer == 0 {
		c.EventsBuffer = DefaultEventsBuffer
	}
	if c.EventsDelivery == 0 {
		c.EventsDelivery = DefaultEventsDelivery
	}
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = DefaultReplicationFactor
	}
	if c.ProduceTimeout == 0 {
		c.ProduceTimeout = DefaultProduceTimeout
	}
	switch {
	case c.Linger == 0:
		c.Linger = DefaultLinger
	case c.Linger < 0:
		c.Linger = 0
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.FetchMinBytes == 0 {
		c.FetchMinBytes = DefaultFetchMinBytes
	}
	if c.FetchMaxWait == 0 {
		c.FetchMaxWait = DefaultFetchMaxWait
	}
	if c.BatchTimeout == 0 {
		c.BatchTimeout = DefaultBatchTimeout
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.MaxRetryBackoff == 0 {
		c.MaxRetryBackoff = DefaultMaxRetryBackoff
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}

	switch {
	case !topicPattern.MatchString(c.Topic):
		return c, fmt.Errorf("kafkalog: invalid topic name %q", c.Topic)
	case !topicPattern.MatchString(c.DeadLetterTopic):
		return c, fmt.Errorf("kafkalog: invalid dead-letter topic name %q", c.DeadLetterTopic)
	case c.Topic == c.DeadLetterTopic:
		return c, errors.New("kafkalog: the dead-letter topic must differ from the topic")
	case !topicPattern.MatchString(c.EventsTopic):
		return c, fmt.Errorf("kafkalog: invalid events topic name %q", c.EventsTopic)
	case c.EventsTopic == c.Topic || c.EventsTopic == c.DeadLetterTopic:
		return c, errors.New("kafkalog: the events topic must differ from the reservation and dead-letter topics")
	case c.EventsBuffer < 0:
		return c, errors.New("kafkalog: EventsBuffer must be > 0")
	case c.EventsDelivery < time.Second:
		// franz-go's floor for a record's delivery timeout.
		return c, errors.New("kafkalog: EventsDelivery must be at least 1s")
	case c.Partitions < 0:
		return c, fmt.Errorf("kafkalog: Partitions must be > 0, got %d", c.Partitions)
	case c.ReplicationFactor < 0:
		return c, fmt.Errorf("kafkalog: ReplicationFactor must be > 0, got %d", c.ReplicationFactor)
	case c.SessionTimeout < 0:
		return c, errors.New("kafkalog: SessionTimeout must be > 0")
	case c.ProduceTimeout < 0 || c.BatchTimeout < 0:
		return c, errors.New("kafkalog: timeouts must be > 0")
	case c.FetchMinBytes < 0 || c.FetchMaxWait < time.Millisecond:
		return c, errors.New("kafkalog: need FetchMinBytes >= 0 and FetchMaxWait >= 1ms")
	case c.BatchSize < 0:
		return c, fmt.Errorf("kafkalog: BatchSize must be > 0, got %d", c.BatchSize)
	case c.RetryBackoff < 0 || c.MaxRetryBackoff < c.RetryBackoff:
		return c, errors.New("kafkalog: need 0 < RetryBackoff <= MaxRetryBackoff")
	case len(c.SigningKey) > 0 && len(c.SigningKey) < MinSigningKeyLen:
		return c, fmt.Errorf("kafkalog: SigningKey must be at least %d bytes", MinSigningKeyLen)
	}
	return c, nil
}

// securityOpts are the franz-go options of Config.TLS and Config.SASL, given
// to every client this package makes.
func (c Config) securityOpts() []kgo.Opt {
	var opts []kgo.Opt
	if c.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(c.TLS.Clone()))
	}
	if c.SASL != nil {
		opts = append(opts, kgo.SASL(c.SASL))
	}
	return opts
}

// IsConfigError reports whether err, from any call of this package, says
// that the brokers refused this client's settings rather than being down:
// SASL authentication failed, or the TLS handshake failed on a certificate
// (an unknown authority, a wrong name, a client certificate refused).
// Retrying cannot fix such an error; a process should stop and say so.
func IsConfigError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.IllegalSaslState) ||
		errors.Is(err, kerr.UnsupportedSaslMechanism) {
		return true
	}
	return tlserr.Permanent(err)
}
