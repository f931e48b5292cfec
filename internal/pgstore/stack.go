package pgstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/voucherd/voucherd/internal/voucher"
)

var (
	qStackLock          = mustQuery("stack_lock")
	qStackInsert        = mustQuery("stack_insert")
	qStackGet           = mustQuery("stack_get")
	qStackMembers       = mustQuery("stack_members")
	qStackMemberInsert  = mustQuery("stack_member_insert")
	qStackOf            = mustQuery("stack_of")
	qStacksOf           = mustQuery("stacks_of")
	qStackReplaced      = mustQuery("stack_replaced")
	qStackHeldSince     = mustQuery("stack_held_since")
	qStackStacking      = mustQuery("stack_stacking")
	qVoucherStacking    = mustQuery("voucher_stacking")
	qVoucherStackingSet = mustQuery("voucher_stacking_set")
)

// codeFailure is the refusal of one code of a stack inside its
// transaction; the transaction is rolled back whole.
type codeFailure struct {
	code string
	err  error
}

func (f *codeFailure) Error() string { return f.code + ": " + f.err.Error() }
func (f *codeFailure) Unwrap() error { return f.err }

// stackError turns the error of a stack's transaction into the domain's,
// naming the code that failed.
func stackError(err error) error {
	var f *codeFailure
	if !errors.As(err, &f) {
		return interpretWriteError(err)
	}
	out := interpretWriteError(f.err)
	var e *voucher.Error
	if errors.As(out, &e) {
		c := *e
		c.FailedCode = f.code
		return &c
	}
	return out
}

// ReserveStack takes a use of each code of r for r.OrderID in one
// transaction: the stacks sharing a code are serialised (advisory locks
// taken in code order, so two stacks never wait on each other in a
// cycle), the orderId is claimed in voucher_stack, each code is reserved
// in the order given by voucherd_reserve_one under its member's orderId,
// and the members are recorded. Any refusal rolls everything back.
func (s *Store) ReserveStack(ctx context.Context, r voucher.StackRequest, now time.Time, ttl time.Duration) (voucher.Stack, error) {
	if err := r.Validate(); err != nil {
		return voucher.Stack{}, err
	}
	if len(r.Customers) != len(r.Codes) {
		return voucher.Stack{}, voucher.Errorf(voucher.CodeInvalidRequest, "one customer per code is required")
	}
	if ttl <= 0 {
		return voucher.Stack{}, voucher.Errorf(voucher.CodeInvalidRequest, "reservation TTL must be positive, got %s", ttl)
	}
	var out voucher.Stack
	err := s.rerunRolledBack(ctx, func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			out, err = reserveStack(ctx, tx, r, now, ttl)
			return err
		})
	})
	if err != nil {
		return voucher.Stack{}, stackError(err)
	}
	return out, nil
}

