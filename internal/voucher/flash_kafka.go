package voucher

import (
	"context"
	"errors"
	"time"
)

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
func (s *Service) publish(ctx context.Context, code string, hold Hold) (Reservation, error) {
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	if err := s.claimOrder(wctx, code, hold); err != nil {
		return Reservation{}, err
	}
	known := make(chan storedOrder, 1)
	go func() {
		row, err := s.store.Order(wctx, hold.OrderID)
		known <- storedOrder{row: row, err: err}
	}()
	perr := s.cfg.Events.PublishReserved(wctx, EventFromHold(code, hold))
	var so storedOrder
	select {
	case so = <-known:
	case <-time.After(storeCheckWait):
		// A store that hangs counts as unavailable; the read ends with wctx.
		so.err = Unavailable(nil, "the store did not answer within %s", storeCheckWait)
	}
	if res, done, err := s.settleStoredOrder(wctx, code, hold, so); done {
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
			// same orderId gets its answer once the store has it, and
			// reconciliation gives the use back if it never arrives.
			s.log.WarnContext(ctx, "reservation event outcome unknown; hold kept pending", "code", code, "orderId", hold.OrderID, "err", perr)
			return Reservation{}, &Error{Code: CodeUnavailable, Err: perr, OutcomeUnknown: true,
				Message: "Kafka did not acknowledge in time; the reservation may or may not stand: retry with the same orderId"}
		}
		s.giveBack(ctx, code, hold, ModeFlashKafka, perr)
		if uerr := s.gate.UnclaimOrder(wctx, hold.OrderID, code); uerr != nil {
			s.log.WarnContext(ctx, "could not drop the orderId claim; a retry with another voucher gets ORDER_CONFLICT until it expires",
				"code", code, "orderId", hold.OrderID, "err", uerr)
		}
		if !IsCode(perr, CodeUnavailable) {
			perr = Unavailable(perr, "could not record the reservation")
		}
		return Reservation{}, perr
	}
	committed, err := s.gate.Commit(wctx, code, hold)
	if err != nil {
		// The event is durable, so the reservation stands; replays of this
		// orderId wait and then get 503 until reconciliation commits the hold.
		s.log.ErrorContext(ctx, "hold not marked durable in the gate", "code", code, "orderId", hold.OrderID, "err", err)
	}
	if err == nil && !committed {
		if res, done, err := s.notCommitted(wctx, code, hold); done {
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
func (s *Service) notCommitted(ctx context.Context, code string, hold Hold) (Reservation, bool, error) {
	h, found, err := s.gate.Lookup(ctx, code, hold.OrderID)
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
func (s *Service) replayDurable(ctx context.Context, code string, h Hold) (Reservation, error) {
	row, err := s.store.Redemption(ctx, h.CodeOr(code), h.OrderID)
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
func (s *Service) orphanAge() time.Duration { return max(3*s.cfg.WriteTimeout, minOrphanAge) }

// fenceOrphan releases a pending hold whose event has not reached the store
// well after its produce gave up waiting (the outcome was unknown), so that
// a retry of the orderId gets a definite answer instead of waiting for
// reconciliation. The producer may still deliver the event - an idempotent
// producer retries for as long as the broker has not answered - so the
// orderId is fenced in the store first (a RELEASED row; the late event then
// takes nothing) and marked released in the gate. It reports whether the
// order is now released; false when the hold is too young, the consumer is
// behind, or the orderId has a row after all.
func (s *Service) fenceOrphan(ctx context.Context, code string, h Hold) bool {
	if s.cfg.Clock().Sub(h.ReservedAt) < s.orphanAge() || s.cfg.Events.CaughtUp(ctx) != nil {
		return false
	}
	_, inserted, err := s.store.AbandonOrder(ctx, code, h, s.cfg.Clock())
	if err != nil || !inserted {
		return false
	}
	if _, err := s.gate.Release(ctx, code, h.OrderID, ReleaseMark); err != nil {
		// The store has decided; reconciliation gives the use back (a hold
		// whose row is RELEASED is stale).
		s.log.WarnContext(ctx, "fenced orphan hold not given back in the gate", "code", code, "orderId", h.OrderID, "err", err)
	}
	s.log.WarnContext(ctx, "pending hold never reached the store; fenced and released", "code", code, "orderId", h.OrderID, "replaces", h.Replaces)
	return true
}

// claimOrder claims the orderId across vouchers in the gate. On an error the
// gate's use has been given back.
func (s *Service) claimOrder(ctx context.Context, code string, hold Hold) error {
	owner, err := s.gate.ClaimOrder(ctx, hold.OrderID, code, s.cfg.Clock().Add(claimTTL))
	if err != nil {
		s.giveBack(ctx, code, hold, ModeFlashKafka, err)
		return err
	}
	if owner != code {
		s.giveBack(ctx, code, hold, ModeFlashKafka, nil)
		return orderConflict(code, hold.OrderID, owner)
	}
	return nil
}

// storedOrder is the store's answer about an orderId.
type storedOrder struct {
	row Redemption
	err error
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
func (s *Service) settleStoredOrder(ctx context.Context, code string, hold Hold, so storedOrder) (res Reservation, done bool, err error) {
	row := so.row
	switch {
	case so.err != nil:
		// Not found, or the store is unavailable: the gate's claim decided.
		return Reservation{}, false, nil
	case row.VoucherCode != hold.CodeOr(code) || row.CustomerID != hold.CustomerID:
		s.giveBack(ctx, code, hold, ModeFlashKafka, nil)
		_ = s.gate.UnclaimOrder(ctx, hold.OrderID, code)
		return Reservation{}, true, orderConflict(hold.CodeOr(code), hold.OrderID, row.VoucherCode)
	case row.Status == StatusReleased:
		if hold.Replaces != "" {
			s.giveBack(ctx, code, hold, ModeFlashKafka, nil)
		}
		if _, err := s.gate.Release(ctx, code, hold.OrderID, ReleaseMark); err != nil {
			s.log.ErrorContext(ctx, "could not mark a released order in the gate", "code", code, "orderId", hold.OrderID, "err", err)
		}
		return Reservation{}, true, orderReleased(hold.OrderID)
	case ownEvent(code, hold, row):
		return Reservation{}, false, nil
	}
	// The store holds this very reservation but the gate had lost it: the use
	// the gate just took is the one the row holds, so keep it.
	if _, err := s.gate.Commit(ctx, code, hold); err != nil {
		s.log.ErrorContext(ctx, "hold not marked durable in the gate", "code", code, "orderId", hold.OrderID, "err", err)
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

// applyFromGate writes a Kafka-mode reservation the consumer has not applied
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
func (s *Service) applyFromGate(ctx context.Context, code, orderID string) (bool, error) {
	gateCode, campaignCode, kafka := s.kafkaFlash(ctx, code)
	if !kafka {
		return false, nil
	}
	h, found, err := s.gateHold(ctx, gateCode, campaignCode, orderID)
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
		if err := s.replacedInStore(ctx, orderID, h.Replaces); err != nil {
			return false, err
		}
	}
	if h.Code != "" {
		freed, err := s.gate.FreedFrom(ctx, gateCode, h.Code)
		if err != nil {
			return false, err
		}
		if freed != "" && freed != h.Replaces {
			if err := s.replacedInStore(ctx, orderID, freed); err != nil {
				return false, err
			}
		}
	}
	results, err := s.store.ApplyReserved(ctx, []ReservedEvent{EventFromHold(gateCode, h)})
	if err != nil {
		return false, err
	}
	if len(results) == 1 && results[0].Outcome == Rejected {
		if cerr := s.cfg.Events.CaughtUp(ctx); cerr != nil {
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
func (s *Service) replacedInStore(ctx context.Context, orderID, replaced string) error {
	_, err := s.store.Order(ctx, replaced)
	if !IsCode(err, CodeReservationNotFound) {
		return err
	}
	if cerr := s.cfg.Events.CaughtUp(ctx); cerr != nil {
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
func (s *Service) gateHold(ctx context.Context, code, campaignCode, orderID string) (Hold, bool, error) {
	h, found, err := s.gate.Lookup(ctx, code, orderID)
	if err != nil {
		return h, found, err
	}
	if found {
		return h, h.Code == campaignCode, nil
	}
	loaded, err := s.gate.Loaded(ctx, code)
	if err != nil {
		return Hold{}, false, err
	}
	if loaded {
		return Hold{}, false, nil
	}
	if err := s.cfg.Events.CaughtUp(ctx); err != nil {
		return Hold{}, false, &Error{Code: CodeUnavailable, RetryAfter: time.Second, Err: err,
			Message: "voucher " + code + " is not loaded in Redis and the consumer has not caught up: reservation " + orderID + " may still be on its way to the database; retry"}
	}
	// The consumer may have written the row between the caller's look at
	// the store and catching up: ask again before calling the order absent.
	asked := code
	if campaignCode != "" {
		asked = campaignCode
	}
	if _, err := s.store.Redemption(ctx, asked, orderID); !IsCode(err, CodeReservationNotFound) {
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

// kafkaFlash reports whether code's reservations go through Kafka: a flash
// voucher or flash campaign in Kafka mode; gateCode and campaignCode are
// as flashGate returns them.
func (s *Service) kafkaFlash(ctx context.Context, code string) (gateCode, campaignCode string, ok bool) {
	if s.cfg.FlashWrites != FlashKafka {
		return "", "", false
	}
	return s.flashGate(ctx, code)
}
