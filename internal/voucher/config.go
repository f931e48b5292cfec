package voucher

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"
)

// FlashWrites says how flash reservations reach the store after the gate.
type FlashWrites string

// Flash write modes.
const (
	// FlashSync writes each reservation that passed the gate to the store
	// before answering.
	FlashSync FlashWrites = "sync"
	// FlashKafka publishes a ReservedEvent and answers; a consumer writes the
	// store.
	FlashKafka FlashWrites = "kafka"
)

// Mode names the path a reservation took, for metrics and logs.
type Mode string

// Reservation paths.
const (
	ModeStandard   Mode = "standard"
	ModeFlashSync  Mode = "flash-sync"
	ModeFlashKafka Mode = "flash-kafka"
)

// Observer receives what the service decides, for metrics. Every method must
// be cheap and safe for concurrent use.
type Observer interface {
	// Reserved is called once per reserve call with the voucher code, its
	// path, the error code ("" for success) and whether it was a replay.
	Reserved(voucherCode string, mode Mode, code ErrorCode, replay bool, d time.Duration)
	// GateDecided is called for every gate answer.
	GateDecided(outcome GateOutcome)
	// Expired is called with the number of reservations the expiry released.
	Expired(n int)
	// Compensated is called when a use taken in the gate is given back
	// because the durable write failed.
	Compensated(mode Mode)
	// Threshold is called once per threshold crossing (thresholds.go).
	Threshold(e ThresholdEvent)
	// Refused is called once per reservation or validation the service
	// refused, with the operation (OpReservation, OpValidation) and the
	// reason: the refusal's Reason when it has one (NOT_ELIGIBLE's
	// EXPIRED, ALREADY_USED's CODE_USED, ...), else its code
	// (VOUCHER_NOT_FOUND, TOO_MANY_REQUESTS, INVALID_REQUEST,
	// OUT_OF_STOCK, ...). A validation answered valid=false is a refusal
	// too; answers that are not refusals (UNAVAILABLE, INTERNAL) are not
	// counted.
	Refused(op, reason string)
	// Stacked is called once per valid reservation of an order of several
	// codes (ReserveStack) with the write path it took, the number of
	// codes, the error code ("" for success), the position (1-based, in
	// the order given) of the code that refused it (0: none named), and
	// the uses the gate had taken for it and gave back before answering
	// (a partial stack's give-backs, flash-sync mode).
	Stacked(mode Mode, codes int, code ErrorCode, failedPosition, gaveBack int)
	// Validated is called once per validation with its outcome: "valid",
	// "replay", the refusal's reason (the NOT_ELIGIBLE reason, else the
	// code), or the error code of a validation that got no answer.
	Validated(outcome string)
}

type nopObserver struct{}

func (nopObserver) Reserved(string, Mode, ErrorCode, bool, time.Duration) {}
func (nopObserver) GateDecided(GateOutcome)                               {}
func (nopObserver) Expired(int)                                           {}
func (nopObserver) Compensated(Mode)                                      {}
func (nopObserver) Threshold(ThresholdEvent)                              {}
func (nopObserver) Refused(string, string)                                {}
func (nopObserver) Validated(string)                                      {}
func (nopObserver) Stacked(Mode, int, ErrorCode, int, int)                {}

