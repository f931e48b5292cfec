package voucher

import (
	"context"
	"errors"
	"time"
)

// What Kafka mode does for a reservation the gate decided and the consumer
// has not written to the store yet: it is answered from the gate, and
// written from it (with the consumer's own idempotent function) before a
// confirmation, release or extension acts on it. The gate also records
// confirmations in this mode, so that no replacement it decides alone takes
// over an order being confirmed.

// unwritten answers a reservation the store does not have from the gate's
// hold: RESERVED, or RELEASED for a released marker; a pending hold (or
// none) is the store's not-found.
func (w *kafkaWrites) unwritten(ctx context.Context, rt route, orderID string, storeErr error) (Redemption, error) {
	h, found, gerr := w.gateHold(ctx, rt.gateCode(), rt.campaignCode, orderID)
	if errors.Is(gerr, errInStoreNow) {
		return w.store.Redemption(ctx, rt.code, orderID)
	}
	if gerr != nil {
		return Redemption{}, gerr
	}
	if !found || h.Pending {
		return Redemption{}, storeErr
	}
	st := StatusReserved
	if h.Released {
		st = StatusReleased
	}
	return holdRedemption(rt.code, h, st), nil
}

// beforeConfirm marks orderID confirmed in the gate before the store
// confirms it: a replacement is decided by the gate alone in this mode
// (its store write comes later from the consumer), so the gate must know a
// confirmation from the moment it is under way, or a replacement could
// release an order the store confirms. A replacement that came first left
// the order released in the gate: RESERVATION_RELEASED, whatever the store
// says while the consumer has not applied it. A pending hold whose row the
// store has (the consumer wrote it before the producer's ack came back) is
// made durable first; without the row, the reservation is still being
// written: 503. A gate that cannot be read answers 503: confirming without
// it could let a replacement take the order over. A voucher the gate has
// not loaded (Redis lost it) is loaded first, and the mark made then: a
// load that read the order RESERVED before the store confirmed it could
// otherwise write it as held after the confirmation, and a replacement
// take it over before reconciliation marks it. The load waits for the
// consumer (503 until it has caught up, as reservations get). An orderId
// unknown to a loaded gate: the store decides. marked reports that the gate
// has the mark.
func (w *kafkaWrites) beforeConfirm(ctx context.Context, rt route, orderID string) (marked bool, err error) {
	gateCode := rt.gateCode()
	for attempt, loadedNow := 0, false; ; attempt++ {
		found, err := w.gate.Confirm(ctx, gateCode, orderID, rt.campaignCode)
		if err != nil {
			return false, Unavailable(err, "voucher %s: the confirmation of %s cannot be recorded in Redis; retry", rt.code, orderID)
		}
		switch found {
		case GateConfirmReleased:
			return false, Errorf(CodeReservationReleased, "reservation %s of voucher %s was released", orderID, rt.code)
		case GateConfirmPending:
			if attempt > 0 {
				return false, Unavailable(nil, "reservation %s is still being written; retry", orderID)
			}
			h, found, err := w.gate.Lookup(ctx, gateCode, orderID)
			if err != nil || !found || !h.Pending {
				continue
			}
			row, err := w.store.Redemption(ctx, rt.code, orderID)
			if err != nil || row.Status != StatusReserved && row.Status != StatusConfirmed {
				return false, Unavailable(err, "reservation %s is still being written; retry", orderID)
			}
			if _, err := w.gate.Commit(ctx, gateCode, h); err != nil {
				return false, Unavailable(err, "reservation %s is still being written; retry", orderID)
			}
		case GateConfirmMarked:
			return true, nil
		default:
			if loadedNow {
				return false, nil
			}
			loaded, err := w.gate.Loaded(ctx, gateCode)
			if err != nil {
				return false, Unavailable(err, "voucher %s: the confirmation of %s cannot be recorded in Redis; retry", rt.code, orderID)
			}
			if loaded {
				return false, nil
			}
			res, err := w.load(ctx, gateCode)
			if err != nil {
				return false, err
			}
			if !res.InGate {
				return false, Unavailable(nil, "voucher %s is being loaded into Redis; retry", rt.code)
			}
			loadedNow = true
		}
	}
}

