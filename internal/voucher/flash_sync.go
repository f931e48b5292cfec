package voucher

import (
	"context"
	"sync"
	"time"
)

// syncWrites writes each use the gate took to the store before answering,
// with the store's own reservation (idempotent by orderId).
type syncWrites struct {
	*deps
	standard *standardPath

	mu sync.Mutex
	// unsettled holds the orders whose durable write ended with an unknown
	// outcome, keyed by gate code and orderId, until settleUnknown or a
	// retry of the order settles them; guarded by mu.
	unsettled map[orderKey]unsettledWrite
}

// unsettledWrite is a hold whose write ended with an unknown outcome at
// since. replaced: hold.OrderID is instead a member of a stack's replaced
// order that the stack does not keep, whose use the gate still holds; it
// is given back in the gate if the store released it (the write
// committed), once the stack's own holds are settled.
type unsettledWrite struct {
	hold     Hold
	since    time.Time
	replaced bool
}

// settleDelay is how long an order whose write had an unknown outcome is
// left to the client's retry before settleUnknown decides it.
const settleDelay = time.Second

func newSyncWrites(d *deps, standard *standardPath) *syncWrites {
	return &syncWrites{deps: d, standard: standard, unsettled: map[orderKey]unsettledWrite{}}
}

func (w *syncWrites) mode() Mode     { return ModeFlashSync }
func (w *syncWrites) pending() bool  { return false }
func (w *syncWrites) fallback() bool { return w.cfg.FlashFallback }

// write writes a use the gate granted. On a failure that provably wrote
// nothing the use goes back to the gate and the orderId is forgotten there,
// so the client may retry it. On a failure whose outcome is unknown (the
// row may have been committed) the gate keeps the use: giving it back could
// let the gate hand out a use the store holds. A retry of the orderId
// settles it (the store is idempotent by orderId); settleUnknown does
// otherwise. The store is asked with req.Code, which records a campaign
// code on the redemption; the gate keeps the hold under rt.gateCode.
func (w *syncWrites) write(ctx context.Context, rt route, req ReserveRequest, hold Hold, _ GateDecision) (Reservation, error) {
	res, err := w.standard.write(ctx, req)
	if err == nil {
		w.rediscount(ctx, rt, hold, res)
		return res, nil
	}
	if IsOutcomeUnknown(err) {
		w.mu.Lock()
		w.unsettled[orderKey{rt.gateCode(), req.OrderID}] = unsettledWrite{hold: hold, since: w.now()}
		w.mu.Unlock()
		w.log.WarnContext(ctx, "durable write outcome unknown; use kept in the gate until settled", "code", req.Code, "orderId", req.OrderID, "err", err)
		return Reservation{}, err
	}
	w.giveBack(ctx, ModeFlashSync, rt.gateCode(), hold, err)
	return Reservation{}, err
}

// replay answers a retry through the store, which is idempotent by
// orderId: it returns the row the first request wrote, or writes it if
// that request's write is still to come or its outcome was unknown (the
// gate already holds the use). A 503 here leaves the order as unsettled as
// it was: the gate holds a use for it.
func (w *syncWrites) replay(ctx context.Context, rt route, req ReserveRequest, dec GateDecision, _ int) (Reservation, bool, error) {
	// A take of this hold the gate did not answer is this retry's to
	// complete; the settle must not give its use back meanwhile.
	claimed := w.unanswered.claim(rt.gateCode(), req.OrderID, dec.Hold.ReservedAt)
	res, err := w.standard.write(ctx, req)
	if !IsCode(err, CodeUnavailable) {
		w.settled(rt.gateCode(), req.OrderID)
	}
	if claimed && err != nil {
		// Not written (or not known to be): the settle decides it again.
		w.unanswered.remember(rt.gateCode(), dec.Hold, w.now())
	}
	return res, false, outcomeUnknown(err, req.OrderID)
}

// mayHold: this instance's write of the order ended with an unknown
// outcome and has not been settled, so the gate still holds its use.
func (w *syncWrites) mayHold(_ context.Context, rt route, orderID string, _ error) bool {
	return w.settles(rt.gateCode(), orderID)
}

// settles: the write of the order ended with an unknown outcome, and
// neither a retry nor settleUnknown has decided it yet.
func (w *syncWrites) settles(code, orderID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, unsettled := w.unsettled[orderKey{code, orderID}]
	return unsettled
}

// replacedNotHeld asks the store: the gate's copy of an order does not
// know of its confirmation in this mode. A store that cannot tell leaves
// the gate's answer standing.
func (w *syncWrites) replacedNotHeld(ctx context.Context, req ReserveRequest) bool {
	row, err := w.store.Order(ctx, req.ReplacesOrderID)
	switch {
	case IsCode(err, CodeReservationNotFound):
		return true
	case err != nil:
		return false
	}
	return row.CustomerID != req.CustomerID || row.Status != StatusReserved
}