// ServiceConfig configures a Service. Zero values mean defaults.
type ServiceConfig struct {
	// Store is required.
	Store Store
	// Gate is the Redis gate; nil means no Redis, and flash vouchers then
	// reserve through the standard path only if FlashFallback is set.
	Gate Gate
	// Events is required when FlashWrites is FlashKafka.
	Events EventLog
	// FlashWrites selects sync (default) or kafka writes for flash vouchers.
	FlashWrites FlashWrites
	// ReservationTTL is how long a RESERVED redemption holds its use
	// (default DefaultReservationTTL).
	ReservationTTL time.Duration
	// FlashFallback sends flash reservations through the standard path when
	// the gate is down (sync mode only). Off by default: the hot row is what
	// flash mode exists to avoid.
	FlashFallback bool
	// VoucherCacheTTL is how long voucher definitions are cached in process
	// for routing and eligibility (default DefaultVoucherCacheTTL; negative
	// disables).
	VoucherCacheTTL time.Duration
	// StaleVoucherMax is how long, counted from its last successful read, a
	// flash voucher's cached definition keeps being used in Kafka mode while
	// the store cannot be read, so that a sale goes on through a database
	// outage (default DefaultStaleVoucherMax; negative disables). A
	// definition changes only through the store, so none can change while
	// it is unreadable.
	StaleVoucherMax time.Duration
	// WarmupWait is how long a request waits for another instance's warm-up
	// of the same voucher (default DefaultWarmupWait).
	WarmupWait time.Duration
	// WriteTimeout bounds the durable write after the gate passed; it runs
	// detached from the client's cancellation so that a client hanging up
	// does not leave the write's outcome unknown (default DefaultWriteTimeout).
	WriteTimeout time.Duration
	// MaxHold bounds how long a hold may be RESERVED in total, counted from
	// the reservation, when it is extended (default DefaultMaxHold, or
	// ReservationTTL if that is longer; it may not be shorter).
	MaxHold time.Duration
	// LowStockShare is the share of totalLimit below which free uses make
	// a voucher low on stock (threshold events; default
	// DefaultLowStockShare; negative disables threshold events).
	LowStockShare float64
	// Notifier receives threshold events besides the log and the Observer
	// (optional; the Kafka events topic).
	Notifier Notifier
	// HeldOutCacheTTL is how long the flash paths reuse one read of a
	// sold-out voucher's holds to tell HELD_OUT from OUT_OF_STOCK (default
	// DefaultHeldOutCacheTTL; negative reads every time).
	HeldOutCacheTTL time.Duration
	// Instance is this process's id, recorded as the owner of the holds it
	// takes so that reconciliation can tell when their writer is gone
	// (default: random). Two processes must never share one.
	Instance string
	// HeartbeatTTL is how long a beat of this instance (Heartbeat) keeps
	// it alive in the gate (default DefaultHeartbeatTTL); beat at least
	// every third of it.
	HeartbeatTTL time.Duration
	// UnknownCodeLimit is how many look-ups of codes that do not exist a
	// customer may make per minute (reservations and validations); past
	// it the customer's reservations and validations answer
	// CodeTooManyRequests for UnknownCodeBlock, decided in memory without
	// the store (default DefaultUnknownCodeLimit; negative disables).
	UnknownCodeLimit int
	// UnknownCodeBlock is how long a customer past UnknownCodeLimit is
	// refused (default DefaultUnknownCodeBlock).
	UnknownCodeBlock time.Duration
	// UnknownCodeLimitPerClient and UnknownCodeLimitPerKey count the same
	// look-ups per client address and per API key (Requester), so that a
	// fresh customerId per request does not escape the limit (defaults
	// DefaultUnknownCodeLimitPerClient and DefaultUnknownCodeLimitPerKey;
	// negative disables). Past one, every reservation and validation of
	// that client or key is refused for UnknownCodeBlock.
	UnknownCodeLimitPerClient int
	UnknownCodeLimitPerKey    int
	// ReconcileChunk is how many orders reconciliation compares at a
	// time: the store's page of held rows and the gate lookups per call
	// (default DefaultReconcileChunk). The gate's own chunk is its scan
	// count.
	ReconcileChunk int
	// ReconcileShare is the largest share of its time a reconciliation
	// of one voucher spends working: after each chunk it pauses for as
	// long as the chunk took times (1 - share) / share, so that it takes
	// at most that share of one core across voucherd, Redis and
	// PostgreSQL, however big the voucher (0, or 1 and above: no pause).
	ReconcileShare float64
	// ReconcileFindings is the most orderIds a ReconcileReport names per
	// kind of finding (default MaxFindings); the report counts the rest.
	ReconcileFindings int
	// Clock returns the current time (default time.Now).
	Clock func() time.Time
	// Logger receives warnings about compensations and repairs.
	Logger *slog.Logger
	// Observer receives decisions for metrics.
	Observer Observer
}

