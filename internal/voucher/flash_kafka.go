package voucher

import (
	"context"
	"errors"
	"time"
)

// kafkaWrites publishes a ReservedEvent for each use the gate took and
// answers once Kafka acknowledged it; a consumer writes the store. Until
// the acknowledgement a hold is pending in the gate; confirm, release and
// extension of a reservation the consumer has not written yet write it
// first from the gate (kafka_unwritten.go).
type kafkaWrites struct {
	*deps
	// load loads a voucher into the gate (loader.warmup); beforeConfirm
	// loads a voucher the gate does not have before it confirms.
	load func(ctx context.Context, code string) (WarmupResult, error)
}

func (w *kafkaWrites) mode() Mode     { return ModeFlashKafka }
func (w *kafkaWrites) pending() bool  { return true }
func (w *kafkaWrites) fallback() bool { return false }

// Retry limits of kafkaWrites.replay.
const (
	// pendingReplayPolls is how many times a replay of an order whose hold
	// is still pending asks the gate again, pendingReplayPoll apart, before
	// it looks at the store (about one second in all).
	pendingReplayPolls = 50
	// pendingReplayPoll is the wait between those polls.
	pendingReplayPoll = 20 * time.Millisecond
)

// write publishes the use the gate took; the gate's count is the atomic
// step in this mode (the store learns of the take later), so the stock
// after it is the gate's.
func (w *kafkaWrites) write(ctx context.Context, rt route, _ ReserveRequest, hold Hold, dec GateDecision) (Reservation, error) {
	res, err := w.publish(ctx, rt.gateCode(), hold)
	if err == nil && !res.Replay && hold.Replaces == "" {
		res.Taken = &Stock{Remaining: dec.Remaining, TotalLimit: rt.v.TotalLimit}
	}
	return res, err
}

// replay answers a retry of an order the gate holds. A durable hold is
// answered from the store or the hold (replayDurable). A pending hold this
// instance took with a call the gate did not answer (unansweredTakes) had
// no event published: the retry publishes it. Another pending one means
// the first request is still waiting for Kafka's ack (or its outcome was
// unknown): answering 201 now could promise a reservation that then fails,
// so the gate is asked again for about a second, unless the hold is older
// than any produce (orphanAge) and waiting cannot change it. Then a row in
// the store makes the hold durable whatever the producer said, an old hold
// without one is fenced (fenceOrphan), and otherwise the answer is a 503
// whose outcome is unknown, as the first attempt's was.
func (w *kafkaWrites) replay(ctx context.Context, rt route, req ReserveRequest, dec GateDecision, attempt int) (Reservation, bool, error) {
	gateCode := rt.gateCode()
	if !dec.Hold.Pending {
		res, err := w.replayDurable(ctx, gateCode, dec.Hold)
		return res, false, err
	}
	if dec.Hold.Owner == w.cfg.Instance && w.unanswered.claim(gateCode, req.OrderID, dec.Hold.ReservedAt) {
		// This instance's take of the hold got no answer, so nothing was
		// published for it: this retry completes it, as its first attempt
		// would have.
		res, err := w.publish(ctx, gateCode, dec.Hold)
		return res, false, err
	}
	if attempt < pendingReplayPolls && w.cfg.Clock().Sub(dec.Hold.ReservedAt) < w.orphanAge() &&
		sleepCtx(ctx, pendingReplayPoll) == nil {
		return Reservation{}, true, nil
	}
	if row, err := w.store.Redemption(ctx, req.Code, req.OrderID); err == nil && row.CustomerID == req.CustomerID {
		if row.Status == StatusReleased {
			// Released (or fenced) in the store: the hold is stale.
			if _, err := w.gate.Release(ctx, gateCode, req.OrderID, ReleaseMark); err != nil {
				w.log.WarnContext(ctx, "stale hold not released in the gate", "code", req.Code, "orderId", req.OrderID, "err", err)
				w.unanswered.rememberRelease(gateCode, rt.campaignCode, req.OrderID, w.now())
			}
			return Reservation{}, false, orderReleased(req.OrderID)
		}
		if _, err := w.gate.Commit(ctx, gateCode, dec.Hold); err != nil {
			w.log.WarnContext(ctx, "hold not marked durable in the gate", "code", req.Code, "orderId", req.OrderID, "err", err)
		}
		return Reservation{Redemption: row, Replay: true}, false, nil
	}
	if w.fenceOrphan(ctx, gateCode, dec.Hold) {
		return Reservation{}, false, Errorf(CodeOrderReleased,
			"order %s never reached the database and was released; start a new attempt with a new orderId", req.OrderID)
	}
	// The hold is pending: the first attempt's event may still be
	// written, so this 503 carries the flag as the first one did.
	return Reservation{}, false, &Error{Code: CodeUnavailable, OutcomeUnknown: true,
		Message: "order " + req.OrderID + " is still being written and may or may not stand: retry with the same orderId"}
}

