package voucher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
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
}

type nopObserver struct{}

func (nopObserver) Reserved(string, Mode, ErrorCode, bool, time.Duration) {}
func (nopObserver) GateDecided(GateOutcome)                               {}
func (nopObserver) Expired(int)                                           {}
func (nopObserver) Compensated(Mode)                                      {}
func (nopObserver) Threshold(ThresholdEvent)                              {}

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
	// Clock returns the current time (default time.Now).
	Clock func() time.Time
	// Logger receives warnings about compensations and repairs.
	Logger *slog.Logger
	// Observer receives decisions for metrics.
	Observer Observer
}

// Service routes reservations through the standard, flash-sync or
// flash-kafka path and keeps the gate and the store in step for confirm,
// release, expiry, creation and patches.
type Service struct {
	cfg   ServiceConfig
	store Store
	gate  Gate
	obs   Observer
	log   *slog.Logger

	mu         sync.Mutex
	cache      map[string]cachedVoucher
	refreshing map[string]bool // codes whose definition is being re-read

	heldOut heldOutCache
	guess   guessLimiter

	// unsettled holds the flash-sync orders whose durable write ended with
	// an unknown outcome, keyed by code and orderId, until SettleUnknown
	// or a retry of the order settles them; guarded by mu.
	unsettled map[orderKey]unsettledWrite
	// unknownStandard holds the standard-mode orders whose write ended with
	// an unknown outcome on this instance, until an answer other than 503
	// settles them: a retry that fails to reach the store says the outcome
	// is still unknown; guarded by mu.
	unknownStandard map[orderKey]struct{}
	// absentSince records, per instance id seen without a live heartbeat,
	// when that was first seen (confirmedDead); guarded by mu.
	absentSince map[string]time.Time
	// campaignIDs maps campaign codes this process resolved to their
	// campaign's id (campaignOf), at most maxCampaignIDs; guarded by mu.
	campaignIDs map[string]string
}

type orderKey struct{ code, orderID string }

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

// NewService validates cfg and returns a Service.
func NewService(cfg ServiceConfig) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("voucher: ServiceConfig.Store is required")
	}
	if cfg.FlashWrites == "" {
		cfg.FlashWrites = FlashSync
	}
	if cfg.FlashWrites != FlashSync && cfg.FlashWrites != FlashKafka {
		return nil, errors.New("voucher: FlashWrites must be sync or kafka")
	}
	if cfg.FlashWrites == FlashKafka && (cfg.Events == nil || cfg.Gate == nil) {
		return nil, errors.New("voucher: kafka writes need a Gate and an EventLog")
	}
	if cfg.ReservationTTL <= 0 {
		cfg.ReservationTTL = DefaultReservationTTL
	}
	switch {
	case cfg.MaxHold == 0:
		cfg.MaxHold = max(DefaultMaxHold, cfg.ReservationTTL)
	case cfg.MaxHold < cfg.ReservationTTL:
		return nil, errors.New("voucher: MaxHold must not be shorter than ReservationTTL")
	}
	switch {
	case cfg.LowStockShare == 0:
		cfg.LowStockShare = DefaultLowStockShare
	case cfg.LowStockShare > 1:
		return nil, errors.New("voucher: LowStockShare must be at most 1")
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
	if cfg.UnknownCodeBlock <= 0 {
		cfg.UnknownCodeBlock = DefaultUnknownCodeBlock
	}
	if cfg.Instance == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.Instance = hex.EncodeToString(b[:])
	}
	if !validInstance(cfg.Instance) {
		return nil, errors.New("voucher: Instance must be 1-64 letters, digits, '-' or '_'")
	}
	if cfg.HeartbeatTTL <= 0 {
		cfg.HeartbeatTTL = DefaultHeartbeatTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	return &Service{cfg: cfg, store: cfg.Store, gate: cfg.Gate, obs: cfg.Observer, log: cfg.Logger,
		cache: map[string]cachedVoucher{}, refreshing: map[string]bool{},
		unsettled: map[orderKey]unsettledWrite{}, unknownStandard: map[orderKey]struct{}{},
		absentSince: map[string]time.Time{}, campaignIDs: map[string]string{},
		guess: guessLimiter{limit: cfg.UnknownCodeLimit, block: cfg.UnknownCodeBlock, m: map[string]*guesser{}}}, nil
}

