package voucher

import (
	"context"
	"time"
)

// Service is the voucher service's operations. Each operation on a code
// resolves it once into a route (route.go) and hands the request to the
// write path of the voucher's kind; the paths are chosen when the service
// is built: standardPath for standard vouchers, and for flash vouchers one
// flashPath writing through syncWrites or kafkaWrites (or gatelessPath
// without a gate).
type Service struct {
	*deps
	catalog  *catalog
	standard *standardPath
	// flash is the path of flash vouchers.
	flash writePath
	// writes is the flash write mode; nil without a gate.
	writes flashWrites
	loader *loader
	guess  guessLimiter
	// guessByClient and guessByKey count the same misses per client
	// address and per API key (Requester).
	guessByClient, guessByKey guessLimiter
	absent                    absentInstances
	// sightings is when reconciliation first saw live instances' holds
	// past the grace period without a row (leaveToWriters).
	sightings *orphanSightings
}

// NewService validates cfg and returns a Service.
func NewService(cfg ServiceConfig) (*Service, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	d := &deps{cfg: cfg, store: cfg.Store, gate: cfg.Gate, events: cfg.Events, obs: cfg.Observer, log: cfg.Logger,
		unanswered: newUnansweredTakes()}
	// Only Kafka mode goes on through a store outage, with the definitions
	// it read last.
	var staleMax time.Duration
	if cfg.FlashWrites == FlashKafka && cfg.StaleVoucherMax > 0 {
		staleMax = cfg.StaleVoucherMax
	}
	s := &Service{deps: d, catalog: newCatalog(cfg.Store, cfg.Clock, cfg.VoucherCacheTTL, staleMax), standard: newStandardPath(d),
		guess:         guessLimiter{limit: cfg.UnknownCodeLimit, block: cfg.UnknownCodeBlock, m: map[string]*guesser{}},
		guessByClient: guessLimiter{limit: cfg.UnknownCodeLimitPerClient, block: cfg.UnknownCodeBlock, m: map[string]*guesser{}},
		guessByKey:    guessLimiter{limit: cfg.UnknownCodeLimitPerKey, block: cfg.UnknownCodeBlock, m: map[string]*guesser{}},
		absent:        absentInstances{since: map[string]time.Time{}}, sightings: newOrphanSightings()}
	if cfg.Gate == nil {
		s.flash = gatelessPath{s.standard}
		return s, nil
	}
	var kafka *kafkaWrites
	if cfg.FlashWrites == FlashKafka {
		kafka = &kafkaWrites{deps: d}
		s.writes = kafka
	} else {
		s.writes = newSyncWrites(d, s.standard)
	}
	s.loader = &loader{deps: d, catalog: s.catalog, writes: s.writes}
	if kafka != nil {
		kafka.load = s.loader.warmup
	}
	s.flash = &flashPath{deps: d, writes: s.writes, standard: s.standard, loader: s.loader}
	return s, nil
}

// Config returns the effective configuration (defaults filled in).
func (s *Service) Config() ServiceConfig { return s.cfg }