func reserveStack(ctx context.Context, tx pgx.Tx, r voucher.StackRequest, now time.Time, ttl time.Duration) (voucher.Stack, error) {
	sorted := slices.Clone(r.Codes)
	var replaced *voucher.Stack
	if r.ReplacesOrderID != "" {
		// A replaced stack's codes are locked with the new ones (its codes
		// never change, so reading them before the locks is safe).
		if old, err := readStack(ctx, tx, r.ReplacesOrderID); err == nil {
			replaced = &old
			for _, it := range old.Items {
				if !slices.Contains(sorted, it.Code) {
					sorted = append(sorted, it.Code)
				}
			}
		} else if !voucher.IsCode(err, voucher.CodeReservationNotFound) {
			return voucher.Stack{}, err
		}
	}
	slices.Sort(sorted)
	if _, err := tx.Exec(ctx, qStackLock, sorted); err != nil {
		return voucher.Stack{}, err
	}
	var claimed string
	err := tx.QueryRow(ctx, qStackInsert, r.OrderID, r.CustomerID, r.OrderAmount, r.Codes, now).Scan(&claimed)
	if errors.Is(err, pgx.ErrNoRows) {
		return replayStack(ctx, tx, r)
	}
	if err != nil {
		return voucher.Stack{}, err
	}
	if err := checkStacking(ctx, tx, r.Codes); err != nil {
		return voucher.Stack{}, err
	}
	if r.ReplacesOrderID != "" {
		if err := releaseReplaced(ctx, tx, r, replaced, now); err != nil {
			return voucher.Stack{}, err
		}
	}
	st := voucher.Stack{OrderID: r.OrderID, CustomerID: r.CustomerID, OrderAmount: r.OrderAmount, CreatedAt: now}
	members := make([]string, len(r.Codes))
	left := r.OrderAmount
	interval := pgtype.Interval{Microseconds: ttl.Microseconds(), Valid: true}
	for i, code := range r.Codes {
		members[i] = voucher.StackMemberOrderID(r.OrderID, i+1)
		var res voucher.Reservation
		var used, total int32
		var window time.Time
		if i < len(r.Windows) {
			window = r.Windows[i]
		}
		if err := scanRedemption(tx.QueryRow(ctx, qReserve, code, r.Customers[i], members[i], left, now, interval,
			currencyArg(r.Currency), windowArg(window)), &res.Redemption, &res.Replay, &used, &total); err != nil {
			return voucher.Stack{}, &codeFailure{code: code, err: err}
		}
		if res.Replay {
			// The member's orderId was taken by a single reservation of
			// this code and customer: not ours.
			return voucher.Stack{}, &codeFailure{code: code, err: voucher.Reject(voucher.CodeOrderConflict, "",
				voucher.Facts{Voucher: code, OrderID: r.OrderID})}
		}
		left -= res.DiscountAmount
		st.Items = append(st.Items, voucher.StackItem{Code: code, Redemption: res.Redemption})
	}
	if _, err := tx.Exec(ctx, qStackMemberInsert, r.OrderID, members, r.Codes); err != nil {
		return voucher.Stack{}, err
	}
	if !r.HeldSince.IsZero() {
		if _, err := tx.Exec(ctx, qStackHeldSince, members, r.HeldSince); err != nil {
			return voucher.Stack{}, err
		}
	}
	return st, nil
}

// replacedOrderIDs are the orderIds a replacement of orderID releases:
// the members of the stack replaced, in code order (the order its codes
// are locked in), or orderID itself when it is a single reservation.
func replacedOrderIDs(orderID string, replaced *voucher.Stack) []string {
	if replaced == nil {
		return []string{orderID}
	}
	items := slices.Clone(replaced.Items)
	slices.SortFunc(items, func(a, b voucher.StackItem) int { return strings.Compare(a.Code, b.Code) })
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.Redemption.OrderID
	}
	return ids
}

// releaseReplaced releases, in r's transaction, the order r replaces: every
// member of the stack replaced (when it is one), or the single
// reservation. It must be the customer's RESERVED hold, whole, else
// REPLACED_ORDER_NOT_HELD.
func releaseReplaced(ctx context.Context, tx pgx.Tx, r voucher.StackRequest, replaced *voucher.Stack, now time.Time) error {
	notHeld := voucher.Reject(voucher.CodeReplacedOrderNotHeld, "",
		voucher.Facts{Voucher: r.Codes[0], OrderID: r.ReplacesOrderID, CustomerID: r.CustomerID})
	if replaced != nil && replaced.CustomerID != r.CustomerID {
		return notHeld
	}
	for _, id := range replacedOrderIDs(r.ReplacesOrderID, replaced) {
		var customer, code string
		var held, member bool
		err := tx.QueryRow(ctx, qStackReplaced, id, now).Scan(&customer, &held, &code, &member)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return notHeld
		case err != nil:
			return err
		case !held, replaced == nil && (member || !slices.Contains(r.Customers, customer)):
			return notHeld
		}
		var red voucher.Redemption
		var released bool
		if err := scanRedemption(tx.QueryRow(ctx, qRelease, code, id, now), &red, &released); err != nil {
			return err
		}
	}
	return nil
}

// checkStacking refuses a stack of several codes that holds a code that is
// not stackable, or two codes of one exclusive group; the code named is
// the first such code in the order given.
func checkStacking(ctx context.Context, tx pgx.Tx, codes []string) error {
	if len(codes) < 2 {
		return nil
	}
	rows, err := tx.Query(ctx, qStackStacking, codes)
	if err != nil {
		return err
	}
	settings := map[string]voucher.Stacking{}
	var code, group string
	if _, err := pgx.ForEachRow(rows, []any{&code, &group}, func() error {
		settings[code] = voucher.Stacking{Stackable: true, ExclusiveGroup: group}
		return nil
	}); err != nil {
		return err
	}
	for i, reason := range voucher.StackingRefusals(codes, settings) {
		if reason != "" {
			return &codeFailure{code: codes[i], err: voucher.StackingError(codes[i], reason)}
		}
	}
	return nil
}