// mayHold: while the consumer has not caught up, the order's event may be
// on its way to the store.
func (w *kafkaWrites) mayHold(ctx context.Context, _ route, _ string, rowErr error) bool {
	return IsCode(rowErr, CodeReservationNotFound) && w.events.CaughtUp(ctx) != nil
}

// replacedNotHeld: the gate decides replacements alone in this mode (the
// store learns of them from the consumer), so its answer stands.
func (w *kafkaWrites) replacedNotHeld(context.Context, ReserveRequest) bool { return false }

// notLoaded: the consumer may be behind with this very order's event (a
// retry after Redis lost its hold), so the answer is not "nothing taken".
func (w *kafkaWrites) notLoaded(_ context.Context, _ route, req ReserveRequest) (Reservation, bool, error) {
	return Reservation{}, false, &Error{Code: CodeUnavailable, OutcomeUnknown: true,
		Message: "voucher " + req.Code + " is not loaded into Redis yet and events may still be on their way to the database; retry with the same orderId"}
}

// releasedOrder: the gate's mark answers, as the gate is this mode's
// record of orders whose events the store may not have yet; a confirmed
// order is never taken over by a replacement here (confirm.lua marks it
// first).
func (w *kafkaWrites) releasedOrder(_ context.Context, _, orderID, _ string) (Redemption, error) {
	return Redemption{}, orderReleased(orderID)
}

// storeCheckWait bounds how long a Kafka-mode reservation waits for the
// store's answer about its orderId once Kafka has answered.
const storeCheckWait = 200 * time.Millisecond

// claimTTL bounds how long an orderId's cross-voucher claim lives in the
// gate: past the consumer's lag, the store itself knows the orderId.
const claimTTL = 24 * time.Hour

// publish sends the reservation event (Kafka mode) and makes the hold durable
// in the gate once acknowledged. The orderId is claimed across vouchers in
// the gate first, and the store is asked about it while Kafka writes the
// event: an orderId the store knows for another voucher or customer is
// refused before the answer, and its event is rejected by the consumer, so
// the use is given back. When the store cannot answer (PostgreSQL down) the
// gate's claim alone decides, so that a sale goes on through an outage
// (docs/kafka.md says what that check then misses).
func (w *kafkaWrites) publish(ctx context.Context, code string, hold Hold) (Reservation, error) {
	wctx, cancel := w.writeContext(ctx)
	defer cancel()
	if err := w.claimOrder(wctx, code, hold); err != nil {
		return Reservation{}, err
	}
	known := make(chan storedOrder, 1)
	go func() {
		row, err := w.store.Order(wctx, hold.OrderID)
		known <- storedOrder{row: row, err: err}
	}()
	perr := w.events.PublishReserved(wctx, EventFromHold(code, hold))
	so := storedAnswer(known)
	if res, done, err := w.settleStoredOrder(wctx, code, hold, so); done {
		return res, err
	}
	if perr != nil && so.err == nil && ownEvent(code, hold, so.row) {
		// The wait gave up, but the consumer has written the event already.
		perr = nil
	}
	if perr != nil {
		if errors.Is(perr, ErrOutcomeUnknown) {
			// The event may still land: giving the use back now could let the
			// gate hand it out twice. The hold stays pending; a retry with the
			// same orderId gets its answer once the store has it, and this
			// instance fences it once the broker answers again, or
			// reconciliation if the instance is gone.
			w.log.WarnContext(ctx, "reservation event outcome unknown; hold kept pending", "code", code, "orderId", hold.OrderID, "err", perr)
			// Settled once the broker answers again (settleEvent).
			w.unanswered.rememberEvent(code, hold, w.now())
			return Reservation{}, &Error{Code: CodeUnavailable, Err: perr, OutcomeUnknown: true,
				Message: "Kafka did not acknowledge in time; the reservation may or may not stand: retry with the same orderId"}
		}
		w.giveBack(ctx, ModeFlashKafka, code, hold, perr)
		if uerr := w.gate.UnclaimOrder(wctx, hold.OrderID, code); uerr != nil {
			w.log.WarnContext(ctx, "could not drop the orderId claim; a retry with another voucher gets ORDER_CONFLICT until it expires",
				"code", code, "orderId", hold.OrderID, "err", uerr)
		}
		if !IsCode(perr, CodeUnavailable) {
			perr = Unavailable(perr, "could not record the reservation")
		}
		return Reservation{}, perr
	}
	committed, err := w.gate.Commit(wctx, code, hold)
	if err != nil {
		// The event is durable, so the reservation stands; replays of this
		// orderId wait and then get 503 until reconciliation commits the hold.
		w.log.ErrorContext(ctx, "hold not marked durable in the gate", "code", code, "orderId", hold.OrderID, "err", err)
	}
	if err == nil && !committed {
		if res, done, err := w.notCommitted(wctx, code, hold); done {
			return res, err
		}
	}
	hold.Pending = false
	return Reservation{Redemption: holdRedemption(code, hold, StatusReserved)}, nil
}