// Config returns the effective configuration (defaults filled in).
func (s *Service) Config() ServiceConfig { return s.cfg }

// CreateVoucher stores a new voucher and, for a flash voucher, loads it into
// the gate so the first requests of the sale find it ready.
func (s *Service) CreateVoucher(ctx context.Context, v Voucher) (Voucher, error) {
	if err := v.ValidateNew(s.cfg.Clock()); err != nil {
		return Voucher{}, err
	}
	created, err := s.store.CreateVoucher(ctx, v)
	if err != nil {
		return Voucher{}, err
	}
	s.forget(created.Code)
	if created.FlashSale && s.gate != nil {
		if _, err := s.Warmup(ctx, created.Code); err != nil {
			// The voucher exists; the first reservation loads it lazily.
			s.log.WarnContext(ctx, "warm-up after create failed; will load on first use", "code", created.Code, "err", err)
		}
	}
	return created, nil
}

// Voucher returns a voucher with live counts.
func (s *Service) Voucher(ctx context.Context, code string) (Voucher, error) {
	if !ValidCode(code) {
		return Voucher{}, Errorf(CodeVoucherNotFound, "voucher %q not found", code)
	}
	return s.store.Voucher(ctx, code)
}

// PatchVoucher changes a voucher; for a loaded flash voucher the gate's
// remaining count moves by exactly the change of totalLimit.
func (s *Service) PatchVoucher(ctx context.Context, code string, p Patch) (Voucher, error) {
	if !ValidCode(code) {
		return Voucher{}, Errorf(CodeVoucherNotFound, "voucher %q not found", code)
	}
	if p.Empty() {
		return Voucher{}, Errorf(CodeInvalidRequest, "patch changes nothing")
	}
	if err := p.Validate(s.cfg.Clock()); err != nil {
		return Voucher{}, err
	}
	before, after, err := s.store.PatchVoucher(ctx, code, p)
	if err != nil {
		return Voucher{}, err
	}
	s.forget(code)
	if s.gate != nil && (before.FlashSale || after.FlashSale) {
		delta := int64(after.TotalLimit) - int64(before.TotalLimit)
		if err := s.gate.AdjustLimit(ctx, after, delta); err != nil {
			// The database is right; reconciliation reports the drift and the
			// gate never hands out more than its own count, so this can only
			// undersell until repaired.
			s.log.ErrorContext(ctx, "patch not applied to the gate", "code", code, "delta", delta, "err", err)
		}
	}
	return after, nil
}

// Reserve takes one use of a voucher for an order, or explains why not.
func (s *Service) Reserve(ctx context.Context, req ReserveRequest) (res Reservation, err error) {
	start := s.cfg.Clock()
	mode := ModeStandard
	defer func() {
		s.obs.Reserved(req.Code, mode, CodeOf(err), res.Replay, s.cfg.Clock().Sub(start))
		s.noteRefusal(OpReservation, err)
	}()
	if err := req.Validate(); err != nil {
		return Reservation{}, err
	}
	if err := s.guessCheck(req.CustomerID); err != nil {
		return Reservation{}, err
	}
	// A campaign code resolves to its campaign's budget (v.Code is then the
	// campaign id): in standard mode the store resolves the code again in
	// the reservation itself; a flash campaign is gated under the budget's
	// keys with the code in the hold.
	v, pre, err := s.definition(ctx, req.Code, req.OrderID, start)
	if err != nil {
		s.guessNoted(req.CustomerID, err)
		return Reservation{}, err
	}
	// The one place customerIds are normalised: every mode, the store and
	// the gate see (and keep, and answer) the voucher's form only.
	req.CustomerID = v.CustomerIDNormalization.Apply(req.CustomerID)
	if v.Campaign && v.Code == req.Code {
		// A budget is reserved only through its codes.
		return Reservation{}, Reject(CodeVoucherNotFound, "", Facts{Voucher: req.Code})
	}
	// Threshold events once the answer is decided (thresholds.go), of the
	// voucher or campaign budget whose stock moved.
	defer func() {
		if err == nil {
			taken := res
			taken.VoucherCode = v.Code
			s.noteTake(taken, mode)
		}
	}()
	if !v.FlashSale {
		if err := v.CheckEligible(req.OrderAmount, start); err != nil {
			return s.ineligibleStandard(ctx, req, err, pre)
		}
		if req.ReplacesOrderID == "" {
			// A replacement may take over the code its replaced order holds.
			if err := codeUsed(req.Code, pre); err != nil {
				return Reservation{}, err
			}
		}
		return s.reserveStandardTracked(ctx, req)
	}
	if s.gate == nil {
		if s.cfg.FlashFallback {
			return s.reserveStandard(ctx, req)
		}
		return Reservation{}, Unavailable(nil, "flash voucher %s needs Redis, which is not configured", req.Code)
	}
	mode = ModeFlashSync
	if s.cfg.FlashWrites == FlashKafka {
		mode = ModeFlashKafka
	}
	res, fellBack, err := s.reserveFlash(ctx, req, v, start)
	if fellBack {
		mode = ModeStandard
	}
	return res, err
}

