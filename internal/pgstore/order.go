package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/voucherd/voucherd/internal/voucher"
)

var qOrderGet = mustQuery("order_get")

// Order returns the redemption of orderID whatever its voucher;
// CodeReservationNotFound when the orderId is unknown.
func (s *Store) Order(ctx context.Context, orderID string) (voucher.Redemption, error) {
	var r voucher.Redemption
	if err := scanRedemption(s.pool.QueryRow(ctx, qOrderGet, orderID), &r); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return voucher.Redemption{}, voucher.Errorf(voucher.CodeReservationNotFound, "order %s not found", orderID)
		}
		return voucher.Redemption{}, interpretError(err)
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