// afterConfirm marks a confirmed order in the gate after the store
// confirmed it, when the gate had nothing to go by before (the orderId
// unknown, or Redis lost the voucher again since beforeConfirm loaded it):
// a load that read the order RESERVED just before may have put it in the
// gate as held meanwhile. A load that writes it later still is repaired by
// reconciliation (ReconcileReport.Unconfirmed).
func (w *kafkaWrites) afterConfirm(ctx context.Context, rt route, orderID string) {
	if _, err := w.gate.Confirm(ctx, rt.gateCode(), orderID, rt.campaignCode); err != nil {
		w.log.WarnContext(ctx, "confirmation not marked in the gate; reconciliation will", "code", rt.code, "orderId", orderID, "err", err)
	}
}

// caughtUp: a hold without a row may still be an event in the topic,
// acknowledged and answered 201, until the consumer has caught up.
func (w *kafkaWrites) caughtUp(ctx context.Context) error { return w.events.CaughtUp(ctx) }

func (w *kafkaWrites) tracksConfirmation() bool { return true }

// giveBackOrphan gives back a gate hold that has no row past the grace
// period. The event may still be on its way - a producer that timed out
// keeps retrying for as long as the broker has not answered, even after the
// consumer looked caught up - so the orderId is first fenced in the store
// with a RELEASED row (the late event then takes nothing) and the gate
// marks it released: a retry is answered ORDER_RELEASED. A row of this
// order found instead means the event has landed; the next round commits
// the hold. A row of another voucher or customer means the consumer
// refuses this hold's event as a conflict, and a retry is answered
// ORDER_CONFLICT: the orderId is forgotten.
//
// A hold that took its use over from a stack's member (h.Replaces: a
// member of a replacing stack, or a transit hold, reserveStackKafka) is
// fenced without releasing that member, which would leave its stack partly
// held (fenceHold's rule): the use goes back to the member while the store
// holds it (the replacement's event was refused), else to the voucher.
func (w *kafkaWrites) giveBackOrphan(ctx context.Context, code string, h Hold) error {
	mode := ReleaseForget
	fence, member := h, false
	if h.Replaces != "" {
		var err error
		if _, member, err = w.store.StackOf(ctx, h.Replaces); err != nil {
			return err
		}
		if member {
			fence.Replaces = ""
		}
	}
	row, inserted, err := w.store.AbandonOrder(ctx, code, fence, w.now())
	if err != nil {
		return err
	}
	switch {
	case inserted:
		mode = ReleaseMark
	case row.VoucherCode == code && row.CustomerID == h.CustomerID:
		w.log.InfoContext(ctx, "orphan gate hold has a row after all; kept", "code", code, "orderId", h.OrderID)
		return nil
	}
	if member {
		old, err := w.store.Order(ctx, h.Replaces)
		if err != nil && !IsCode(err, CodeReservationNotFound) {
			return err
		}
		if err == nil && old.Status.Held() {
			if _, err := w.gate.Unreplace(ctx, code, h.OrderID, h.Replaces); err != nil {
				return err
			}
			w.log.WarnContext(ctx, "reconciliation gave an orphan replacement's use back to the replaced stack member", "code", code,
				"orderId", h.OrderID, "replaces", h.Replaces)
			return nil
		}
	}
	if _, err := w.gate.Release(ctx, code, h.OrderID, mode); err != nil {
		return err
	}
	w.log.WarnContext(ctx, "reconciliation gave back an orphan gate hold", "code", code, "orderId", h.OrderID, "fenced", mode == ReleaseMark, "replaces", h.Replaces)
	return nil
}

// undone: this mode answers a replacement only once its event is
// acknowledged, and the consumer decides it; nothing is undone here.
func (w *kafkaWrites) undone(context.Context, string, Hold) (bool, error) { return false, nil }

// settleUnknown: a write of unknown outcome stays a pending hold, which
// replays and reconciliation settle (fenceOrphan, giveBackOrphan).
func (w *kafkaWrites) settleUnknown(context.Context, func(context.Context, string, Hold) (bool, error)) (int, error) {
	return 0, nil
}

// settles: reconciliation settles this mode's writes of unknown outcome.
func (w *kafkaWrites) settles(string, string) bool { return false }

