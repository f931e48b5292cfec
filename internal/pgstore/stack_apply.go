package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/voucherd/voucherd/internal/voucher"
)

// errStackNotApplied rolls back a stack event's transaction whose result
// is decided (Rejected or AlreadyApplied) without an error of the
// database.
var errStackNotApplied = errors.New("stack event not applied")

// applyStack applies the event of a stack (e.Members) in one transaction:
// the stack's codes are locked in code order as ReserveStack locks them,
// the orderId is claimed in voucher_stack, every member's redemption is
// written with the gate's discount by voucherd_apply_reserved_codes (one
// statement, the single events' function), and the members are recorded.
// All members are written or none: a member the database refuses, or whose
// orderId it knows already (a fenced member: its RELEASED row), rolls
// everything back and the event is Rejected. A stack the store has already
// with the same codes and customer is AlreadyApplied (a redelivery changes
// nothing); another is Rejected as an order conflict. An event that
// replaces an order (ReplacesOrderID) releases it in the same transaction,
// before the members are written (releaseReplacedEvent).
func (s *Store) applyStack(ctx context.Context, e voucher.ReservedEvent) (voucher.ApplyResult, error) {
	var out voucher.ApplyResult
	err := s.rerunRolledBack(ctx, func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			out, err = applyStackTx(ctx, tx, e)
			if err == nil && out.Outcome != voucher.Applied {
				return errStackNotApplied
			}
			return err
		})
	})
	switch {
	case errors.Is(err, errStackNotApplied):
		return out, nil
	case err != nil:
		if reason, refused := refusal(err, e); refused {
			// refusal names the event's own code; any member may be the one.
			return voucher.ApplyResult{Outcome: voucher.Rejected, Reason: "stack of " + strings.Join(stackCodes(e), ",") + ": " + reason}, nil
		}
		return voucher.ApplyResult{}, interpretError(err)
	}
	return out, nil
}

