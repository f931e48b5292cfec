package voucher

import (
	"context"
	"time"
)

// flashPath takes the uses of flash vouchers in the gate first and writes
// them to the store through its mode (flashWrites: syncWrites or
// kafkaWrites, chosen when the service is built). What each gate outcome
// means is written here once for both modes; the mode decides only what
// differs: how a taken use reaches the store and what a replay, a gate
// failure and an unwritten reservation are answered.
type flashPath struct {
	*deps
	writes   flashWrites
	standard *standardPath // the store's own reservation, for the fallbacks
	loader   *loader
	heldOut  heldOutCache
}

// flashWrites is what differs between the flash write modes.
type flashWrites interface {
	// mode names the path for metrics and logs.
	mode() Mode
	// pending reports whether a hold is pending until its write is
	// durable (Kafka mode: a replay must not answer 201 from it).
	pending() bool
	// fallback reports whether a reservation or validation the gate could
	// not decide goes to the store instead (ServiceConfig.FlashFallback,
	// sync mode only).
	fallback() bool
	// write makes the use the gate took for hold durable and answers the
	// reservation; dec is the gate's decision.
	write(ctx context.Context, rt route, req ReserveRequest, hold Hold, dec GateDecision) (Reservation, error)
	// replay answers a retry of an order the gate already holds (dec);
	// again asks the caller to ask the gate again (attempt counts them).
	replay(ctx context.Context, rt route, req ReserveRequest, dec GateDecision, attempt int) (res Reservation, again bool, err error)
	// mayHold reports, for a reservation the gate could not decide and
	// whose orderId the store does not hold (rowErr from that read), that
	// an earlier attempt of it may still hold a use: the answer is then
	// OutcomeUnknown rather than "nothing taken".
	mayHold(ctx context.Context, rt route, orderID string, rowErr error) bool
	// replacedNotHeld reports, for a replacement the gate answered
	// GateCodeUsed, that the replaced order is not the customer's RESERVED
	// hold, which only the store may know.
	replacedNotHeld(ctx context.Context, req ReserveRequest) bool
	// notLoaded answers a reservation of a voucher the gate still does not
	// have after the warm-ups; fellBack reports the store answered it.
	notLoaded(ctx context.Context, rt route, req ReserveRequest) (res Reservation, fellBack bool, err error)
	// releasedOrder answers for orderID, which the gate marks released,
	// asked with code by customerID: ORDER_RELEASED, or the order's row
	// when the mode's store holds it for that customer after all (the
	// caller answers a replay of it).
	releasedOrder(ctx context.Context, code, orderID, customerID string) (Redemption, error)

	// unwritten answers the redemption of an orderId the store does not
	// have (storeErr) from what the gate holds for it.
	unwritten(ctx context.Context, rt route, orderID string, storeErr error) (Redemption, error)
	// applyUnwritten writes a reservation the gate decided and the store
	// does not have yet, so that confirm, release and extend can act on
	// it; applied reports the store has it now.
	applyUnwritten(ctx context.Context, rt route, orderID string) (applied bool, err error)
	// beforeConfirm records a confirmation under way in the gate before
	// the store confirms; marked reports the gate has it (or needs none).
	beforeConfirm(ctx context.Context, rt route, orderID string) (marked bool, err error)
	// afterConfirm records in the gate a confirmation the store made while
	// the gate had nothing to go by (beforeConfirm's marked was false).
	afterConfirm(ctx context.Context, rt route, orderID string)

	// caughtUp returns nil when the store has every use the gate handed
	// out that is on its way to it, so that a snapshot is complete and a
	// hold without a row is not still being written.
	caughtUp(ctx context.Context) error
	// tracksConfirmation reports whether the gate records confirmations
	// (Kafka mode), so that reconciliation repairs a missing mark.
	tracksConfirmation() bool
	// giveBackOrphan gives back a gate hold that has no row past the grace
	// period.
	giveBackOrphan(ctx context.Context, code string, h Hold) error
	// undone settles a hold whose writer is done or gone without a fence
	// when the mode can tell that its write never happened; it reports
	// whether it did (fenceHold).
	undone(ctx context.Context, code string, h Hold) (bool, error)
	// settleUnknown decides the writes of this instance whose outcome was
	// unknown (SettleUnknown).
	settleUnknown(ctx context.Context, fence func(context.Context, string, Hold) (bool, error)) (int, error)
	// settles reports whether settleUnknown is still to decide this
	// instance's write of orderID, whose hold the gate keeps under code:
	// reconciliation leaves that hold to it (leaveToWriters).
	settles(code, orderID string) bool
}