// notCommitted answers a reservation whose event Kafka acknowledged but
// whose hold was no longer pending when it was to be marked durable: this
// instance stalled past its heartbeat and reconciliation fenced the order
// (a RELEASED row: the event takes nothing), or Redis lost the hold. done
// is false when another process committed the hold (it saw the row): the
// 201 stands.
func (w *kafkaWrites) notCommitted(ctx context.Context, code string, hold Hold) (Reservation, bool, error) {
	h, found, err := w.gate.Lookup(ctx, code, hold.OrderID)
	switch {
	case err == nil && found && h.Released:
		return Reservation{}, true, orderReleased(hold.OrderID)
	case err == nil && found && !h.Pending:
		return Reservation{}, false, nil
	}
	return Reservation{}, true, &Error{Code: CodeUnavailable, OutcomeUnknown: true, Err: err,
		Message: "order " + hold.OrderID + " was written but its hold changed meanwhile; retry with the same orderId"}
}

// replayDurable answers a retry of a reservation whose event Kafka has
// acknowledged. The store is asked first: the order may since have been
// confirmed, or released by the expiry job a moment before the gate heard of
// it. Only a row the consumer has not written yet is answered from the hold;
// then nothing can have changed it. A campaign's row is asked for by its
// campaign code (h.Code), code being the campaign id the gate keys it under.
func (w *kafkaWrites) replayDurable(ctx context.Context, code string, h Hold) (Reservation, error) {
	row, err := w.store.Redemption(ctx, h.CodeOr(code), h.OrderID)
	switch {
	case IsCode(err, CodeReservationNotFound):
		return Reservation{Redemption: holdRedemption(code, h, StatusReserved), Replay: true}, nil
	case err != nil:
		// The reservation stands (Kafka acknowledged it): not "nothing
		// was taken".
		return Reservation{}, outcomeUnknown(err, h.OrderID)
	case row.Status == StatusReleased:
		return Reservation{}, orderReleased(h.OrderID)
	}
	return Reservation{Redemption: row, Replay: true}, nil
}

// minOrphanAge is the least orphanAge, whatever WriteTimeout is.
const minOrphanAge = 10 * time.Second

// orphanAge is how old a pending hold must be before a retry of its orderId
// may treat it as never written: well past any produce attempt.
func (w *kafkaWrites) orphanAge() time.Duration { return max(3*w.cfg.WriteTimeout, minOrphanAge) }

// fenceOrphan releases a pending hold whose event has not reached the store
// well after its produce gave up waiting (the outcome was unknown), so that
// a retry of the orderId gets a definite answer instead of waiting for
// reconciliation. The producer may still deliver the event - an idempotent
// producer retries for as long as the broker has not answered - so the
// orderId is fenced in the store first (a RELEASED row; the late event then
// takes nothing) and marked released in the gate. Another instance's hold
// is taken over in the gate before the fence, as fenceHold does, so that
// its writer, should it resume between the fence and the release, cannot
// make the hold durable and answer 201 for an order whose event the store
// then refuses. It reports whether the order is now released; false when
// the hold is too young, the consumer is behind, its writer made it
// durable or it left the gate meanwhile, or the orderId has a row after
// all.
func (w *kafkaWrites) fenceOrphan(ctx context.Context, code string, h Hold) bool {
	if w.cfg.Clock().Sub(h.ReservedAt) < w.orphanAge() || w.events.CaughtUp(ctx) != nil {
		return false
	}
	if h.Owner != "" && h.Owner != w.cfg.Instance {
		taken, err := w.gate.TakeOver(ctx, code, h, w.cfg.Instance)
		if err != nil || taken != GateTakenOver {
			return false
		}
		h.Owner = w.cfg.Instance
	}
	_, inserted, err := w.store.AbandonOrder(ctx, code, h, w.cfg.Clock())
	if err != nil || !inserted {
		return false
	}
	if _, err := w.gate.Release(ctx, code, h.OrderID, ReleaseMark); err != nil {
		// The store has decided; the settle gives the use back once the
		// gate answers (a hold whose row is RELEASED is stale).
		w.log.WarnContext(ctx, "fenced orphan hold not given back in the gate", "code", code, "orderId", h.OrderID, "err", err)
		w.unanswered.rememberRelease(code, h.Code, h.OrderID, w.now())
	}
	w.log.WarnContext(ctx, "pending hold never reached the store; fenced and released", "code", code, "orderId", h.OrderID, "replaces", h.Replaces)
	return true
}