// applyUnwritten writes a reservation the consumer has not applied
// yet, with the consumer's own idempotent function, so that confirm and
// release can act on it. It reports whether there was one to apply, or
// the consumer wrote it meanwhile: either way the caller runs its store
// operation again. A replacement's hold is written as the replacement
// (the hold carries the order it replaced), and only once the replaced
// order is in the store or the consumer has caught up: written before the
// replaced order's own event, it would take a second use (Unavailable
// until then). A campaign hold's code waits the same way for the order a
// replacement last freed it from (Gate.FreedFrom): written before that
// order's own event, it would hold the code, and the consumer would refuse
// that event.
func (w *kafkaWrites) applyUnwritten(ctx context.Context, rt route, orderID string) (bool, error) {
	gateCode := rt.gateCode()
	h, found, err := w.gateHold(ctx, gateCode, rt.campaignCode, orderID)
	if errors.Is(err, errInStoreNow) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if !found || h.Released {
		return false, nil
	}
	if h.Pending {
		return false, Unavailable(nil, "reservation %s is still being written; retry", orderID)
	}
	if h.Replaces != "" {
		if err := w.replacedInStore(ctx, orderID, h.Replaces); err != nil {
			return false, err
		}
	}
	if h.Code != "" {
		freed, err := w.gate.FreedFrom(ctx, gateCode, h.Code)
		if err != nil {
			return false, err
		}
		if freed != "" && freed != h.Replaces {
			if err := w.replacedInStore(ctx, orderID, freed); err != nil {
				return false, err
			}
		}
	}
	results, err := w.store.ApplyReserved(ctx, []ReservedEvent{EventFromHold(gateCode, h)})
	if err != nil {
		return false, err
	}
	if len(results) == 1 && results[0].Outcome == Rejected {
		if cerr := w.events.CaughtUp(ctx); cerr != nil {
			// An event of the consumer still to come may be what the store
			// needs first (the release or replacement of an order holding
			// the same campaign code): retry once the consumer has caught
			// up.
			return false, &Error{Code: CodeUnavailable, RetryAfter: time.Second, Err: cerr,
				Message: "reservation " + orderID + " is still being written; retry"}
		}
		return false, Errorf(CodeInternal, "the database rejected reservation %s: %s", orderID, results[0].Reason)
	}
	return true, nil
}

// replacedInStore returns nil when the order a replacement's hold replaced
// is in the store, or when the consumer has caught up (its event, if any,
// was applied): the replacement may then be written. Otherwise the
// replaced order's event is still on its way, and orderID is answered as
// still being written.
func (w *kafkaWrites) replacedInStore(ctx context.Context, orderID, replaced string) error {
	_, err := w.store.Order(ctx, replaced)
	if !IsCode(err, CodeReservationNotFound) {
		return err
	}
	if cerr := w.events.CaughtUp(ctx); cerr != nil {
		return &Error{Code: CodeUnavailable, RetryAfter: time.Second, Err: cerr,
			Message: "reservation " + orderID + " is still being written; retry"}
	}
	return nil
}

// gateHold looks orderID up in the gate for a Kafka-mode voucher whose store
// row is missing: under gateCode, a hold of campaignCode ("" for a
// voucher's); a hold of the orderId with another campaign code is not this
// reservation, and found is false. An orderId the gate does not know is only known to be
// absent when the gate has the voucher loaded (every reservation since the
// load went through it) or when the consumer has caught up (the store has
// every event): a voucher gone from Redis while events wait in Kafka answers
// Unavailable rather than a 404 for a reservation that stands.
func (w *kafkaWrites) gateHold(ctx context.Context, code, campaignCode, orderID string) (Hold, bool, error) {
	h, found, err := w.gate.Lookup(ctx, code, orderID)
	if err != nil {
		return h, found, err
	}
	if found {
		return h, h.Code == campaignCode, nil
	}
	loaded, err := w.gate.Loaded(ctx, code)
	if err != nil {
		return Hold{}, false, err
	}
	if loaded {
		return Hold{}, false, nil
	}
	if err := w.events.CaughtUp(ctx); err != nil {
		return Hold{}, false, &Error{Code: CodeUnavailable, RetryAfter: time.Second, Err: err,
			Message: "voucher " + code + " is not loaded in Redis and the consumer has not caught up: reservation " + orderID + " may still be on its way to the database; retry"}
	}
	// The consumer may have written the row between the caller's look at
	// the store and catching up: ask again before calling the order absent.
	asked := code
	if campaignCode != "" {
		asked = campaignCode
	}
	if _, err := w.store.Redemption(ctx, asked, orderID); !IsCode(err, CodeReservationNotFound) {
		if err == nil {
			err = errInStoreNow
		}
		return Hold{}, false, err
	}
	return Hold{}, false, nil
}

// errInStoreNow tells gateHold's callers that the row they missed has been
// written since: they read the store again.
var errInStoreNow = errors.New("the reservation reached the database meanwhile")
