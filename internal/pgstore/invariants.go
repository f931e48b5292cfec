package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Querier runs a query: a *pgx.Conn, a *pgxpool.Pool or a pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Violation is one breach of the invariants of the stored counters.
type Violation struct {
	// Kind is oversell, used_count, customer usage, per-user limit, code
	// reuse, code campaign or customer_id (queries/invariants.sql).
	Kind    string
	Voucher string
	Message string
}

// Violations checks the invariants every writer must keep, on the stored
// state of the vouchers codes (every voucher when none): no voucher holds
// more redemptions than its total limit, its used_count counts its held
// redemptions, each customer counter counts that customer's held
// redemptions, no customer holds more than the per-user limit, and each
// campaign code is held at most once, by a redemption of its campaign. It is
// the one check the store's tests, the stack tests, `voucherd bench
// --verify` and the fault suite run; it returns the breaches, none when the
// state is consistent.
func Violations(ctx context.Context, q Querier, codes ...string) ([]Violation, error) {
	var arg []string
	if len(codes) > 0 {
		arg = codes
	}
	rows, err := q.Query(ctx, qInvariants, arg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: check invariants: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Violation])
	if err != nil {
		return nil, fmt.Errorf("pgstore: check invariants: %w", err)
	}
	return out, nil
}