// Retry limits of flashPath.reserve.
const (
	// notLoadedWarmups is how many warm-ups a reservation tries when the
	// gate answers GateNotLoaded; then the mode answers (notLoaded).
	notLoadedWarmups = 2
)

// reserve runs the gate and then the durable write of the mode. rt.v is the
// voucher, or the budget of the campaign whose code req names: the gate
// keys are then the budget's (rt.gateCode, the campaign id) and the hold
// carries the code.
func (p *flashPath) reserve(ctx context.Context, rt route, req ReserveRequest, now time.Time) (Reservation, Mode, error) {
	res, fellBack, err := p.reserveInGate(ctx, rt, req, now)
	if fellBack {
		return res, ModeStandard, err
	}
	return res, p.writes.mode(), err
}

func (p *flashPath) reserveInGate(ctx context.Context, rt route, req ReserveRequest, now time.Time) (res Reservation, fellBack bool, err error) {
	v := rt.v
	if err := v.CheckEligible(req.Purchase(), now); err != nil {
		// A known orderId is answered as such even after the window closed,
		// as the standard path does.
		known, kerr := p.knownOrder(ctx, rt, req)
		switch {
		case known != nil:
			return *known, false, nil
		case IsCode(kerr, CodeOrderConflict) || IsCode(kerr, CodeOrderReleased):
			return Reservation{}, false, kerr
		}
		return Reservation{}, false, err
	}
	// The gate keeps milliseconds; answer with what a replay will read back.
	at := now.Truncate(time.Millisecond)
	hold := Hold{
		OrderID: req.OrderID, CustomerID: req.CustomerID, OrderAmount: req.OrderAmount,
		DiscountAmount: v.Discount().Compute(req.OrderAmount), ReservedAt: at, ExpiresAt: at.Add(p.cfg.ReservationTTL),
		Pending: p.writes.pending(), Owner: p.cfg.Instance, Replaces: req.ReplacesOrderID, Code: rt.campaignCode,
		Budget: Budget{Amount: v.Budget.Amount, Clip: v.Budget.Clip},
		Window: req.Window, WindowLimit: v.WindowLimit,
	}
	for attempt := 0; ; attempt++ {
		var dec GateDecision
		var err error
		if hold.Replaces != "" {
			var refused error
			if refused, err = gateReplacement(ctx, p.gate, &p.cfg, rt.gateCode(), req, &hold); refused != nil {
				return Reservation{}, false, refused
			}
			if err == nil {
				dec, err = p.gate.Replace(ctx, rt.gateCode(), hold, hold.Replaces)
			}
		} else {
			dec, err = p.gate.Reserve(ctx, rt.gateCode(), v.PerUserLimit, hold)
		}
		if err != nil {
			settled := p.unansweredTake(ctx, rt.gateCode(), hold, err)
			if p.writes.fallback() {
				res, err := p.standard.write(ctx, req)
				return res, true, err
			}
			res, err := p.gateDown(ctx, rt, req, err, settled)
			return res, false, err
		}
		p.obs.GateDecided(dec.Outcome)
		switch dec.Outcome {
		case GateTaken:
			if dec.Discount > 0 {
				hold.DiscountAmount = dec.Discount
			}
			res, err := p.writes.write(ctx, rt, req, hold, dec)
			return res, false, err
		case GateReplay:
			res, again, err := p.writes.replay(ctx, rt, req, dec, attempt)
			if again {
				continue
			}
			return res, false, err
		case GateReleased:
			row, err := p.writes.releasedOrder(ctx, req.Code, req.OrderID, req.CustomerID)
			if err != nil {
				return Reservation{}, false, err
			}
			return Reservation{Redemption: row, Replay: true}, false, nil
		case GateCodeUsed:
			if hold.Replaces != "" && p.writes.replacedNotHeld(ctx, req) {
				// The replaced order is checked before the code (as
				// voucherd_replace does).
				return Reservation{}, false, Reject(CodeReplacedOrderNotHeld, "",
					Facts{Voucher: req.Code, OrderID: req.ReplacesOrderID, CustomerID: req.CustomerID})
			}
			return Reservation{}, false, Reject(CodeAlreadyUsed, ReasonCodeUsed, Facts{Voucher: req.Code})
		case GateNotLoaded:
			if attempt >= notLoadedWarmups {
				return p.writes.notLoaded(ctx, rt, req)
			}
			if _, err := p.loader.warmup(ctx, rt.gateCode()); err != nil && !IsCode(err, CodeUnavailable) {
				return Reservation{}, false, err
			}
		default:
			return Reservation{}, false, p.refusal(ctx, rt, req.customerOrder(), dec, now)
		}
	}
}

