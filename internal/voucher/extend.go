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
		return Redemption{}, reservationNotFound(code, orderID)
	}
	if d < time.Second || d > MaxExtension {
		return Redemption{}, Errorf(CodeInvalidRequest, "seconds must be between 1 and %d", int64(MaxExtension/time.Second))
	}
	if err := s.notPartOfStack(ctx, orderID); err != nil {
		return Redemption{}, err
	}
	now := s.now()
	// The gate keeps milliseconds; extend to a time it can hold exactly.
	until := now.Add(d).Truncate(time.Millisecond)
	rt := s.routeKnown(ctx, code)
	return rt.path.extend(ctx, rt, orderID, until, now)
}
