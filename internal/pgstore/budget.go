package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/voucherd/voucherd/internal/voucher"
)

var (
	qVoucherBudget       = mustQuery("voucher_budget")
	qVoucherBudgetInsert = mustQuery("voucher_budget_insert")
	qVoucherBudgetLock   = mustQuery("voucher_budget_lock")
	qVoucherBudgetUpdate = mustQuery("voucher_budget_update")
)

// rowQuerier is what the budget reads run on: the pool or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readBudget fills v.Budget from its counter row; a voucher without one
// keeps the zero Budget.
func readBudget(ctx context.Context, q rowQuerier, v *voucher.Voucher) error {
	b := &v.Budget
	err := q.QueryRow(ctx, qVoucherBudget, v.Code).Scan(&b.Amount, &b.Held, &b.Clip, &b.Reserved, &b.Confirmed)
	if errors.Is(err, pgx.ErrNoRows) {
		*b = voucher.Budget{}
		return nil
	}
	return err
}

// insertBudget writes the money budget of voucher code, created in tx.
func insertBudget(ctx context.Context, tx pgx.Tx, code string, b voucher.Budget) error {
	if b.Amount == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, qVoucherBudgetInsert, code, b.Amount, b.Clip)
	return err
}

// lockBudget locks the counter of voucher code's money budget, before the
// voucher row (the lock order of reservations), when p changes it, and
// returns what is held and whether the voucher has a budget.
func lockBudget(ctx context.Context, tx pgx.Tx, code string, p voucher.Patch) (held int64, has bool, err error) {
	if p.BudgetAmount == nil {
		return 0, false, nil
	}
	err = tx.QueryRow(ctx, qVoucherBudgetLock, code).Scan(&held)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return held, err == nil, err
}

// patchBudget writes the new budget amount of a patch: refused with
// CodeLimitBelowHeld below held (the counter locked by lockBudget), and
// with CodeBudgetNotSet for a voucher without a budget.
func patchBudget(ctx context.Context, tx pgx.Tx, code string, p voucher.Patch, held int64, has bool) error {
	switch {
	case p.BudgetAmount == nil:
		return nil
	case !has:
		return voucher.Errorf(voucher.CodeBudgetNotSet,
			"voucher %s has no budget; a budgetAmount is set when a voucher is created", code)
	case *p.BudgetAmount < held:
		e := voucher.Errorf(voucher.CodeLimitBelowHeld,
			"budgetAmount %d is below the %d of discounts held of voucher %s", *p.BudgetAmount, held, code)
		e.Limit = voucher.LimitBudget
		return e
	}
	_, err := tx.Exec(ctx, qVoucherBudgetUpdate, code, *p.BudgetAmount)
	return err
}
