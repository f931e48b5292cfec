package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/voucherd/voucherd/internal/voucher"
)

// sqlstateLockNotAvailable is lock_not_available: a NOWAIT lock found the
// row locked.
const sqlstateLockNotAvailable = "55P03"

var (
	qReconcileCounts    = mustQuery("reconcile_counts")
	qReconcileStamp     = mustQuery("reconcile_stamp")
	qReconcileMarker    = mustQuery("reconcile_marker")
	qRedemptionsAmong   = mustQuery("redemptions_among")
	qHeldPage           = mustQuery("held_page")
	errHeldPageStatus   = errors.New("pgstore: a held page is of RESERVED or CONFIRMED rows")
	errHeldPageLimit    = errors.New("pgstore: a held page holds at least one row")
	errReconcileWindows = errors.New("pgstore: occurrence starts and counts differ in length")
)

// ReconcileCounts reads a voucher's total limit, used_count and limit
// counters in one statement (reconcile_counts.sql: primary-key reads of
// the voucher row and its limit rows, none of its redemptions).
func (s *Store) ReconcileCounts(ctx context.Context, code string) (voucher.StoreCounts, error) {
	var c voucher.StoreCounts
	var starts []time.Time
	var held []int64
	err := s.pool.QueryRow(ctx, qReconcileCounts, code).Scan(&c.TotalLimit, &c.Held, &c.BudgetAmount, &c.BudgetHeld, &starts, &held)
	if errors.Is(err, pgx.ErrNoRows) {
		return voucher.StoreCounts{}, voucherNotFound(code)
	}
	if err != nil {
		return voucher.StoreCounts{}, interpretError(err)
	}
	if len(starts) != len(held) {
		return voucher.StoreCounts{}, errReconcileWindows
	}

	for i, w := range starts {
		if c.Windows == nil {
			c.Windows = make(map[time.Time]int64, len(starts))
		}
		c.Windows[w.UTC()] = held[i]
	}
	return c, nil
}

// StampCounters takes the stamp of a voucher's counter rows
// (reconcile_stamp.sql: a lock of the voucher row taken only if free,
// released at once); "" when the row is locked or gone.
func (s *Store) StampCounters(ctx context.Context, code string) (string, error) {
	var stamp string
	err := s.pool.QueryRow(ctx, qReconcileStamp, code).Scan(&stamp)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == sqlstateLockNotAvailable, errors.Is(err, pgx.ErrNoRows):
		return "", nil
	case err != nil:
		return "", interpretError(err)
	}
	return stamp, nil
}

// CountersMarker reads the marker of a voucher's counter rows
// (reconcile_marker.sql); "" when the voucher is gone.
func (s *Store) CountersMarker(ctx context.Context, code string) (string, error) {
	var marker string
	err := s.pool.QueryRow(ctx, qReconcileMarker, code).Scan(&marker)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", interpretError(err)
	}
	return marker, nil
}

// RedemptionsAmong returns the redemptions of code among orderIDs
// (redemptions_among.sql, one statement).
func (s *Store) RedemptionsAmong(ctx context.Context, code string, orderIDs []string) ([]voucher.Redemption, error) {
	if len(orderIDs) == 0 {
		return nil, nil
	}
	return s.redemptionRows(ctx, qRedemptionsAmong, code, orderIDs)
}

// HeldPage returns up to limit redemptions of code in status st after the
// key after, in (created_at, order_id) order (held_page.sql, a range of
// one index).
func (s *Store) HeldPage(ctx context.Context, code string, st voucher.Status, after voucher.PageKey, limit int) ([]voucher.Redemption, error) {
	if !st.Held() {
		return nil, errHeldPageStatus
	}
	if limit <= 0 {
		return nil, errHeldPageLimit
	}
	return s.redemptionRows(ctx, qHeldPage, code, string(st), after.CreatedAt, after.OrderID, limit)
}

// redemptionRows runs a query answering redemptions_of_voucher's columns.
func (s *Store) redemptionRows(ctx context.Context, q string, args ...any) ([]voucher.Redemption, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, scanRedemptionRow)
	if err != nil {
		return nil, interpretError(err)
	}
	return out, nil
}

// scanRedemptionRow reads one row of redemptions_of_voucher's columns.
func scanRedemptionRow(row pgx.CollectableRow) (voucher.Redemption, error) {
	var r voucher.Redemption
	var since, window *time.Time
	err := scanRedemption(row, &r, &since, &window)
	r.HeldSince = heldSince(since)
	if window != nil {
		r.Window = window.UTC()
	}
	return r, err
}