func (s *Service) reserveStandard(ctx context.Context, req ReserveRequest) (Reservation, error) {
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	return s.store.Reserve(wctx, req, s.cfg.Clock(), s.cfg.ReservationTTL)
}

// ineligibleStandard answers a reservation of a standard voucher that its
// definition refuses (inelig): a known orderId as voucherd_reserve
// answers it (replay, ORDER_CONFLICT, ORDER_RELEASED), else inelig. It
// takes the orderId's row from pre (read with the definition), else reads
// it with the statement that answers an unknown code (CodeResolver, when
// the store has it), and writes nothing, so that the refusal costs what
// the look-up of an unknown code costs. A cached definition may be up to
// VoucherCacheTTL old: a voucher made eligible again on another instance
// is refused here that long (never the other way: an eligible definition
// still lets the store decide).
func (s *Service) ineligibleStandard(ctx context.Context, req ReserveRequest, inelig error, pre *Resolution) (Reservation, error) {
	if r, ok := s.store.(CodeResolver); pre == nil && ok {
		res, err := r.ResolveCode(ctx, req.Code, req.OrderID)
		if err != nil {
			return Reservation{}, err
		}
		pre = &res
	}
	if pre != nil && !pre.HasOrder {
		return Reservation{}, inelig
	}
	var row Redemption
	var err error
	if pre != nil {
		row = pre.Order
	} else {
		row, err = s.store.Order(ctx, req.OrderID)
	}
	switch {
	case IsCode(err, CodeReservationNotFound):
		return Reservation{}, inelig
	case err != nil:
		return Reservation{}, err
	case row.VoucherCode != req.Code || row.CustomerID != req.CustomerID:
		return Reservation{}, orderConflict(req.Code, req.OrderID, row.VoucherCode)
	case row.Status == StatusReleased:
		return Reservation{}, orderReleased(req.OrderID)
	}
	return Reservation{Redemption: row, Replay: true}, nil
}

// maxUnknownStandard bounds unknownStandard; past it the set starts over
// (a retry then answers a plain 503 while the store stays unreachable).
const maxUnknownStandard = 100_000

// reserveStandardTracked is reserveStandard for a standard voucher, keeping
// the OutcomeUnknown flag on every 503 for an order whose earlier write on
// this instance ended with an unknown outcome, until an answer settles it
// (the store is idempotent by orderId, so a retry that reaches it does).
func (s *Service) reserveStandardTracked(ctx context.Context, req ReserveRequest) (Reservation, error) {
	res, err := s.reserveStandard(ctx, req)
	k := orderKey{req.Code, req.OrderID}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case IsOutcomeUnknown(err):
		if len(s.unknownStandard) >= maxUnknownStandard {
			s.unknownStandard = map[orderKey]struct{}{}
		}
		s.unknownStandard[k] = struct{}{}
	case IsCode(err, CodeUnavailable):
		if _, unknown := s.unknownStandard[k]; unknown {
			return res, outcomeUnknown(err, req.OrderID)
		}
	default:
		delete(s.unknownStandard, k)
	}
	return res, err
}