// replayStack answers a stack whose orderId is claimed already: the same
// customer and codes replay it (ORDER_RELEASED once it is released),
// anything else is ORDER_CONFLICT.
func replayStack(ctx context.Context, tx pgx.Tx, r voucher.StackRequest) (voucher.Stack, error) {
	st, err := readStack(ctx, tx, r.OrderID)
	if err != nil {
		return voucher.Stack{}, err
	}
	codes := make([]string, len(st.Items))
	for i, it := range st.Items {
		codes[i] = it.Code
	}
	if st.CustomerID != r.CustomerID || !slices.Equal(codes, r.Codes) {
		return voucher.Stack{}, voucher.Reject(voucher.CodeOrderConflict, "", voucher.Facts{Voucher: r.Codes[0], OrderID: r.OrderID})
	}
	if st.Status() == voucher.StatusReleased {
		return voucher.Stack{}, voucher.Reject(voucher.CodeOrderReleased, "", voucher.Facts{Voucher: r.Codes[0], OrderID: r.OrderID})
	}
	st.Replay = true
	return st, nil
}

// readStack reads the stack orderID and its members' redemptions;
// CodeReservationNotFound when it is no stack.
func readStack(ctx context.Context, q stackQuerier, orderID string) (voucher.Stack, error) {
	st := voucher.Stack{OrderID: orderID}
	var codes []string
	if err := q.QueryRow(ctx, qStackGet, orderID).Scan(&st.CustomerID, &st.OrderAmount, &codes, &st.CreatedAt); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return voucher.Stack{}, voucher.Errorf(voucher.CodeReservationNotFound, "no order %s holding several codes", orderID)
		}
		return voucher.Stack{}, err
	}
	st.CreatedAt = st.CreatedAt.UTC()
	rows, err := q.Query(ctx, qStackMembers, orderID)
	if err != nil {
		return voucher.Stack{}, err
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.StackItem, error) {
		var it voucher.StackItem
		return it, scanRedemption(stackMemberRow{row, &it.Code}, &it.Redemption)
	})
	if err != nil {
		return voucher.Stack{}, err
	}
	st.Items = items
	return st, nil
}

// stackQuerier is a pool or a transaction.
type stackQuerier interface {
	rowQuerier
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// stackMemberRow scans a stack_members row: the member's code, then the
// nine redemption columns.
type stackMemberRow struct {
	row  pgx.Row
	code *string
}

func (r stackMemberRow) Scan(dest ...any) error {
	return r.row.Scan(append([]any{r.code}, dest...)...)
}

// Stack reads the stack orderID.
func (s *Store) Stack(ctx context.Context, orderID string) (voucher.Stack, error) {
	st, err := readStack(ctx, s.pool, orderID)
	if err != nil {
		return voucher.Stack{}, interpretError(err)
	}
	return st, nil
}

// StackOf reports the stack orderID is, or whose member's redemption it
// is.
func (s *Store) StackOf(ctx context.Context, orderID string) (string, bool, error) {
	var stack string
	err := s.pool.QueryRow(ctx, qStackOf, orderID).Scan(&stack)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, interpretError(err)
	}
	return stack, true, nil
}

// stackWrite runs one per-member statement on every member of the stack
// orderID in one transaction, under the stack's code locks, members in
// code order (the lock order of every stack transaction); a refusal of
// any member rolls back every other. It answers the stack as it is after.
func (s *Store) stackWrite(ctx context.Context, orderID string, each func(tx pgx.Tx, it voucher.StackItem) error) (voucher.Stack, error) {
	var out voucher.Stack
	err := s.rerunRolledBack(ctx, func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			st, err := readStack(ctx, tx, orderID)
			if err != nil {
				return err
			}
			sorted := slices.Clone(st.Items)
			slices.SortFunc(sorted, func(a, b voucher.StackItem) int {
				switch {
				case a.Code < b.Code:
					return -1
				case a.Code > b.Code:
					return 1
				}
				return 0
			})
			codes := make([]string, len(sorted))
			for i, it := range sorted {
				codes[i] = it.Code
			}
			if _, err := tx.Exec(ctx, qStackLock, codes); err != nil {
				return err
			}
			for _, it := range sorted {
				if err := each(tx, it); err != nil {
					return &codeFailure{code: it.Code, err: err}
				}
			}
			out, err = readStack(ctx, tx, orderID)
			return err
		})
	})
	if err != nil {
		return voucher.Stack{}, stackError(err)
	}
	return out, nil
}