func applyStackTx(ctx context.Context, tx pgx.Tx, e voucher.ReservedEvent) (voucher.ApplyResult, error) {
	n := len(e.Members)
	var (
		codes      = make([]string, n)
		orderIDs   = make([]string, n)
		customers  = make([]string, n)
		amounts    = make([]int64, n)
		discounts  = make([]int64, n)
		reservedAt = make([]time.Time, n)
		expiresAt  = make([]time.Time, n)
		campaign   = make([]string, n)
		windows    = make([]*time.Time, n)
	)
	for i, m := range e.Members {
		codes[i], orderIDs[i], customers[i] = m.Code, m.OrderID, m.CustomerID
		amounts[i], discounts[i] = m.OrderAmount, m.DiscountAmount
		reservedAt[i], expiresAt[i] = e.ReservedAt, e.ExpiresAt
		windows[i] = windowArg(m.Window)
	}
	sorted := slices.Clone(codes)
	var replaced *voucher.Stack
	if e.ReplacesOrderID != "" {
		// A replaced stack's codes are locked with the new ones, as
		// ReserveStack locks them.
		old, err := readStack(ctx, tx, e.ReplacesOrderID)
		switch {
		case err == nil:
			replaced = &old
			for _, it := range old.Items {
				if !slices.Contains(sorted, it.Code) {
					sorted = append(sorted, it.Code)
				}
			}
		case !voucher.IsCode(err, voucher.CodeReservationNotFound):
			return voucher.ApplyResult{}, err
		}
	}
	slices.Sort(sorted)
	if _, err := tx.Exec(ctx, qStackLock, sorted); err != nil {
		return voucher.ApplyResult{}, err
	}
	var claimed string
	err := tx.QueryRow(ctx, qStackInsert, e.OrderID, e.StackCustomerID, e.OrderAmount, codes, e.ReservedAt).Scan(&claimed)
	if errors.Is(err, pgx.ErrNoRows) {
		st, err := readStack(ctx, tx, e.OrderID)
		if err != nil {
			return voucher.ApplyResult{}, err
		}
		have := make([]string, len(st.Items))
		for i, it := range st.Items {
			have[i] = it.Code
		}
		if st.CustomerID != e.StackCustomerID || !slices.Equal(have, codes) {
			return voucher.ApplyResult{Outcome: voucher.Rejected, Reason: fmt.Sprintf(
				"order_conflict: stack %s holds codes %v of customer %s", e.OrderID, have, st.CustomerID)}, nil
		}
		return voucher.ApplyResult{Outcome: voucher.AlreadyApplied}, nil
	}
	if err != nil {
		return voucher.ApplyResult{}, err
	}
	if e.ReplacesOrderID != "" {
		if err := releaseReplacedEvent(ctx, tx, e, replaced); err != nil {
			return voucher.ApplyResult{}, err
		}
	}
	rows, err := tx.Query(ctx, qApplyReserved, orderIDs, codes, customers, amounts, discounts, reservedAt, expiresAt, campaign, windows)
	if err != nil {
		return voucher.ApplyResult{}, err
	}
	inserted := make(map[string]bool, n)
	var (
		orderID, code, customer string
		ins                     bool
	)
	if _, err := pgx.ForEachRow(rows, []any{&orderID, &ins, &code, &customer}, func() error {
		inserted[orderID] = ins
		return nil
	}); err != nil {
		return voucher.ApplyResult{}, err
	}
	for _, m := range e.Members {
		if !inserted[m.OrderID] {
			return voucher.ApplyResult{Outcome: voucher.Rejected, Reason: fmt.Sprintf(
				"order_conflict: member %s of stack %s (voucher %s) is known already", m.OrderID, e.OrderID, m.Code)}, nil
		}
	}
	if _, err := tx.Exec(ctx, qStackMemberInsert, e.OrderID, orderIDs, codes); err != nil {
		return voucher.ApplyResult{}, err
	}
	if !e.HeldSince.IsZero() {
		if _, err := tx.Exec(ctx, qStackHeldSince, orderIDs, e.HeldSince); err != nil {
			return voucher.ApplyResult{}, err
		}
	}
	return voucher.ApplyResult{Outcome: voucher.Applied}, nil
}

// releaseReplacedEvent releases, in the transaction of a replacing stack's
// event, what the order it replaces still holds: every member of the stack
// replaced (in code order) or the single reservation, each that is still a
// RESERVED hold at the event's time of the stack's customer (a single: of
// a member's customer, and no stack's member). Its uses go back before the
// new members take theirs, so a code in both orders ends where it began,
// as in the gate. A member the expiry job or a release gave back first is
// left alone, and the new members take their uses like any event's, under
// the same limits (voucherd_apply_replace_code's rule for a single).
func releaseReplacedEvent(ctx context.Context, tx pgx.Tx, e voucher.ReservedEvent, replaced *voucher.Stack) error {
	if replaced != nil && replaced.CustomerID != e.StackCustomerID {
		return nil
	}
	for _, id := range replacedOrderIDs(e.ReplacesOrderID, replaced) {
		var customer, code string
		var held, member bool
		err := tx.QueryRow(ctx, qStackReplaced, id, e.ReservedAt).Scan(&customer, &held, &code, &member)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			continue
		case err != nil:
			return err
		case !held, replaced == nil && (member || !slices.ContainsFunc(e.Members,
			func(m voucher.StackEventMember) bool { return m.CustomerID == customer })):
			continue
		}
		var red voucher.Redemption
		var released bool
		if err := scanRedemption(tx.QueryRow(ctx, qRelease, code, id, e.ReservedAt), &red, &released); err != nil {
			return err
		}
	}
	return nil
}

// stackCodes lists the codes of a stack's event, in order.
func stackCodes(e voucher.ReservedEvent) []string {
	codes := make([]string, len(e.Members))
	for i, m := range e.Members {
		codes[i] = m.Code
	}
	return codes
}