// writeContext detaches a durable write from the client's cancellation and
// bounds it, so that its outcome is known when we answer.
func (s *Service) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.cfg.WriteTimeout)
}

// Retry limits of reserveFlash.
const (
	// pendingReplayPolls is how many times a Kafka-mode replay of an order
	// whose hold is still pending asks the gate again, pendingReplayPoll
	// apart, before it looks at the store (about one second in all).
	pendingReplayPolls = 50
	// pendingReplayPoll is the wait between those polls.
	pendingReplayPoll = 20 * time.Millisecond
	// notLoadedWarmups is how many warm-ups a reservation tries when the
	// gate answers GateNotLoaded; then sync mode falls back to the
	// standard path and Kafka mode answers 503 with an unknown outcome.
	notLoadedWarmups = 2
)

// reserveFlash runs the gate and then the durable write of the configured
// mode. fellBack reports that the standard path answered instead. v is the
// voucher, or the budget of the campaign whose code req names: the gate
// keys are then the budget's (v.Code, the campaign id) and the hold
// carries the code.
func (s *Service) reserveFlash(ctx context.Context, req ReserveRequest, v Voucher, now time.Time) (res Reservation, fellBack bool, err error) {
	gateCode, campaignCode := v.Code, campaignCodeOf(req.Code, v)
	if err := v.CheckEligible(req.OrderAmount, now); err != nil {
		// A known orderId is answered as such even after the window closed,
		// as the standard path does.
		known, kerr := s.knownOrder(ctx, req, gateCode, campaignCode)
		switch {
		case known != nil:
			return *known, false, nil
		case IsCode(kerr, CodeOrderConflict) || IsCode(kerr, CodeOrderReleased):
			return Reservation{}, false, kerr
		}
		return Reservation{}, false, err
	}
	kafka := s.cfg.FlashWrites == FlashKafka
	// The gate keeps milliseconds; answer with what a replay will read back.
	at := now.Truncate(time.Millisecond)
	hold := Hold{
		OrderID: req.OrderID, CustomerID: req.CustomerID, OrderAmount: req.OrderAmount,
		DiscountAmount: v.Discount().Compute(req.OrderAmount), ReservedAt: at, ExpiresAt: at.Add(s.cfg.ReservationTTL),
		Pending: kafka, Owner: s.cfg.Instance, Replaces: req.ReplacesOrderID, Code: campaignCode,
	}
	for attempt := 0; ; attempt++ {
		var dec GateDecision
		var err error
		if hold.Replaces != "" {
			dec, err = s.gate.Replace(ctx, gateCode, hold, hold.Replaces)
		} else {
			dec, err = s.gate.Reserve(ctx, gateCode, v.PerUserLimit, hold)
		}
		if err != nil {
			if s.cfg.FlashFallback && !kafka {
				res, err := s.reserveStandard(ctx, req)
				return res, true, err
			}
			res, err := s.gateDown(ctx, req, gateCode, err)
			return res, false, err
		}
		s.obs.GateDecided(dec.Outcome)
		switch dec.Outcome {
		case GateTaken:
			if kafka {
				res, err := s.publish(ctx, gateCode, hold)
				if err == nil && !res.Replay && hold.Replaces == "" {
					// The gate's count is the atomic step in this mode;
					// the store learns of the take later.
					res.Taken = &Stock{Remaining: dec.Remaining, TotalLimit: v.TotalLimit}
				}
				return res, false, err
			}
			res, err := s.writeTaken(ctx, req, gateCode, hold)
			return res, false, err
		case GateReplay:
			if !kafka {
				// The store is idempotent by orderId: it returns the row the
				// first request wrote, or writes it if that request's write is
				// still to come or its outcome was unknown (the gate already
				// holds the use). A 503 here leaves the order as unsettled as
				// it was: the gate holds a use for it.
				res, err := s.reserveStandard(ctx, req)
				if !IsCode(err, CodeUnavailable) {
					s.settled(gateCode, req.OrderID)
				}
				return res, false, outcomeUnknown(err, req.OrderID)
			}
			if !dec.Hold.Pending {
				res, err := s.replayDurable(ctx, gateCode, dec.Hold)
				return res, false, err
			}
			// The first request is still waiting for Kafka's ack (or its
			// outcome was unknown); answering 201 now could promise a
			// reservation that then fails. Once the store has the row, the
			// hold is durable whatever the producer said.
			if attempt < pendingReplayPolls && sleepCtx(ctx, pendingReplayPoll) == nil {
				continue
			}
			if row, err := s.store.Redemption(ctx, req.Code, req.OrderID); err == nil && row.CustomerID == req.CustomerID {
				if row.Status == StatusReleased {
					// Released (or fenced) in the store: the hold is stale.
					if _, err := s.gate.Release(ctx, gateCode, req.OrderID, ReleaseMark); err != nil {
						s.log.WarnContext(ctx, "stale hold not released in the gate", "code", req.Code, "orderId", req.OrderID, "err", err)
					}
					return Reservation{}, false, orderReleased(req.OrderID)
				}
				if _, err := s.gate.Commit(ctx, gateCode, dec.Hold); err != nil {
					s.log.WarnContext(ctx, "hold not marked durable in the gate", "code", req.Code, "orderId", req.OrderID, "err", err)
				}
				return Reservation{Redemption: row, Replay: true}, false, nil
			}
			if s.fenceOrphan(ctx, gateCode, dec.Hold) {
				return Reservation{}, false, Errorf(CodeOrderReleased,
					"order %s never reached the database and was released; start a new attempt with a new orderId", req.OrderID)
			}
			// The hold is pending: the first attempt's event may still be
			// written, so this 503 carries the flag as the first one did.
			return Reservation{}, false, &Error{Code: CodeUnavailable, OutcomeUnknown: true,
				Message: "order " + req.OrderID + " is still being written and may or may not stand: retry with the same orderId"}
		case GateConflict:
			return Reservation{}, false, orderConflict(req.Code, req.OrderID, "")
		case GateReleased:
			return Reservation{}, false, orderReleased(req.OrderID)
		case GateQuotaHeld:
			return Reservation{}, false, Reject(CodeAlreadyUsed, "", Facts{Voucher: req.Code, CustomerID: req.CustomerID, PerUserLimit: v.PerUserLimit})
		case GateSoldOut:
			return Reservation{}, false, s.soldOutInGate(ctx, gateCode, now)
		case GateCodeUsed:
			if hold.Replaces != "" && !kafka && !s.replacedHeld(ctx, req) {
				// The replaced order is checked before the code (as
				// voucherd_replace does), and in sync mode only the store
				// knows whether it was confirmed.
				return Reservation{}, false, Reject(CodeReplacedOrderNotHeld, "",
					Facts{Voucher: req.Code, OrderID: req.ReplacesOrderID, CustomerID: req.CustomerID})
			}
			return Reservation{}, false, Reject(CodeAlreadyUsed, ReasonCodeUsed, Facts{Voucher: req.Code})
		case GateNotHeld:
			return Reservation{}, false, Reject(CodeReplacedOrderNotHeld, "",
				Facts{Voucher: req.Code, OrderID: req.ReplacesOrderID, CustomerID: req.CustomerID})
		case GateNotLoaded:
			if attempt >= notLoadedWarmups {
				if !kafka {
					res, err := s.reserveStandard(ctx, req)
					return res, true, err
				}
				// The consumer may be behind with this very order's event
				// (a retry after Redis lost its hold): not "nothing taken".
				return Reservation{}, false, &Error{Code: CodeUnavailable, OutcomeUnknown: true,
					Message: "voucher " + req.Code + " is not loaded into Redis yet and events may still be on their way to the database; retry with the same orderId"}
			}
			if _, err := s.Warmup(ctx, gateCode); err != nil && !IsCode(err, CodeUnavailable) {
				return Reservation{}, false, err
			}
		default:
			return Reservation{}, false, Errorf(CodeInternal, "unexpected gate outcome %d", dec.Outcome)
		}
	}
}