// ConfirmStack confirms every member of the stack orderID (voucherd_confirm
// each); a member released or expired refuses the whole confirmation
// (CodeReservationReleased), which then changes nothing.
func (s *Store) ConfirmStack(ctx context.Context, orderID string, now time.Time) (voucher.Stack, error) {
	return s.stackWrite(ctx, orderID, func(tx pgx.Tx, it voucher.StackItem) error {
		var r voucher.Redemption
		var expired bool
		if err := scanRedemption(tx.QueryRow(ctx, qConfirm, it.Redemption.VoucherCode, it.Redemption.OrderID, now), &r, &expired); err != nil {
			return err
		}
		if expired || r.Status == voucher.StatusReleased {
			return voucher.Errorf(voucher.CodeReservationReleased, "order %s was released or has expired", orderID)
		}
		return nil
	})
}

// ReleaseStack releases every held member of the stack orderID
// (voucherd_release each); idempotent.
func (s *Store) ReleaseStack(ctx context.Context, orderID string, now time.Time) (voucher.Stack, error) {
	return s.stackWrite(ctx, orderID, func(tx pgx.Tx, it voucher.StackItem) error {
		var r voucher.Redemption
		var released bool
		return scanRedemption(tx.QueryRow(ctx, qRelease, it.Redemption.VoucherCode, it.Redemption.OrderID, now), &r, &released)
	})
}

// ExtendStack extends every member of the stack orderID (voucherd_extend
// each); a refusal of one extends none.
func (s *Store) ExtendStack(ctx context.Context, orderID string, until, now time.Time, maxHold time.Duration) (voucher.Stack, error) {
	return s.stackWrite(ctx, orderID, func(tx pgx.Tx, it voucher.StackItem) error {
		var r voucher.Redemption
		var expired bool
		if err := scanRedemption(tx.QueryRow(ctx, qExtend, it.Redemption.VoucherCode, it.Redemption.OrderID, now, until,
			pgtype.Interval{Microseconds: maxHold.Microseconds(), Valid: true}), &r, &expired); err != nil {
			return err
		}
		switch {
		case expired || r.Status == voucher.StatusReleased:
			return voucher.Errorf(voucher.CodeReservationReleased, "order %s was released or has expired", orderID)
		case r.Status == voucher.StatusConfirmed:
			return voucher.Errorf(voucher.CodeReservationConfirmed, "order %s is confirmed: it no longer expires", orderID)
		}
		return nil
	})
}

// readStacking reads v's stacking setting.
func readStacking(ctx context.Context, q rowQuerier, v *voucher.Voucher) error {
	var group string
	err := q.QueryRow(ctx, qVoucherStacking, v.Code).Scan(&group)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		v.Stacking = voucher.Stacking{}
		return nil
	case err != nil:
		return err
	}
	v.Stacking = voucher.Stacking{Stackable: true, ExclusiveGroup: group}
	return nil
}

// writeStacking sets voucher code's stacking setting in tx.
func writeStacking(ctx context.Context, tx pgx.Tx, code string, st voucher.Stacking) error {
	_, err := tx.Exec(ctx, qVoucherStackingSet, code, st.Stackable, st.ExclusiveGroup)
	return err
}

// VoucherStacking reads voucher code's stacking setting (the zero setting
// for a voucher without one, or no voucher).
func (s *Store) VoucherStacking(ctx context.Context, code string) (voucher.Stacking, error) {
	v := voucher.Voucher{Code: code}
	if err := readStacking(ctx, s.pool, &v); err != nil {
		return voucher.Stacking{}, interpretError(err)
	}
	return v.Stacking, nil
}

// StacksOf lists the stacks whose members' redemptions some of orderIDs
// are.
func (s *Store) StacksOf(ctx context.Context, orderIDs []string) ([]string, error) {
	rows, err := s.pool.Query(ctx, qStacksOf, orderIDs)
	if err != nil {
		return nil, interpretError(err)
	}
	stacks, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, interpretError(err)
	}
	return stacks, nil
}