// claimOrder claims the orderId across vouchers in the gate. On an error the
// gate's use has been given back.
func (w *kafkaWrites) claimOrder(ctx context.Context, code string, hold Hold) error {
	owner, err := w.gate.ClaimOrder(ctx, hold.OrderID, code, w.now().Add(claimTTL))
	if err != nil {
		w.giveBack(ctx, ModeFlashKafka, code, hold, err)
		return err
	}
	if owner != code {
		w.giveBack(ctx, ModeFlashKafka, code, hold, nil)
		return orderConflict(code, hold.OrderID, owner)
	}
	return nil
}

// storedOrder is the store's answer about an orderId.
type storedOrder struct {
	row Redemption
	err error
}

// storedAnswer waits up to storeCheckWait for the store's answer about an
// orderId; a store that hangs counts as unavailable (the read ends with the
// write's context). The read runs while Kafka writes the event, so the
// answer is usually there already and no timer is made for it.
func storedAnswer(known <-chan storedOrder) storedOrder {
	select {
	case so := <-known:
		return so
	default:
	}
	t := time.NewTimer(storeCheckWait)
	defer t.Stop()
	select {
	case so := <-known:
		return so
	case <-t.C:
		return storedOrder{err: Unavailable(nil, "the store did not answer within %s", storeCheckWait)}
	}
}

// ownEvent reports whether row is what the consumer wrote for hold's own
// event: a replay of an orderId the store knew before would carry that
// earlier reservation's time.
func ownEvent(code string, hold Hold, row Redemption) bool {
	return row.VoucherCode == hold.CodeOr(code) && row.CustomerID == hold.CustomerID && row.Status == StatusReserved &&
		row.CreatedAt.Equal(hold.ReservedAt) && row.OrderAmount == hold.OrderAmount
}

// settleStoredOrder answers a Kafka-mode reservation whose orderId the store
// already has from before the gate knew it. done reports that it answered;
// false when the store has no such row, has only this reservation's own
// event (the consumer can be that quick), or could not answer.
//
// Whatever became of the event, the answer is safe: the consumer applies an
// event of an orderId the store knows as AlreadyApplied (same voucher and
// customer, nothing changes) or rejects it (another voucher or customer,
// nothing taken), so the gate's use may be given back for a conflict.
func (w *kafkaWrites) settleStoredOrder(ctx context.Context, code string, hold Hold, so storedOrder) (res Reservation, done bool, err error) {
	row := so.row
	switch {
	case so.err != nil:
		// Not found, or the store is unavailable: the gate's claim decided.
		return Reservation{}, false, nil
	case row.VoucherCode != hold.CodeOr(code) || row.CustomerID != hold.CustomerID:
		w.giveBack(ctx, ModeFlashKafka, code, hold, nil)
		_ = w.gate.UnclaimOrder(ctx, hold.OrderID, code)
		return Reservation{}, true, orderConflict(hold.CodeOr(code), hold.OrderID, row.VoucherCode)
	case row.Status == StatusReleased:
		if hold.Replaces != "" {
			w.giveBack(ctx, ModeFlashKafka, code, hold, nil)
		}
		if _, err := w.gate.Release(ctx, code, hold.OrderID, ReleaseMark); err != nil {
			w.log.ErrorContext(ctx, "could not mark a released order in the gate", "code", code, "orderId", hold.OrderID, "err", err)
			w.unanswered.rememberRelease(code, hold.Code, hold.OrderID, w.now())
		}
		return Reservation{}, true, orderReleased(hold.OrderID)
	case ownEvent(code, hold, row):
		return Reservation{}, false, nil
	}
	// The store holds this very reservation but the gate had lost it: the use
	// the gate just took is the one the row holds, so keep it.
	if _, err := w.gate.Commit(ctx, code, hold); err != nil {
		w.log.ErrorContext(ctx, "hold not marked durable in the gate", "code", code, "orderId", hold.OrderID, "err", err)
	}
	return Reservation{Redemption: row, Replay: true}, true, nil
}

// holdRedemption is the redemption a gate hold of the voucher keyed under
// code stands for, with status st; a campaign's hold answers with its
// campaign code, as the store does.
func holdRedemption(code string, h Hold, st Status) Redemption {
	return Redemption{
		OrderID: h.OrderID, VoucherCode: h.CodeOr(code), CustomerID: h.CustomerID,
		OrderAmount: h.OrderAmount, DiscountAmount: h.DiscountAmount, Status: st,
		CreatedAt: h.ReservedAt, UpdatedAt: h.ReservedAt, ExpiresAt: h.ExpiresAt,
	}
}