// replacedHeld reports whether the order req replaces is, in the store,
// req's customer's RESERVED hold; true also when the store cannot tell
// (the gate's answer then stands). The gate's copy of an order does not
// know of its confirmation in flash-sync mode.
func (s *Service) replacedHeld(ctx context.Context, req ReserveRequest) bool {
	row, err := s.store.Order(ctx, req.ReplacesOrderID)
	switch {
	case IsCode(err, CodeReservationNotFound):
		return false
	case err != nil:
		return true
	}
	return row.CustomerID == req.CustomerID && row.Status == StatusReserved
}

// knownOrder answers for an orderId the gate or store already knows, used
// when the voucher itself would reject the request; gateCode and
// campaignCode are as in reserveFlash.
func (s *Service) knownOrder(ctx context.Context, req ReserveRequest, gateCode, campaignCode string) (*Reservation, error) {
	h, found, err := s.gate.Lookup(ctx, gateCode, req.OrderID)
	if err != nil || !found {
		return nil, err
	}
	switch {
	case h.CustomerID != req.CustomerID || h.Code != campaignCode:
		return nil, orderConflict(req.Code, req.OrderID, "")
	case h.Released:
		return nil, orderReleased(req.OrderID)
	}
	r, err := s.store.Redemption(ctx, req.Code, req.OrderID)
	if err != nil {
		return nil, err
	}
	return &Reservation{Redemption: r, Replay: true}, nil
}