// CreateVoucher stores a new voucher and, for a flash voucher, loads it into
// the gate so the first requests of the sale find it ready.
func (s *Service) CreateVoucher(ctx context.Context, v Voucher) (Voucher, error) {
	if err := v.ValidateNew(s.now()); err != nil {
		return Voucher{}, err
	}
	// The customer a voucher serves is kept in the form its reservations'
	// customerIds are compared in (Reserve).
	v.CustomerID = v.CustomerIDNormalization.Apply(v.CustomerID)
	created, err := s.store.CreateVoucher(ctx, v)
	if err != nil {
		return Voucher{}, err
	}
	s.catalog.forget(created.Code)
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
	if err := p.Validate(s.now()); err != nil {
		return Voucher{}, err
	}
	p.Now = s.now()
	before, after, err := s.store.PatchVoucher(ctx, code, p)
	if err != nil {
		return Voucher{}, err
	}
	s.catalog.forget(code)
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
	start := s.now()
	mode := ModeStandard
	defer func() {
		s.obs.Reserved(req.Code, mode, CodeOf(err), res.Replay, s.now().Sub(start))
		s.noteRefusal(OpReservation, err)
	}()
	if err := req.Validate(); err != nil {
		return Reservation{}, err
	}
	if err := s.guessCheck(req.CustomerID, req.Requester); err != nil {
		return Reservation{}, err
	}
	// A campaign code resolves to its campaign's budget (rt.v.Code is then
	// the campaign id): in standard mode the store resolves the code again
	// in the reservation itself; a flash campaign is gated under the
	// budget's keys with the code in the hold.
	rt, err := s.routeNew(ctx, req.Code, req.OrderID, start)
	if err != nil {
		s.guessNoted(req.CustomerID, req.Requester, err)
		return Reservation{}, err
	}
	// The one place customerIds are normalised: every mode, the store and
	// the gate see (and keep, and answer) the voucher's form only.
	req.CustomerID = rt.v.CustomerIDNormalization.Apply(req.CustomerID)
	if rt.v.Campaign && rt.v.Code == req.Code {
		// A budget is reserved only through its codes.
		return Reservation{}, Reject(CodeVoucherNotFound, "", Facts{Voucher: req.Code})
	}
	if req.ReplacesOrderID != "" {
		// A stack is replaced whole, through /reservations.
		if err := s.notPartOfStack(ctx, req.ReplacesOrderID); err != nil {
			return Reservation{}, err
		}
	}
	// The occurrence of the voucher's windows is decided once, at the
	// instant eligibility is: the store, the gate and the event all record
	// this one (window.go).
	req.Window = rt.v.Occurrence(start).Start
	res, mode, err = rt.path.reserve(ctx, rt, req, start)
	err = withNextWindow(err, rt.v, start)
	if err == nil && res.Replay {
		// The orderId of a stack (or of one of its members) answers a
		// per-code reservation as another order's: it holds other codes.
		if err = s.stackConflict(ctx, req); err != nil {
			return Reservation{}, err
		}
	}
	if err == nil && rt.v.Budget.Clip {
		res.Clipped = res.DiscountAmount < rt.v.Discount().Compute(res.OrderAmount)
	}
	if err == nil {
		// Threshold events once the answer is decided (thresholds.go), of
		// the voucher or campaign budget whose stock moved.
		taken := res
		taken.VoucherCode = rt.v.Code
		s.noteTake(taken, mode)
	}
	return res, err
}

// Redemption returns one redemption. In Kafka mode a reservation still on its
// way to the store is answered from the gate.
func (s *Service) Redemption(ctx context.Context, code, orderID string) (Redemption, error) {
	if !ValidCode(code) || !ValidOrderID(orderID) {
		return Redemption{}, reservationNotFound(code, orderID)
	}
	if err := s.notPartOfStack(ctx, orderID); err != nil {
		return Redemption{}, err
	}
	rt := s.routeKnown(ctx, code)
	return rt.path.redemption(ctx, rt, orderID)
}

// Confirm marks a reservation CONFIRMED (the order was paid); idempotent.
func (s *Service) Confirm(ctx context.Context, code, orderID string) (Redemption, error) {
	if !ValidCode(code) || !ValidOrderID(orderID) {
		return Redemption{}, reservationNotFound(code, orderID)
	}
	if err := s.notPartOfStack(ctx, orderID); err != nil {
		return Redemption{}, err
	}
	rt := s.routeKnown(ctx, code)
	return rt.path.confirm(ctx, rt, orderID)
}

// Release gives a reservation's use back (order cancelled, refunded or
// abandoned); idempotent.
func (s *Service) Release(ctx context.Context, code, orderID string) (Redemption, error) {
	if !ValidCode(code) || !ValidOrderID(orderID) {
		return Redemption{}, reservationNotFound(code, orderID)
	}
	if err := s.notPartOfStack(ctx, orderID); err != nil {
		return Redemption{}, err
	}
	rt := s.routeKnown(ctx, code)
	return rt.path.release(ctx, rt, orderID)
}

// ExpireDue releases up to limit reservations past their expiry, in the store
// and then wherever their path keeps them (the gate), and returns how many
// it released.
func (s *Service) ExpireDue(ctx context.Context, limit int) (int, error) {
	released, err := s.store.ExpireDue(ctx, s.now(), limit)
	if err != nil {
		return 0, err
	}
	for _, r := range released {
		rt := s.routeKnown(ctx, r.VoucherCode)
		rt.path.released(ctx, rt, r.OrderID)
	}
	if err := s.expireStacks(ctx, released); err != nil {
		return len(released), err
	}
	if len(released) > 0 {
		s.obs.Expired(len(released))
	}
	return len(released), nil
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

func reservationNotFound(code, orderID string) error {
	return Errorf(CodeReservationNotFound, "reservation %q of voucher %q not found", orderID, code)
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