// gateOrder is who a gate decision was asked for: the customer, the
// orderId and the replaced order of a reservation, or of a validation.
type gateOrder struct {
	customerID, orderID, replaces string
}

// customerOrder is req's gateOrder.
func (r ReserveRequest) customerOrder() gateOrder {
	return gateOrder{customerID: r.CustomerID, orderID: r.OrderID, replaces: r.ReplacesOrderID}
}

// refusal is the answer, the same for a reservation and a validation in
// every mode, to a gate decision that takes nothing and needs no more
// calls: a conflict, a released orderId, a customer's quota, no free use,
// a code another order holds, a replaced order not held.
func (p *flashPath) refusal(ctx context.Context, rt route, o gateOrder, dec GateDecision, now time.Time) error {
	switch dec.Outcome {
	case GateConflict:
		return orderConflict(rt.code, o.orderID, "")
	case GateReleased:
		return orderReleased(o.orderID)
	case GateQuotaHeld:
		return Reject(CodeAlreadyUsed, "", Facts{Voucher: rt.code, CustomerID: o.customerID, PerUserLimit: rt.v.PerUserLimit})
	case GateSoldOut:
		return p.soldOut(ctx, rt.gateCode(), now)
	case GateCodeUsed:
		return Reject(CodeAlreadyUsed, ReasonCodeUsed, Facts{Voucher: rt.code})
	case GateNotHeld:
		return Reject(CodeReplacedOrderNotHeld, "", Facts{Voucher: rt.code, OrderID: o.replaces, CustomerID: o.customerID})
	case GateBudgetExceeded:
		return p.budgetExceeded(ctx, rt, dec, now)
	case GateWindowFull:
		return p.windowFull(ctx, rt, now)
	}
	return Errorf(CodeInternal, "unexpected gate outcome %d", dec.Outcome)
}

// knownOrder answers for an orderId the gate or store already knows, used
// when the voucher itself would reject the request.
func (p *flashPath) knownOrder(ctx context.Context, rt route, req ReserveRequest) (*Reservation, error) {
	h, found, err := p.gate.Lookup(ctx, rt.gateCode(), req.OrderID)
	if err != nil || !found {
		return nil, err
	}
	switch {
	case h.CustomerID != req.CustomerID || h.Code != rt.campaignCode:
		return nil, orderConflict(req.Code, req.OrderID, "")
	case h.Released:
		row, err := p.writes.releasedOrder(ctx, req.Code, req.OrderID, req.CustomerID)
		if err != nil {
			return nil, err
		}
		return &Reservation{Redemption: row, Replay: true}, nil
	}
	// As a read of the reservation: in Kafka mode a hold the consumer has
	// not written yet is answered from the gate.
	r, err := p.redemption(ctx, rt, req.OrderID)
	if err != nil {
		return nil, err
	}
	return &Reservation{Redemption: r, Replay: true}, nil
}

