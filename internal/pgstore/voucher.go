package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/voucherd/voucherd/internal/voucher"
)

// scanVoucher scans the seventeen voucher columns of the queries, then extra.
func scanVoucher(row pgx.Row, v *voucher.Voucher, extra ...any) error {
	dest := append([]any{
		&v.Code, &v.DiscountAmount, &v.MinOrderAmount, &v.TotalLimit, &v.PerUserLimit,
		&v.StartsAt, &v.EndsAt, &v.FlashSale, &v.UsedCount, &v.CreatedAt, &v.UpdatedAt, &v.Disabled,
		&v.DiscountPercentBP, &v.MaxDiscountAmount,
		&v.CustomerIDNormalization, &v.Currency, &v.CustomerID,
	}, extra...)
	if err := row.Scan(dest...); err != nil {
		return err
	}
	v.StartsAt, v.EndsAt = v.StartsAt.UTC(), v.EndsAt.UTC()
	v.CreatedAt, v.UpdatedAt = v.CreatedAt.UTC(), v.UpdatedAt.UTC()
	return nil
}

// scanVoucherCounts scans a voucher and its live counts.
func scanVoucherCounts(row pgx.Row, v *voucher.Voucher) error {
	return scanVoucher(row, v, &v.Reserved, &v.Confirmed)
}

// scanVoucherGet scans voucher_get's columns: the voucher, its live counts,
// its campaign flag, its money budget, its windows and its stacking setting.
func scanVoucherGet(row pgx.Row, v *voucher.Voucher) error {
	b := &v.Budget
	var w windowColumns
	if err := scanVoucher(row, v, &v.Reserved, &v.Confirmed, &v.Campaign,
		&b.Amount, &b.Held, &b.Clip, &b.Reserved, &b.Confirmed, &w.schedule, &v.WindowLimit, &w.start, &w.held,
		&v.Stacking.Stackable, &v.Stacking.ExclusiveGroup); err != nil {
		return err
	}
	return w.fill(v)
}

func voucherNotFound(code string) error {
	return voucher.Reject(voucher.CodeVoucherNotFound, "", voucher.Facts{Voucher: code})
}

// CreateVoucher inserts v (used_count 0, timestamps set by the database)
// and its audit entry in one transaction; CodeVoucherExists when the code is
// taken. The API creates active vouchers only; v.Disabled is stored as
// given.
func (s *Store) CreateVoucher(ctx context.Context, v voucher.Voucher) (voucher.Voucher, error) {
	if err := v.Validate(); err != nil {
		return voucher.Voucher{}, err
	}
	var out voucher.Voucher
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := scanVoucherCounts(tx.QueryRow(ctx, qVoucherInsert,
			v.Code, v.DiscountAmount, v.MinOrderAmount, v.TotalLimit, v.PerUserLimit,
			v.StartsAt, v.EndsAt, v.FlashSale, v.Disabled, v.DiscountPercentBP, v.MaxDiscountAmount,
			normalization(v.CustomerIDNormalization), v.Currency, v.CustomerID), &out); err != nil {
			return err
		}
		if err := insertBudget(ctx, tx, out.Code, v.Budget); err != nil {
			return err
		}
		out.Budget = voucher.Budget{Amount: v.Budget.Amount, Clip: v.Budget.Clip}
		if err := insertWindows(ctx, tx, v); err != nil {
			return err
		}
		out.Schedule, out.WindowLimit = v.Schedule, v.WindowLimit
		if v.Stacking.Stackable {
			if err := writeStacking(ctx, tx, out.Code, v.Stacking); err != nil {
				return err
			}
		}
		out.Stacking = v.Stacking
		return recordAudit(ctx, tx, out.Code, voucher.AuditCreate, voucher.ActorOf(ctx), nil, voucher.AuditFields(out))
	})
	if err != nil {
		if code, pgErr := pgCode(err); code == sqlstateUniqueViolation && pgErr.ConstraintName == "voucher_pkey" {
			return voucher.Voucher{}, voucher.Errorf(voucher.CodeVoucherExists, "voucher %s already exists", v.Code)
		}
		return voucher.Voucher{}, interpretError(err)
	}
	return out, nil
}

// Voucher returns a voucher with live Reserved and Confirmed counts.
func (s *Store) Voucher(ctx context.Context, code string) (voucher.Voucher, error) {
	var v voucher.Voucher
	if err := scanVoucherGet(s.pool.QueryRow(ctx, qVoucherGet, code), &v); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return voucher.Voucher{}, voucherNotFound(code)
		}
		return voucher.Voucher{}, interpretError(err)
	}
	return v, nil
}

// VoucherDefinition returns the voucher as Voucher does, but without the
// live counts (Reserved, Confirmed, and the budget's Reserved and Confirmed
// are 0): one statement reading one row of each table it joins, whatever
// the voucher's size (voucher_definition.sql).
func (s *Store) VoucherDefinition(ctx context.Context, code string) (voucher.Voucher, error) {
	var v voucher.Voucher
	if err := scanVoucherGet(s.pool.QueryRow(ctx, qVoucherDefinition, code), &v); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return voucher.Voucher{}, voucherNotFound(code)
		}
		return voucher.Voucher{}, interpretError(err)
	}
	return v, nil
}

