package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Order returns the redemption of orderID whatever its voucher;
// CodeReservationNotFound when the orderId is unknown. Concurrent calls share
// one statement (orderreads.go).
func (s *Store) Order(ctx context.Context, orderID string) (voucher.Redemption, error) {
	r, found, err := s.lookup(ctx, orderID)
	switch {
	case err != nil:
		return voucher.Redemption{}, err
	case !found:
		return voucher.Redemption{}, voucher.Errorf(voucher.CodeReservationNotFound, "order %s not found", orderID)
	}
	return r, nil
}

var qVoucherReleasedCount = mustQuery("voucher_released_count")

// ReleasedCount returns how many redemptions of code are RELEASED.
func (s *Store) ReleasedCount(ctx context.Context, code string) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, qVoucherReleasedCount, code).Scan(&n); err != nil {
		return 0, interpretError(err)
	}
	return n, nil
}

var qAbandonOrder = mustQuery("abandon_order")

// AbandonOrder fences a gate hold of code whose write has not reached the
// database (a Kafka event not applied yet, a flash-sync write of unknown
// outcome or of a dead instance): it inserts a RELEASED row for h.OrderID,
// which takes no use, unless the orderId has a row already. It returns the
// orderId's row and whether this call inserted it. A write of the order
// that arrives later meets the row and changes nothing.
// CodeUnavailable, with nothing decided, when a row committed concurrently
// could not be read.
func (s *Store) AbandonOrder(ctx context.Context, code string, h voucher.Hold, now time.Time) (voucher.Redemption, bool, error) {
	var r voucher.Redemption
	var inserted bool
	err := s.rerunRolledBack(ctx, func() error {
		return scanRedemption(s.pool.QueryRow(ctx, qAbandonOrder, h.OrderID, code, h.CustomerID, h.OrderAmount,
			h.DiscountAmount, h.ReservedAt, h.ExpiresAt, now, h.Code), &r, &inserted)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return voucher.Redemption{}, false, voucher.Unavailable(nil, "order %s: a row appeared while it was being fenced; try again", h.OrderID)
	}
	if err != nil {
		return voucher.Redemption{}, false, interpretError(err)
	}
	return r, inserted, nil
}