// Redemption returns one redemption. In Kafka mode a reservation still on its
// way to the store is answered from the gate.
func (s *Service) Redemption(ctx context.Context, code, orderID string) (Redemption, error) {
	if !ValidCode(code) || !ValidOrderID(orderID) {
		return Redemption{}, Errorf(CodeReservationNotFound, "reservation %q of voucher %q not found", orderID, code)
	}
	r, err := s.store.Redemption(ctx, code, orderID)
	if err == nil || !IsCode(err, CodeReservationNotFound) {
		return r, err
	}
	gateCode, campaignCode, kafka := s.kafkaFlash(ctx, code)
	if !kafka {
		return r, err
	}
	h, found, gerr := s.gateHold(ctx, gateCode, campaignCode, orderID)
	if errors.Is(gerr, errInStoreNow) {
		return s.store.Redemption(ctx, code, orderID)
	}
	if gerr != nil {
		return Redemption{}, gerr
	}
	if !found || h.Pending {
		return Redemption{}, err
	}
	st := StatusReserved
	if h.Released {
		st = StatusReleased
	}
	return holdRedemption(code, h, st), nil
}

// Confirm marks a reservation CONFIRMED (the order was paid); idempotent.
func (s *Service) Confirm(ctx context.Context, code, orderID string) (Redemption, error) {
	if !ValidCode(code) || !ValidOrderID(orderID) {
		return Redemption{}, Errorf(CodeReservationNotFound, "reservation %q of voucher %q not found", orderID, code)
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	marked, err := s.confirmInGate(wctx, code, orderID)
	if err != nil {
		return Redemption{}, err
	}
	r, err := s.store.Confirm(wctx, code, orderID, s.cfg.Clock())
	if err != nil && IsCode(err, CodeReservationNotFound) {
		if applied, aerr := s.applyFromGate(wctx, code, orderID); aerr != nil {
			return Redemption{}, aerr
		} else if applied {
			r, err = s.store.Confirm(wctx, code, orderID, s.cfg.Clock())
		}
	}
	if err != nil && IsCode(err, CodeReservationReleased) {
		// Confirm found the hold expired and released it: return the use
		// to the gate too.
		s.releaseInGate(wctx, code, orderID)
	}
	if err == nil && !marked {
		s.markConfirmedAfter(wctx, code, orderID)
	}
	return r, err
}

// markConfirmedAfter marks a confirmed order in the gate after the store
// confirmed it, when the gate had nothing to go by before (Kafka mode): a
// load that read the order RESERVED just before may have put it in the gate
// as held meanwhile. A load that writes it later still is repaired by
// reconciliation (ReconcileReport.Unconfirmed).
func (s *Service) markConfirmedAfter(ctx context.Context, code, orderID string) {
	gateCode, campaignCode, kafka := s.kafkaFlash(ctx, code)
	if !kafka {
		return
	}
	if _, err := s.gate.Confirm(ctx, gateCode, orderID, campaignCode); err != nil {
		s.log.WarnContext(ctx, "confirmation not marked in the gate; reconciliation will", "code", code, "orderId", orderID, "err", err)
	}
}

// confirmInGate marks orderID of a flash voucher confirmed in the gate
// before the store confirms it, in Kafka mode: there a replacement is
// decided by the gate alone (its store write comes later from the
// consumer), so the gate must know a confirmation from the moment it is
// under way, or a replacement could release an order the store confirms.
// A replacement that came first left the order released in the gate:
// RESERVATION_RELEASED, whatever the store says while the consumer has
// not applied it. A pending hold whose row the store has (the consumer
// wrote it before the producer's ack came back) is made durable first;
// without the row, the reservation is still being written: 503. A gate
// that cannot be read answers 503: confirming without it could let a
// replacement take the order over. Nothing in the gate (voucher not
// loaded, orderId unknown): the store decides, and a later load takes the
// confirmation from the store. marked reports that the gate has the mark,
// or that no mark is needed (not a Kafka-mode flash voucher).
func (s *Service) confirmInGate(ctx context.Context, code, orderID string) (marked bool, err error) {
	gateCode, campaignCode, kafka := s.kafkaFlash(ctx, code)
	if !kafka {
		return true, nil
	}
	for attempt := 0; ; attempt++ {
		found, err := s.gate.Confirm(ctx, gateCode, orderID, campaignCode)
		if err != nil {
			return false, Unavailable(err, "voucher %s: the confirmation of %s cannot be recorded in Redis; retry", code, orderID)
		}
		switch found {
		case GateConfirmReleased:
			return false, Errorf(CodeReservationReleased, "reservation %s of voucher %s was released", orderID, code)
		case GateConfirmPending:
			if attempt > 0 {
				return false, Unavailable(nil, "reservation %s is still being written; retry", orderID)
			}
			h, found, err := s.gate.Lookup(ctx, gateCode, orderID)
			if err != nil || !found || !h.Pending {
				continue
			}
			row, err := s.store.Redemption(ctx, code, orderID)
			if err != nil || row.Status != StatusReserved && row.Status != StatusConfirmed {
				return false, Unavailable(err, "reservation %s is still being written; retry", orderID)
			}
			if _, err := s.gate.Commit(ctx, gateCode, h); err != nil {
				return false, Unavailable(err, "reservation %s is still being written; retry", orderID)
			}
		default:
			return found == GateConfirmMarked, nil
		}
	}
}

// Release gives a reservation's use back (order cancelled, refunded or
// abandoned); idempotent.
func (s *Service) Release(ctx context.Context, code, orderID string) (Redemption, error) {
	if !ValidCode(code) || !ValidOrderID(orderID) {
		return Redemption{}, Errorf(CodeReservationNotFound, "reservation %q of voucher %q not found", orderID, code)
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	r, _, err := s.store.Release(wctx, code, orderID, s.cfg.Clock())
	if err != nil && IsCode(err, CodeReservationNotFound) {
		if applied, aerr := s.applyFromGate(wctx, code, orderID); aerr != nil {
			return Redemption{}, aerr
		} else if applied {
			r, _, err = s.store.Release(wctx, code, orderID, s.cfg.Clock())
		}
	}
	if err != nil {
		return Redemption{}, err
	}
	// Always, even when the store had released it before: a previous call
	// may have failed between the two stores.
	s.releaseInGate(wctx, code, orderID)
	return r, nil
}

// releaseInGate marks orderID released in the gate for a flash voucher or
// flash campaign (code a campaign code or the campaign's id), freeing the
// campaign code it held. The store released the order already, so the
// orderId is this code's.
func (s *Service) releaseInGate(ctx context.Context, code, orderID string) {
	gateCode, _, ok := s.flashGate(ctx, code)
	if !ok {
		return
	}
	if _, err := s.gate.Release(ctx, gateCode, orderID, ReleaseMark); err != nil {
		s.log.ErrorContext(ctx, "released in the database but not in the gate; reconciliation will repair", "code", code, "orderId", orderID, "err", err)
	}
}

// Ping checks the store and, when configured, the gate.
func (s *Service) Ping(ctx context.Context) error {
	if err := s.store.Ping(ctx); err != nil {
		return err
	}
	if s.gate != nil {
		return s.gate.Ping(ctx)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