// gateDown answers a flash reservation the gate could not decide (gateErr)
// from the orderId's row, so that a retry of an order an earlier attempt
// took is not told that nothing was taken: the row's reservation (a
// replay), ORDER_RELEASED or ORDER_CONFLICT when the store has one.
// Without a row the answer is gateErr, marked OutcomeUnknown when an
// earlier attempt may still hold a use (flashWrites.mayHold) or when this
// attempt may have taken one that will not be settled (settled is false:
// unansweredTake could not remember it). A plain 503 thus promises that
// nothing stays taken: the gate took nothing, or what it took is given
// back when the gate answers again (settleUnanswered), unless a retry of
// the orderId completes it first.
func (p *flashPath) gateDown(ctx context.Context, rt route, req ReserveRequest, gateErr error, settled bool) (Reservation, error) {
	row, err := p.store.Redemption(ctx, req.Code, req.OrderID)
	switch {
	case err == nil && row.CustomerID != req.CustomerID:
		return Reservation{}, orderConflict(req.Code, req.OrderID, "")
	case err == nil && row.Status == StatusReleased:
		return Reservation{}, orderReleased(req.OrderID)
	case err == nil:
		return Reservation{Redemption: row, Replay: true}, nil
	}
	if !settled || p.writes.mayHold(ctx, rt, req.OrderID, err) {
		return Reservation{}, outcomeUnknown(gateErr, req.OrderID)
	}
	return Reservation{}, gateErr
}

// validate is reserve without the take and the durable write.
func (p *flashPath) validate(ctx context.Context, rt route, req ValidateRequest, now time.Time) (StoreValidation, error) {
	v := rt.v
	if err := v.CheckEligible(req.Purchase(), now); err != nil {
		if req.OrderID == "" {
			return StoreValidation{}, err
		}
		h, found, lerr := p.gate.Lookup(ctx, rt.gateCode(), req.OrderID)
		switch {
		case lerr != nil || !found:
			return StoreValidation{}, err
		case h.CustomerID != req.CustomerID || h.Code != rt.campaignCode:
			return StoreValidation{}, orderConflict(req.Code, req.OrderID, "")
		case h.Released:
			row, err := p.writes.releasedOrder(ctx, req.Code, req.OrderID, req.CustomerID)
			if err != nil {
				return StoreValidation{}, err
			}
			return StoreValidation{DiscountAmount: row.DiscountAmount, Replay: true}, nil
		}
		return StoreValidation{DiscountAmount: h.DiscountAmount, Replay: true}, nil
	}
	for attempt := 0; ; attempt++ {
		dec, err := p.gate.Validate(ctx, rt.gateCode(), v.PerUserLimit, req.OrderID, req.CustomerID, rt.campaignCode,
			TakeLimits{Budget: Budget{Amount: v.Budget.Amount, Clip: v.Budget.Clip}, Discount: v.Discount().Compute(req.OrderAmount),
				WindowLimit: v.WindowLimit, Window: req.Window})
		if err != nil {
			if p.writes.fallback() {
				return p.store.Validate(ctx, req, now)
			}
			return StoreValidation{}, err
		}
		switch dec.Outcome {
		case GateTaken:
			if dec.Discount > 0 {
				// A clipping budget's remainder.
				return StoreValidation{DiscountAmount: dec.Discount}, nil
			}
			return StoreValidation{DiscountAmount: v.Discount().Compute(req.OrderAmount)}, nil
		case GateReplay:
			return StoreValidation{DiscountAmount: dec.Hold.DiscountAmount, Replay: true}, nil
		case GateReleased:
			row, err := p.writes.releasedOrder(ctx, req.Code, req.OrderID, req.CustomerID)
			if err != nil {
				return StoreValidation{}, err
			}
			return StoreValidation{DiscountAmount: row.DiscountAmount, Replay: true}, nil
		case GateNotLoaded:
			if attempt >= notLoadedWarmups {
				// Read-only in the store: the gate loads from it the same way.
				return p.store.Validate(ctx, req, now)
			}
			if _, err := p.loader.warmup(ctx, rt.gateCode()); err != nil && !IsCode(err, CodeUnavailable) {
				return StoreValidation{}, err
			}
		default:
			return StoreValidation{}, p.refusal(ctx, rt, gateOrder{customerID: req.CustomerID, orderID: req.OrderID}, dec, now)
		}
	}
}

