package voucher

import (
	"context"
	"time"
)

// unsettledWrite is a hold whose write ended with an unknown outcome at
// since.
type unsettledWrite struct {
	hold  Hold
	since time.Time
}

// writeTaken writes a use the gate granted (sync mode). On a failure that
// provably wrote nothing the use goes back to the gate and the orderId is
// forgotten there, so the client may retry it. On a failure whose outcome
// is unknown (the row may have been committed) the gate keeps the use:
// giving it back could let the gate hand out a use the store holds. A
// retry of the orderId settles it (the store is idempotent by orderId);
// SettleUnknown does otherwise. gateCode is the code the gate keeps the
// hold under (for a campaign code, its campaign's id); the store is asked
// with req.Code, which records a campaign code on the redemption.
func (s *Service) writeTaken(ctx context.Context, req ReserveRequest, gateCode string, hold Hold) (Reservation, error) {
	res, err := s.reserveStandard(ctx, req)
	if err == nil {
		return res, nil
	}
	if IsOutcomeUnknown(err) {
		s.mu.Lock()
		s.unsettled[orderKey{gateCode, req.OrderID}] = unsettledWrite{hold: hold, since: s.cfg.Clock()}
		s.mu.Unlock()
		s.log.WarnContext(ctx, "durable write outcome unknown; use kept in the gate until settled", "code", req.Code, "orderId", req.OrderID, "err", err)
		return Reservation{}, err
	}
	s.giveBack(ctx, gateCode, hold, ModeFlashSync, err)
	return Reservation{}, err
}

// giveBack undoes what the gate did for hold after its durable write
// provably failed: a use taken goes back (compensate); a use taken over
// from hold.Replaces goes back to that order (Gate.Unreplace), so the
// customer keeps the hold they had.
func (s *Service) giveBack(ctx context.Context, code string, hold Hold, mode Mode, cause error) {
	if hold.Replaces == "" {
		s.compensate(ctx, code, hold.OrderID, mode, cause)
		return
	}
	s.obs.Compensated(mode)
	cctx, cancel := s.writeContext(ctx)
	defer cancel()
	if _, err := s.gate.Unreplace(cctx, code, hold.OrderID, hold.Replaces); err != nil {
		// The gate counts the use for the new order, which no row backs,
		// while the store keeps the replaced one: undersell, repaired by
		// reconciliation.
		s.log.ErrorContext(ctx, "could not undo a replacement in the gate", "code", code, "orderId", hold.OrderID,
			"replaces", hold.Replaces, "cause", cause, "err", err)
		return
	}
	s.log.WarnContext(ctx, "durable write of a replacement failed; the replaced hold stands again", "code", code,
		"orderId", hold.OrderID, "replaces", hold.Replaces, "mode", mode, "cause", cause)
}

// gateDown answers a flash reservation the gate could not decide (gateErr)
// from the orderId's row, so that a retry of an order an earlier attempt
// took is not told that nothing was taken: the row's reservation (a
// replay), ORDER_RELEASED or ORDER_CONFLICT when the store has one. Without
// a row the answer is gateErr, marked OutcomeUnknown in Kafka mode while
// the consumer has not caught up (the order's event may be on its way).
// gateCode is the code the gate keeps req's holds under.
func (s *Service) gateDown(ctx context.Context, req ReserveRequest, gateCode string, gateErr error) (Reservation, error) {
	row, err := s.store.Redemption(ctx, req.Code, req.OrderID)
	switch {
	case err == nil && row.CustomerID != req.CustomerID:
		return Reservation{}, orderConflict(req.Code, req.OrderID, "")
	case err == nil && row.Status == StatusReleased:
		return Reservation{}, orderReleased(req.OrderID)
	case err == nil:
		return Reservation{Redemption: row, Replay: true}, nil
	case IsCode(err, CodeReservationNotFound) && s.cfg.FlashWrites == FlashKafka:
		if s.cfg.Events.CaughtUp(ctx) != nil {
			return Reservation{}, outcomeUnknown(gateErr, req.OrderID)
		}
	}
	s.mu.Lock()
	_, unsettled := s.unsettled[orderKey{gateCode, req.OrderID}]
	s.mu.Unlock()
	if unsettled {
		// This instance's write of the order ended with an unknown outcome
		// and has not been settled: the gate still holds its use.
		return Reservation{}, outcomeUnknown(gateErr, req.OrderID)
	}
	return Reservation{}, gateErr
}

// settled drops orderID, whose hold the gate keeps under code, from the
// unsettled orders: a retry got an answer from the store.
func (s *Service) settled(code, orderID string) {
	s.mu.Lock()
	delete(s.unsettled, orderKey{code, orderID})
	s.mu.Unlock()
}

// compensate gives the use orderID took in the gate back after its durable
// write provably failed, forgetting the orderId there (mode and cause are
// for the log and metrics).
func (s *Service) compensate(ctx context.Context, code, orderID string, mode Mode, cause error) {
	s.obs.Compensated(mode)
	cctx, cancel := s.writeContext(ctx)
	defer cancel()
	if _, err := s.gate.Release(cctx, code, orderID, ReleaseForget); err != nil {
		// The gate keeps a use that no row backs: undersell, repaired by
		// reconciliation after its grace period.
		s.log.ErrorContext(ctx, "could not give a use back to the gate", "code", code, "orderId", orderID, "cause", cause, "err", err)
		return
	}
	s.log.WarnContext(ctx, "durable write failed; use given back to the gate", "code", code, "orderId", orderID, "mode", mode, "cause", cause)
}