// PatchVoucher applies p in one transaction under the voucher's row lock and
// returns the voucher before and after; the change's audit entry is
// written in the same transaction. A total limit below used_count, or a
// per-user limit below the largest count a customer holds, is refused with
// CodeLimitBelowHeld. Reservations keep running meanwhile: they wait for the
// row lock only at their last step and then see the new limits.
func (s *Store) PatchVoucher(ctx context.Context, code string, p voucher.Patch) (before, after voucher.Voucher, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		budgetHeld, hasBudget, err := lockBudget(ctx, tx, code, p)
		if err != nil {
			return err
		}
		windowsHeld, err := lockWindows(ctx, tx, code, p)
		if err != nil {
			return err
		}
		if err := scanVoucherCounts(tx.QueryRow(ctx, qVoucherLock, code), &before); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return voucherNotFound(code)
			}
			return err
		}
		if err := readBudget(ctx, tx, &before); err != nil {
			return err
		}
		if err := readWindows(ctx, tx, &before); err != nil {
			return err
		}
		if err := readStacking(ctx, tx, &before); err != nil {
			return err
		}
		if p.Empty() {
			after = before
			return nil
		}
		next, err := p.Apply(before)
		if err != nil {
			return err
		}
		if next.TotalLimit < before.UsedCount {
			e := voucher.Errorf(voucher.CodeLimitBelowHeld,
				"totalLimit %d is below the %d uses held of voucher %s", next.TotalLimit, before.UsedCount, code)
			e.Limit = voucher.LimitTotal
			return e
		}
		if next.PerUserLimit < before.PerUserLimit {
			var customer string
			var held int32
			err := tx.QueryRow(ctx, qVoucherMaxHeld, code).Scan(&customer, &held)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return err
			case next.PerUserLimit < held:
				e := voucher.Errorf(voucher.CodeLimitBelowHeld,
					"perUserLimit %d is below the %d uses customer %s holds of voucher %s",
					next.PerUserLimit, held, customer, code)
				e.Limit = voucher.LimitPerUser
				return e
			}
		}
		if err := scanVoucher(tx.QueryRow(ctx, qVoucherUpdate, code,
			next.DiscountAmount, next.MinOrderAmount, next.TotalLimit, next.PerUserLimit,
			next.StartsAt, next.EndsAt, next.FlashSale, next.Disabled, next.DiscountPercentBP, next.MaxDiscountAmount), &after); err != nil {
			return err
		}
		if err := patchBudget(ctx, tx, code, p, budgetHeld, hasBudget); err != nil {
			return err
		}
		if err := patchWindows(ctx, tx, next, p, windowsHeld); err != nil {
			return err
		}
		after.Schedule, after.WindowLimit, after.LatestWindow = next.Schedule, next.WindowLimit, before.LatestWindow
		if p.Stacking != nil {
			if err := writeStacking(ctx, tx, code, next.Stacking); err != nil {
				return err
			}
		}
		after.Stacking = next.Stacking
		// A patch changes no redemption: the counts read under the lock
		// describe both versions.
		after.Reserved, after.Confirmed = before.Reserved, before.Confirmed
		after.Budget = before.Budget
		after.Budget.Amount = next.Budget.Amount
		return recordAudit(ctx, tx, code, voucher.PatchAction(p), voucher.ActorOf(ctx),
			voucher.AuditFields(before), voucher.AuditFields(after))
	})
	if err != nil {
		return voucher.Voucher{}, voucher.Voucher{}, interpretError(err)
	}
	return before, after, nil
}

// FlashVouchers lists, sorted, the codes of flash vouchers whose window has
// not ended before since.
func (s *Store) FlashVouchers(ctx context.Context, since time.Time) ([]string, error) {
	rows, err := s.pool.Query(ctx, qFlashVouchers, since)
	if err != nil {
		return nil, interpretError(err)
	}
	codes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, interpretError(err)
	}
	return codes, nil
}

// GateSnapshot reads, in one REPEATABLE READ read-only transaction, the
// voucher and all its redemptions; Held and Customers count the held
// redemptions (not used_count: in Kafka mode the row lags the events).
func (s *Store) GateSnapshot(ctx context.Context, code string) (voucher.Snapshot, error) {
	var snap voucher.Snapshot
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			if err := scanVoucherGet(tx.QueryRow(ctx, qVoucherGet, code), &snap.Voucher); err != nil {
				if errors.Is(err, pgx.ErrNoRows) {
					return voucherNotFound(code)
				}
				return err
			}
			rows, err := tx.Query(ctx, qRedemptionsOfVoucher, code)
			if err != nil {
				return err
			}
			orders, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.Redemption, error) {
				var r voucher.Redemption
				var since, window *time.Time
				err := scanRedemption(row, &r, &since, &window)
				r.HeldSince = heldSince(since)
				if window != nil {
					r.Window = window.UTC()
				}
				return r, err
			})
			if err != nil {
				return err
			}
			snap.Orders = orders
			return nil
		})
	if err != nil {
		return voucher.Snapshot{}, interpretError(err)
	}
	snap.Customers = make(map[string]int32)
	for _, r := range snap.Orders {
		if r.Status.Held() {
			snap.Held++
			snap.Customers[r.CustomerID]++
		}
	}
	return snap, nil
}

// normalization is n as stored: the zero value is "none".
func normalization(n voucher.CustomerIDNormalization) string {
	if n == "" {
		return string(voucher.NormalizeNone)
	}
	return string(n)
}