// redemption returns one redemption; one the store does not have is
// answered from the gate where the mode allows (flashWrites.unwritten).
func (p *flashPath) redemption(ctx context.Context, rt route, orderID string) (Redemption, error) {
	r, err := p.store.Redemption(ctx, rt.code, orderID)
	if err == nil || !IsCode(err, CodeReservationNotFound) {
		return r, err
	}
	return p.writes.unwritten(ctx, rt, orderID, err)
}

// confirm confirms in the store, with the gate told before and after as
// the mode needs; a reservation the store does not have yet is written
// first (flashWrites.applyUnwritten), and one the store found expired is
// released in the gate too.
func (p *flashPath) confirm(ctx context.Context, rt route, orderID string) (Redemption, error) {
	wctx, cancel := p.writeContext(ctx)
	defer cancel()
	marked, err := p.writes.beforeConfirm(wctx, rt, orderID)
	if err != nil {
		return Redemption{}, err
	}
	r, err := p.store.Confirm(wctx, rt.code, orderID, p.now())
	if err != nil && IsCode(err, CodeReservationNotFound) {
		if applied, aerr := p.writes.applyUnwritten(wctx, rt, orderID); aerr != nil {
			return Redemption{}, aerr
		} else if applied {
			r, err = p.store.Confirm(wctx, rt.code, orderID, p.now())
		}
	}
	if err != nil && IsCode(err, CodeReservationReleased) {
		// Confirm found the hold expired and released it: return the use
		// to the gate too.
		p.released(wctx, rt, orderID)
	}
	if err == nil && !marked {
		p.writes.afterConfirm(wctx, rt, orderID)
	}
	return r, err
}

// release releases in the store and then in the gate, always, even when
// the store had released it before: a previous call may have failed
// between the two.
func (p *flashPath) release(ctx context.Context, rt route, orderID string) (Redemption, error) {
	wctx, cancel := p.writeContext(ctx)
	defer cancel()
	r, _, err := p.store.Release(wctx, rt.code, orderID, p.now())
	if err != nil && IsCode(err, CodeReservationNotFound) {
		if applied, aerr := p.writes.applyUnwritten(wctx, rt, orderID); aerr != nil {
			return Redemption{}, aerr
		} else if applied {
			r, _, err = p.store.Release(wctx, rt.code, orderID, p.now())
		}
	}
	if err != nil {
		if IsCode(err, CodeUnavailable) {
			// The release may have committed without its answer: the
			// settle gives the gate's use back once the store shows it.
			p.unanswered.rememberRelease(rt.gateCode(), rt.campaignCode, orderID, p.now())
		}
		return Redemption{}, err
	}
	p.released(wctx, rt, orderID)
	return r, nil
}

