package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Extend moves the expiry of a RESERVED redemption to until, never earlier
// than it is and never later than its creation plus maxHold
// (voucherd_extend, under the row lock the expiry sweep takes). A RESERVED
// one whose expiry is at or before now is released right here, its use given
// back, and answered CodeReservationReleased, as is a released one; a
// CONFIRMED one is CodeReservationConfirmed.
func (s *Store) Extend(ctx context.Context, code, orderID string, until, now time.Time, maxHold time.Duration) (voucher.Redemption, error) {
	if maxHold <= 0 {
		return voucher.Redemption{}, voucher.Errorf(voucher.CodeInvalidRequest, "maximum hold must be positive, got %s", maxHold)
	}
	var r voucher.Redemption
	var expired bool
	err := s.rerunRolledBack(ctx, func() error {
		return scanRedemption(s.pool.QueryRow(ctx, qExtend, code, orderID, now, until,
			pgtype.Interval{Microseconds: maxHold.Microseconds(), Valid: true}), &r, &expired)
	})
	if err != nil {
		return voucher.Redemption{}, interpretError(err)
	}
	switch {
	case expired:
		return voucher.Redemption{}, voucher.Errorf(voucher.CodeReservationReleased,
			"reservation %s of voucher %s expired at %s and was released", orderID, code, r.ExpiresAt.Format(time.RFC3339))
	case r.Status == voucher.StatusReleased:
		return voucher.Redemption{}, voucher.Errorf(voucher.CodeReservationReleased,
			"reservation %s of voucher %s was released", orderID, code)
	case r.Status == voucher.StatusConfirmed:
		return voucher.Redemption{}, voucher.Errorf(voucher.CodeReservationConfirmed,
			"reservation %s of voucher %s is confirmed; a confirmed use does not expire", orderID, code)
	}
	return r, nil
}

// Holds reads what holds a voucher's uses: its total limit, used_count and
// the expiry of its RESERVED redemption that expires first (one index
// probe).
func (s *Store) Holds(ctx context.Context, code string) (voucher.HoldSummary, error) {
	var h voucher.HoldSummary
	var earliest *time.Time
	if err := s.pool.QueryRow(ctx, qVoucherHolds, code).Scan(&h.TotalLimit, &h.UsedCount, &earliest); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return voucher.HoldSummary{}, voucherNotFound(code)
		}
		return voucher.HoldSummary{}, interpretError(err)
	}
	if earliest != nil {
		h.EarliestExpiry = earliest.UTC()
	}
	return h, nil
}
