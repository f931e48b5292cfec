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

var (
	qAbandonOrder    = mustQuery("abandon_order")
	qLockOrder       = mustQuery("lock_order")
	qReleaseReplaced = mustQuery("release_replaced")
)

// AbandonOrder fences a gate hold of code whose write has not reached the
// database (a Kafka event not applied yet, a flash-sync write of unknown
// outcome or of a dead instance): it inserts a RELEASED row for h.OrderID,
// which takes no use, unless the orderId has a row already. It returns the
// orderId's row and whether this call inserted it. A write of the order
// that arrives later meets the row and changes nothing.
// CodeUnavailable, with nothing decided, when a row committed concurrently
// could not be read.
//
// A replacement's hold (h.Replaces) took its use over from the replaced
// order, which the gate has marked released and answered as such since;
// the fence then also releases the replaced order when it is still the
// customer's RESERVED hold (the replacement made, the new order released),
// in the same transaction, so that the store agrees with the gate once the
// gate gives the new order's use back.
func (s *Store) AbandonOrder(ctx context.Context, code string, h voucher.Hold, now time.Time) (voucher.Redemption, bool, error) {
	var r voucher.Redemption
	var inserted bool
	abandon := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) error {
		return scanRedemption(q.QueryRow(ctx, qAbandonOrder, h.OrderID, code, h.CustomerID, h.OrderAmount,
			h.DiscountAmount, h.ReservedAt, h.ExpiresAt, now, h.Code), &r, &inserted)
	}
	err := s.rerunRolledBack(ctx, func() error {
		if h.Replaces == "" {
			return abandon(s.pool)
		}
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, qLockOrder, h.Replaces); err != nil {
				return err
			}
			if err := abandon(tx); err != nil || !inserted {
				return err
			}
			_, err := tx.Exec(ctx, qReleaseReplaced, h.Replaces, code, h.CustomerID, now)
			return err
		})
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return voucher.Redemption{}, false, voucher.Unavailable(nil, "order %s: a row appeared while it was being fenced; try again", h.OrderID)
	}
	if err != nil {
		return voucher.Redemption{}, false, interpretError(err)
	}
	return r, inserted, nil
}