// extend extends in the store and records the new expiry in the gate's
// copy of the hold, so that a replay answers with it.
func (p *flashPath) extend(ctx context.Context, rt route, orderID string, until, now time.Time) (Redemption, error) {
	wctx, cancel := p.writeContext(ctx)
	defer cancel()
	r, err := p.store.Extend(wctx, rt.code, orderID, until, now, p.cfg.MaxHold)
	if err != nil && IsCode(err, CodeReservationNotFound) {
		if applied, aerr := p.writes.applyUnwritten(wctx, rt, orderID); aerr != nil {
			return Redemption{}, aerr
		} else if applied {
			r, err = p.store.Extend(wctx, rt.code, orderID, until, now, p.cfg.MaxHold)
		}
	}
	if err != nil {
		if IsCode(err, CodeReservationReleased) {
			// Extend may have found it expired and released it: return the
			// use to the gate too (a no-op when it was released before).
			p.released(wctx, rt, orderID)
		}
		return Redemption{}, err
	}
	if _, err := p.gate.Extend(wctx, rt.gateCode(), orderID, r.ExpiresAt); err != nil {
		// The store is right; only a replay's expiresAt is stale, and the
		// hold leaves the gate with the store's release all the same.
		p.log.WarnContext(ctx, "extended in the database but not in the gate; replays answer the old expiresAt",
			"code", rt.code, "orderId", orderID, "err", err)
	}
	return r, nil
}

// released marks orderID released in the gate, freeing the campaign code it
// held. The store released the order already, so the orderId is this
// code's.
func (p *flashPath) released(ctx context.Context, rt route, orderID string) {
	if _, err := p.gate.Release(ctx, rt.gateCode(), orderID, ReleaseMark); err != nil {
		p.log.ErrorContext(ctx, "released in the database but not in the gate; settled once the gate answers", "code", rt.code, "orderId", orderID, "err", err)
		p.unanswered.rememberRelease(rt.gateCode(), rt.campaignCode, orderID, p.now())
	}
}

// giveBack undoes what the gate did for hold after its durable write
// provably failed: a use taken goes back (compensate); a use taken over
// from hold.Replaces goes back to that order (Gate.Unreplace), so the
// customer keeps the hold they had.
func (d *deps) giveBack(ctx context.Context, mode Mode, code string, hold Hold, cause error) {
	if hold.Replaces == "" {
		d.compensate(ctx, mode, code, hold, cause)
		return
	}
	d.obs.Compensated(mode)
	cctx, cancel := d.writeContext(ctx)
	defer cancel()
	if _, err := d.gate.Unreplace(cctx, code, hold.OrderID, hold.Replaces); err != nil {
		// The gate counts the use for the new order, which no row backs,
		// while the store keeps the replaced one: undersell until the
		// settle (settleAttempt undoes it), or reconciliation.
		d.log.ErrorContext(ctx, "could not undo a replacement in the gate", "code", code, "orderId", hold.OrderID,
			"replaces", hold.Replaces, "cause", cause, "err", err)
		d.unanswered.remember(code, hold, d.now())
		return
	}
	d.log.WarnContext(ctx, "durable write of a replacement failed; the replaced hold stands again", "code", code,
		"orderId", hold.OrderID, "replaces", hold.Replaces, "mode", mode, "cause", cause)
}

// compensate gives the use hold took in the gate back after its durable
// write provably failed, forgetting the orderId there (mode and cause are
// for the log and metrics). A give-back the gate does not answer is
// remembered and settled once it answers again (settleUnanswered).
func (d *deps) compensate(ctx context.Context, mode Mode, code string, hold Hold, cause error) {
	orderID := hold.OrderID
	d.obs.Compensated(mode)
	cctx, cancel := d.writeContext(ctx)
	defer cancel()
	if _, err := d.gate.Release(cctx, code, orderID, ReleaseForget); err != nil {
		// The gate keeps a use that no row backs: undersell until the
		// settle, or reconciliation after its grace period when the
		// attempt could not be remembered.
		d.log.ErrorContext(ctx, "could not give a use back to the gate", "code", code, "orderId", orderID, "cause", cause, "err", err)
		d.unanswered.remember(code, hold, d.now())
		return
	}
	d.log.WarnContext(ctx, "durable write failed; use given back to the gate", "code", code, "orderId", orderID, "mode", mode, "cause", cause)
}