// Defaults of ServiceConfig.
const (
	// DefaultReservationTTL is the default of ServiceConfig.ReservationTTL.
	DefaultReservationTTL = 15 * time.Minute
	// DefaultVoucherCacheTTL is the default of ServiceConfig.VoucherCacheTTL.
	DefaultVoucherCacheTTL = time.Second
	// DefaultWarmupWait is the default of ServiceConfig.WarmupWait.
	DefaultWarmupWait = 500 * time.Millisecond
	// DefaultWriteTimeout is the default of ServiceConfig.WriteTimeout.
	DefaultWriteTimeout = 5 * time.Second
)

// withDefaults checks cfg and fills in the defaults of its zero fields.
func (cfg *ServiceConfig) withDefaults() error {
	if cfg.Store == nil {
		return errors.New("voucher: ServiceConfig.Store is required")
	}
	if cfg.FlashWrites == "" {
		cfg.FlashWrites = FlashSync
	}
	if cfg.FlashWrites != FlashSync && cfg.FlashWrites != FlashKafka {
		return errors.New("voucher: FlashWrites must be sync or kafka")
	}
	if cfg.FlashWrites == FlashKafka && (cfg.Events == nil || cfg.Gate == nil) {
		return errors.New("voucher: kafka writes need a Gate and an EventLog")
	}
	if cfg.ReservationTTL <= 0 {
		cfg.ReservationTTL = DefaultReservationTTL
	}
	switch {
	case cfg.MaxHold == 0:
		cfg.MaxHold = max(DefaultMaxHold, cfg.ReservationTTL)
	case cfg.MaxHold < cfg.ReservationTTL:
		return errors.New("voucher: MaxHold must not be shorter than ReservationTTL")
	}
	switch {
	case cfg.LowStockShare == 0:
		cfg.LowStockShare = DefaultLowStockShare
	case cfg.LowStockShare > 1:
		return errors.New("voucher: LowStockShare must be at most 1")
	}
	if cfg.HeldOutCacheTTL == 0 {
		cfg.HeldOutCacheTTL = DefaultHeldOutCacheTTL
	}
	if cfg.VoucherCacheTTL == 0 {
		cfg.VoucherCacheTTL = DefaultVoucherCacheTTL
	}
	if cfg.StaleVoucherMax == 0 {
		cfg.StaleVoucherMax = DefaultStaleVoucherMax
	}
	if cfg.WarmupWait <= 0 {
		cfg.WarmupWait = DefaultWarmupWait
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.UnknownCodeLimit == 0 {
		cfg.UnknownCodeLimit = DefaultUnknownCodeLimit
	}
	if cfg.UnknownCodeLimitPerClient == 0 {
		cfg.UnknownCodeLimitPerClient = DefaultUnknownCodeLimitPerClient
	}
	if cfg.UnknownCodeLimitPerKey == 0 {
		cfg.UnknownCodeLimitPerKey = DefaultUnknownCodeLimitPerKey
	}
	if cfg.UnknownCodeBlock <= 0 {
		cfg.UnknownCodeBlock = DefaultUnknownCodeBlock
	}
	if cfg.Instance == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.Instance = hex.EncodeToString(b[:])
	}
	if !validInstance(cfg.Instance) {
		return errors.New("voucher: Instance must be 1-64 letters, digits, '-' or '_'")
	}
	if cfg.HeartbeatTTL <= 0 {
		cfg.HeartbeatTTL = DefaultHeartbeatTTL
	}
	if cfg.ReconcileChunk <= 0 {
		cfg.ReconcileChunk = DefaultReconcileChunk
	}
	if cfg.ReconcileFindings <= 0 {
		cfg.ReconcileFindings = MaxFindings
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	return nil
}

// DefaultReconcileChunk is the default of ServiceConfig.ReconcileChunk.
const DefaultReconcileChunk = 500