// releasedOrder asks the store, which is the truth in this mode, whether
// the order is released. The gate's mark runs ahead of it: a replacement
// marks the replaced order released in the gate (replace.lua) before its
// durable write, and that write may be refused (the replaced order
// CONFIRMED, which the gate is not told of in this mode) or never happen
// (a take whose answer was lost, a write that failed), after which the
// order holds its use in the gate again (Gate.Unreplace, at once or by the
// settle a second or more later); a sold-out copy of the gate's orders
// keeps the mark up to its TTL longer. So the row answers: held for this
// customer, a replay of it; another customer's, ORDER_CONFLICT; released
// or unknown to the store, ORDER_RELEASED. A store that does not answer
// gives its error: this call takes nothing.
func (w *syncWrites) releasedOrder(ctx context.Context, code, orderID, customerID string) (Redemption, error) {
	row, err := w.store.Redemption(ctx, code, orderID)
	switch {
	case IsCode(err, CodeReservationNotFound):
		return Redemption{}, orderReleased(orderID)
	case err != nil:
		return Redemption{}, err
	case row.CustomerID != customerID:
		return Redemption{}, orderConflict(code, orderID, "")
	case !row.Status.Held():
		return Redemption{}, orderReleased(orderID)
	}
	return row, nil
}

// notLoaded falls back to the store's reservation, which checks the stock
// itself.
func (w *syncWrites) notLoaded(ctx context.Context, _ route, req ReserveRequest) (Reservation, bool, error) {
	res, err := w.standard.write(ctx, req)
	return res, true, err
}

// unwritten: every reservation of this mode is in the store once answered.
func (w *syncWrites) unwritten(_ context.Context, _ route, _ string, storeErr error) (Redemption, error) {
	return Redemption{}, storeErr
}

func (w *syncWrites) applyUnwritten(context.Context, route, string) (bool, error) { return false, nil }
func (w *syncWrites) beforeConfirm(context.Context, route, string) (bool, error)  { return true, nil }
func (w *syncWrites) afterConfirm(context.Context, route, string)                 {}
func (w *syncWrites) caughtUp(context.Context) error                              { return nil }
func (w *syncWrites) tracksConfirmation() bool                                    { return false }

// giveBackOrphan: the write failed, so the orderId is forgotten and a
// retry may take a use again.
func (w *syncWrites) giveBackOrphan(ctx context.Context, code string, h Hold) error {
	if _, err := w.gate.Release(ctx, code, h.OrderID, ReleaseForget); err != nil {
		return err
	}
	w.log.WarnContext(ctx, "reconciliation gave back an orphan gate hold", "code", code, "orderId", h.OrderID, "fenced", false, "replaces", h.Replaces)
	return nil
}

// undone settles a replacement's hold (h.Replaces) whose replaced order is
// CONFIRMED in the store without a fence: such a replacement was never
// written and never will be (the store replaces only a RESERVED hold,
// releasing it, and a released order is never confirmed), so its use goes
// back to the replaced order in the gate, as after a refused write, and a
// retry of the orderId is decided afresh (REPLACED_ORDER_NOT_HELD) instead
// of meeting a RELEASED fence. An unknown or unconfirmed replaced order is
// left to the fence, which a replacement that did succeed needs.
func (w *syncWrites) undone(ctx context.Context, code string, h Hold) (bool, error) {
	if h.Replaces == "" {
		return false, nil
	}
	row, err := w.store.Order(ctx, h.Replaces)
	switch {
	case IsCode(err, CodeReservationNotFound):
		return false, nil
	case err != nil:
		return false, err
	case row.Status != StatusConfirmed:
		return false, nil
	}
	cctx, cancel := w.writeContext(ctx)
	defer cancel()
	if _, err := w.gate.Unreplace(cctx, code, h.OrderID, h.Replaces); err != nil {
		return false, err
	}
	w.log.WarnContext(ctx, "unsettled replacement of a confirmed order undone: the replaced hold stands again",
		"code", code, "orderId", h.OrderID, "replaces", h.Replaces)
	return true, nil
}

// settleUnknown decides the orders whose durable write ended with an
// unknown outcome at least settleDelay ago and that no retry has settled
// since, with fence (fenceHold): the row the write committed is found and
// the gate keeps its use, or a RELEASED row makes sure a write still on
// its way takes nothing and the gate's use is given back. It returns how
// many it settled; orders it could not settle (the store is still down)
// stay for the next call.
func (w *syncWrites) settleUnknown(ctx context.Context, fence func(context.Context, string, Hold) (bool, error)) (int, error) {
	w.mu.Lock()
	due := make(map[orderKey]Hold, len(w.unsettled))
	var replaced []orderKey
	now := w.now()
	for k, u := range w.unsettled {
		switch {
		case now.Sub(u.since) < settleDelay:
		case u.replaced:
			replaced = append(replaced, k)
		default:
			due[k] = u.hold
		}
	}
	w.mu.Unlock()
	n := 0
	for k, h := range due {
		if _, err := fence(ctx, k.code, h); err != nil {
			return n, err
		}
		w.settled(k.code, k.orderID)
		n++
	}
	// After the fences: a write they did not stop has committed by now.
	for _, k := range replaced {
		row, err := w.store.Order(ctx, k.orderID)
		if err != nil && !IsCode(err, CodeReservationNotFound) {
			return n, err
		}
		if err == nil && row.Status == StatusReleased {
			if _, err := w.gate.Release(ctx, k.code, k.orderID, ReleaseMark); err != nil {
				return n, err
			}
		}
		w.settled(k.code, k.orderID)
		n++
	}
	return n, nil
}

// settled drops orderID, whose hold the gate keeps under code, from the
// unsettled orders: a retry got an answer from the store.
func (w *syncWrites) settled(code, orderID string) {
	w.mu.Lock()
	delete(w.unsettled, orderKey{code, orderID})
	w.mu.Unlock()
}
