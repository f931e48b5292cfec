package voucher

import (
	"context"
	"sync"
	"time"
)

// standardPath takes each use in one store transaction (the conditional
// counter update, the per-customer counter and the row), and acts on
// existing reservations through the store alone.
type standardPath struct {
	*deps

	mu sync.Mutex
	// unknown holds the orders whose write ended with an unknown outcome on
	// this instance, until an answer other than 503 settles them: a retry
	// that fails to reach the store says the outcome is still unknown;
	// guarded by mu.
	unknown map[orderKey]struct{}
}

type orderKey struct{ code, orderID string }

// maxUnknownStandard bounds standardPath.unknown; past it the set starts
// over (a retry then answers a plain 503 while the store stays
// unreachable).
const maxUnknownStandard = 100_000

func newStandardPath(d *deps) *standardPath {
	return &standardPath{deps: d, unknown: map[orderKey]struct{}{}}
}

// reserve decides a reservation of a standard voucher. A voucher its
// definition refuses is answered from the orderId's row (ineligible);
// otherwise the store decides, and every 503 for an order whose earlier
// write on this instance ended with an unknown outcome keeps the
// OutcomeUnknown flag until an answer settles it (the store is idempotent
// by orderId, so a retry that reaches it does).
func (p *standardPath) reserve(ctx context.Context, rt route, req ReserveRequest, now time.Time) (Reservation, Mode, error) {
	if err := rt.v.CheckEligible(req.Purchase(), now); err != nil {
		res, err := p.ineligible(ctx, rt, req, err)
		return res, ModeStandard, err
	}
	if req.ReplacesOrderID == "" {
		// A replacement may take over the code its replaced order holds.
		if err := codeUsed(req.Code, rt.pre); err != nil {
			return Reservation{}, ModeStandard, err
		}
	}
	res, err := p.write(ctx, req)
	k := orderKey{req.Code, req.OrderID}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case IsOutcomeUnknown(err):
		if len(p.unknown) >= maxUnknownStandard {
			p.unknown = map[orderKey]struct{}{}
		}
		p.unknown[k] = struct{}{}
	case IsCode(err, CodeUnavailable):
		if _, unknown := p.unknown[k]; unknown {
			return res, ModeStandard, outcomeUnknown(err, req.OrderID)
		}
	default:
		delete(p.unknown, k)
	}
	return res, ModeStandard, err
}

// write is the store's reservation, detached from the client's
// cancellation and bounded (writeContext).
func (p *standardPath) write(ctx context.Context, req ReserveRequest) (Reservation, error) {
	wctx, cancel := p.writeContext(ctx)
	defer cancel()
	now, ttl := p.now(), p.cfg.ReservationTTL
	if req.ReplacesOrderID != "" {
		var err error
		if ttl, err = storeReplacementTTL(wctx, p.store, &p.cfg, req, now); err != nil {
			return Reservation{}, err
		}
	}
	return p.store.Reserve(wctx, req, now, ttl)
}

// ineligible answers a reservation of a standard voucher that its
// definition refuses (inelig): a known orderId as voucherd_reserve
// answers it (replay, ORDER_CONFLICT, ORDER_RELEASED), else inelig. It
// takes the orderId's row from rt.pre (read with the definition), else
// reads it with the statement that answers an unknown code (ResolveCode),
// and writes nothing, so that the refusal costs what the look-up of an
// unknown code costs. A cached definition may be up to VoucherCacheTTL
// old: a voucher made eligible again on another instance is refused here
// that long (never the other way: an eligible definition still lets the
// store decide).
func (p *standardPath) ineligible(ctx context.Context, rt route, req ReserveRequest, inelig error) (Reservation, error) {
	pre := rt.pre
	if pre == nil {
		res, err := p.store.ResolveCode(ctx, req.Code, req.OrderID)
		if err != nil {
			return Reservation{}, err
		}
		pre = &res
	}
	if !pre.HasOrder {
		return Reservation{}, inelig
	}
	row := pre.Order
	switch {
	case row.VoucherCode != req.Code || row.CustomerID != req.CustomerID:
		return Reservation{}, orderConflict(req.Code, req.OrderID, row.VoucherCode)
	case row.Status == StatusReleased:
		return Reservation{}, orderReleased(req.OrderID)
	}
	return Reservation{Redemption: row, Replay: true}, nil
}

// validate answers a validation of a standard voucher: a voucher its
// definition refuses as reserve answers it, otherwise the store's
// read-only statement.
func (p *standardPath) validate(ctx context.Context, rt route, req ValidateRequest, now time.Time) (StoreValidation, error) {
	if inelig := rt.v.CheckEligible(req.Purchase(), now); inelig != nil {
		if req.OrderID == "" {
			return StoreValidation{}, inelig
		}
		res, err := p.ineligible(ctx, rt, ReserveRequest{Code: req.Code, CustomerID: req.CustomerID,
			OrderID: req.OrderID, OrderAmount: req.OrderAmount}, inelig)
		return StoreValidation{DiscountAmount: res.DiscountAmount, Replay: err == nil}, err
	}
	if err := codeUsed(req.Code, rt.pre); err != nil {
		return StoreValidation{}, err
	}
	return p.store.Validate(ctx, req, now)
}

func (p *standardPath) redemption(ctx context.Context, rt route, orderID string) (Redemption, error) {
	return p.store.Redemption(ctx, rt.code, orderID)
}

func (p *standardPath) confirm(ctx context.Context, rt route, orderID string) (Redemption, error) {
	wctx, cancel := p.writeContext(ctx)
	defer cancel()
	return p.store.Confirm(wctx, rt.code, orderID, p.now())
}

func (p *standardPath) release(ctx context.Context, rt route, orderID string) (Redemption, error) {
	wctx, cancel := p.writeContext(ctx)
	defer cancel()
	r, _, err := p.store.Release(wctx, rt.code, orderID, p.now())
	return r, err
}

func (p *standardPath) extend(ctx context.Context, rt route, orderID string, until, now time.Time) (Redemption, error) {
	wctx, cancel := p.writeContext(ctx)
	defer cancel()
	return p.store.Extend(wctx, rt.code, orderID, until, now, p.cfg.MaxHold)
}

func (p *standardPath) released(context.Context, route, string) {}

// gatelessPath is the path of flash vouchers when no gate is configured:
// with ServiceConfig.FlashFallback they reserve and validate through the
// store as standard vouchers do, otherwise they answer 503; every other
// call acts on the store alone.
type gatelessPath struct {
	*standardPath
}

func (p gatelessPath) reserve(ctx context.Context, rt route, req ReserveRequest, now time.Time) (Reservation, Mode, error) {
	if !p.cfg.FlashFallback {
		return Reservation{}, ModeStandard, Unavailable(nil, "flash voucher %s needs Redis, which is not configured", req.Code)
	}
	return p.standardPath.reserve(ctx, rt, req, now)
}

func (p gatelessPath) validate(ctx context.Context, rt route, req ValidateRequest, now time.Time) (StoreValidation, error) {
	if !p.cfg.FlashFallback {
		return StoreValidation{}, Unavailable(nil, "flash voucher %s needs Redis, which is not configured", req.Code)
	}
	return p.standardPath.validate(ctx, rt, req, now)
}
