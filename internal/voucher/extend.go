package voucher

import (
	"context"
	"time"
)

// Hold extension: an order service whose customer is still paying
// may push a RESERVED hold's expiry forward, up to a maximum total hold time
// counted from the reservation.

// DefaultMaxHold is the default of ServiceConfig.MaxHold.
const DefaultMaxHold = time.Hour

// MaxExtension bounds the duration one extension asks for; the hold is
// capped at MaxHold anyway, this only keeps the arithmetic in range.
const MaxExtension = 366 * 24 * time.Hour

// Extend moves the expiry of a RESERVED hold to now + d, never earlier than
// it already is and never later than its reservation time plus MaxHold. The
// result depends only on when the last call ran, not on how many ran, so a
// retried request does not add up: it moves the expiry only by the time
// between the two calls (and not at all once at the maximum). The answer's
// ExpiresAt says how far it got.
//
// A hold already past its expiry is released (as Confirm does) and answered
// RESERVATION_RELEASED, as is a released one; a confirmed one is
// RESERVATION_CONFIRMED. The store decides under the redemption's row lock,
// which the expiry sweep takes too, so an extension racing the sweep ends
// either extended (and the sweep skips the row) or released (and the
// extension says so).
//
// In Kafka mode a reservation the consumer has not written yet is applied
// first, as confirm and release do. For flash vouchers the gate's copy of
// the hold gets the new expiry too, so that a replay answers with it.
func (s *Service) Extend(ctx context.Context, code, orderID string, d time.Duration) (Redemption, error) {
	if !ValidCode(code) || !ValidOrderID(orderID) {
		return Redemption{}, Errorf(CodeReservationNotFound, "reservation %q of voucher %q not found", orderID, code)
	}
	if d < time.Second || d > MaxExtension {
		return Redemption{}, Errorf(CodeInvalidRequest, "seconds must be between 1 and %d", int64(MaxExtension/time.Second))
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	now := s.cfg.Clock()
	// The gate keeps milliseconds; extend to a time it can hold exactly.
	until := now.Add(d).Truncate(time.Millisecond)
	r, err := s.store.Extend(wctx, code, orderID, until, now, s.cfg.MaxHold)
	if err != nil && IsCode(err, CodeReservationNotFound) {
		if applied, aerr := s.applyFromGate(wctx, code, orderID); aerr != nil {
			return Redemption{}, aerr
		} else if applied {
			r, err = s.store.Extend(wctx, code, orderID, until, now, s.cfg.MaxHold)
		}
	}
	if err != nil {
		if IsCode(err, CodeReservationReleased) {
			// Extend may have found it expired and released it: return the
			// use to the gate too (a no-op when it was released before).
			s.releaseInGate(wctx, code, orderID)
		}
		return Redemption{}, err
	}
	s.extendInGate(wctx, code, orderID, r.ExpiresAt)
	return r, nil
}

// extendInGate records a new expiry in the gate's copy of a flash hold.
func (s *Service) extendInGate(ctx context.Context, code, orderID string, expiresAt time.Time) {
	gateCode, _, ok := s.flashGate(ctx, code)
	if !ok {
		return
	}
	if _, err := s.gate.Extend(ctx, gateCode, orderID, expiresAt); err != nil {
		// The store is right; only a replay's expiresAt is stale, and the
		// hold leaves the gate with the store's release all the same.
		s.log.WarnContext(ctx, "extended in the database but not in the gate; replays answer the old expiresAt",
			"code", code, "orderId", orderID, "err", err)
	}
}
