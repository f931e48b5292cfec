package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/voucherd/voucherd/internal/voucher"
)

// DefaultExpireLimit is the batch size of ExpireDue when limit <= 0.
const DefaultExpireLimit = 1000

// scanRedemption scans the nine redemption columns of the queries, then
// extra.
func scanRedemption(row pgx.Row, r *voucher.Redemption, extra ...any) error {
	var status string
	dest := append([]any{
		&r.OrderID, &r.VoucherCode, &r.CustomerID, &r.OrderAmount, &r.DiscountAmount,
		&status, &r.CreatedAt, &r.UpdatedAt, &r.ExpiresAt,
	}, extra...)
	if err := row.Scan(dest...); err != nil {
		return err
	}
	r.Status = voucher.Status(status)
	r.CreatedAt, r.UpdatedAt, r.ExpiresAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC(), r.ExpiresAt.UTC()
	return nil
}

// heldSince is the held_since column as Redemption.HeldSince: zero when
// NULL (the hold began with the row).
func heldSince(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// Reserve takes one use for r.OrderID in one statement: the redemption row,
// the customer's counter, then the voucher's used_count. A known orderId with
// the same code and customer is a replay and takes nothing. With combining
// on (the default) concurrent reservations of one voucher share that
// statement and its transaction (combiner.go); each still gets the answer it
// would have got alone.
func (s *Store) Reserve(ctx context.Context, r voucher.ReserveRequest, now time.Time, ttl time.Duration) (voucher.Reservation, error) {
	if err := r.Validate(); err != nil {
		return voucher.Reservation{}, err
	}
	if ttl <= 0 {
		return voucher.Reservation{}, voucher.Errorf(voucher.CodeInvalidRequest, "reservation TTL must be positive, got %s", ttl)
	}
	if r.ReplacesOrderID != "" {
		return s.replace(ctx, r, now, ttl)
	}
	if s.comb != nil {
		return s.comb.reserve(ctx, r, now, ttl)
	}
	return s.reserveOne(ctx, r, now, ttl)
}

// replace runs a reservation that names the order it replaces
// (voucherd_replace): one statement, so the release of the replaced hold
// and the new row commit together. It does not go through the combiner:
// replacements are rare and the function locks the replaced row first.
func (s *Store) replace(ctx context.Context, r voucher.ReserveRequest, now time.Time, ttl time.Duration) (voucher.Reservation, error) {
	var res voucher.Reservation
	var used, total int32
	err := s.rerunRolledBack(ctx, func() error {
		conn, err := s.acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		return scanRedemption(conn.QueryRow(ctx, qReplace,
			r.Code, r.CustomerID, r.OrderID, r.ReplacesOrderID, r.OrderAmount, now,
			pgtype.Interval{Microseconds: ttl.Microseconds(), Valid: true}, currencyArg(r.Currency), windowArg(r.Window)), &res.Redemption, &res.Replay, &used, &total)
	})
	if err != nil {
		return voucher.Reservation{}, interpretWriteError(err)
	}
	return withTaken(res, used, total), nil
}

// windowArg is a request's occurrence as the functions take it: NULL for
// none.
func windowArg(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// currencyArg is a request's currency as the functions take it: NULL for
// none.
func currencyArg(c string) *string {
	if c == "" {
		return nil
	}
	return &c
}

// Validate answers what Reserve of r at now would answer (voucherd_validate),
// in one read-only statement.
func (s *Store) Validate(ctx context.Context, r voucher.ValidateRequest, now time.Time) (voucher.StoreValidation, error) {
	if err := r.Validate(); err != nil {
		return voucher.StoreValidation{}, err
	}
	var order *string
	if r.OrderID != "" {
		order = &r.OrderID
	}
	var sv voucher.StoreValidation
	if err := s.pool.QueryRow(ctx, qValidate, r.Code, r.CustomerID, order, r.OrderAmount, now, currencyArg(r.Currency), windowArg(r.Window)).
		Scan(&sv.DiscountAmount, &sv.Replay); err != nil {
		return voucher.StoreValidation{}, interpretError(err)
	}
	return sv, nil
}

// Redemption returns one redemption of the voucher code.
func (s *Store) Redemption(ctx context.Context, code, orderID string) (voucher.Redemption, error) {
	var r voucher.Redemption
	if err := scanRedemption(s.pool.QueryRow(ctx, qRedemptionGet, code, orderID), &r); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return voucher.Redemption{}, voucher.Reject(voucher.CodeReservationNotFound, "",
				voucher.Facts{Voucher: code, OrderID: orderID})
		}
		return voucher.Redemption{}, interpretError(err)
	}
	return r, nil
}

// Confirm moves a RESERVED redemption to CONFIRMED; a CONFIRMED one is
// returned as it is. A released one, or a RESERVED one whose expiry is at or
// before now (released right here, its use given back), is
// CodeReservationReleased.
func (s *Store) Confirm(ctx context.Context, code, orderID string, now time.Time) (voucher.Redemption, error) {
	var r voucher.Redemption
	var expired bool
	if err := s.rerunRolledBack(ctx, func() error {
		return scanRedemption(s.pool.QueryRow(ctx, qConfirm, code, orderID, now), &r, &expired)
	}); err != nil {
		return voucher.Redemption{}, interpretError(err)
	}
	switch {
	case expired:
		return voucher.Redemption{}, voucher.Errorf(voucher.CodeReservationReleased,
			"reservation %s of voucher %s expired at %s and was released", orderID, code, r.ExpiresAt.Format(time.RFC3339))
	case r.Status == voucher.StatusReleased:
		return voucher.Redemption{}, voucher.Errorf(voucher.CodeReservationReleased,
			"reservation %s of voucher %s was released", orderID, code)
	}
	return r, nil
}

// Release moves a held redemption to RELEASED and gives its use back to the
// customer and the voucher in the same transaction; a RELEASED one is
// returned with released = false.
func (s *Store) Release(ctx context.Context, code, orderID string, now time.Time) (voucher.Redemption, bool, error) {
	var r voucher.Redemption
	var released bool
	if err := s.rerunRolledBack(ctx, func() error {
		return scanRedemption(s.pool.QueryRow(ctx, qRelease, code, orderID, now), &r, &released)
	}); err != nil {
		return voucher.Redemption{}, false, interpretError(err)
	}
	return r, released, nil
}

// ExpireDue releases up to limit (DefaultExpireLimit when limit <= 0) RESERVED
// redemptions whose expiry is at or before now, oldest first, and returns
// them. Concurrent callers skip each other's rows, so each is released once.
func (s *Store) ExpireDue(ctx context.Context, now time.Time, limit int) ([]voucher.Redemption, error) {
	if limit <= 0 {
		limit = DefaultExpireLimit
	}
	var out []voucher.Redemption
	err := s.rerunRolledBack(ctx, func() error {
		rows, err := s.pool.Query(ctx, qExpire, now, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.Redemption, error) {
			var r voucher.Redemption
			return r, scanRedemption(row, &r)
		})
		return err
	})
	if err != nil {
		return nil, interpretError(err)
	}
	return out, nil
}

// ApplyReserved writes reservations taken by the gate (Kafka mode). The batch
// is one statement (voucherd_apply_reserved_codes): the new redemptions, then each
// customer's counter and each voucher's used_count raised once by the number
// inserted for it. A known orderId changes nothing (AlreadyApplied; Rejected
// when it belongs to another voucher or customer).
//
// When the database refuses the batch (an unknown voucher, a total or
// per-user limit exceeded, a malformed field) the events are applied one by
// one, each in its own transaction, and those it refuses are Rejected with
// the reason. A dependency failure returns an error: nothing was decided and
// the caller retries the batch.
//
// An event that replaces an order (ReplacesOrderID) is applied on its own,
// in order with the others, by voucherd_apply_replace: the release of the
// replaced hold and the new row in one transaction. A stack's event
// (Members) is applied on its own too, by applyStack.
func (s *Store) ApplyReserved(ctx context.Context, events []voucher.ReservedEvent) ([]voucher.ApplyResult, error) {
	if len(events) == 0 {
		return nil, nil
	}
	for i, e := range events {
		if e.ReplacesOrderID == "" && len(e.Members) == 0 {
			continue
		}
		results := make([]voucher.ApplyResult, 0, len(events))
		if i > 0 {
			before, err := s.ApplyReserved(ctx, events[:i])
			if err != nil {
				return nil, err
			}
			results = append(results, before...)
		}
		apply := s.applyReplace
		if len(e.Members) > 0 {
			apply = s.applyStack
		}
		one, err := apply(ctx, e)
		if err != nil {
			return nil, err
		}
		results = append(results, one)
		after, err := s.ApplyReserved(ctx, events[i+1:])
		if err != nil {
			return nil, err
		}
		return append(results, after...), nil
	}
	results, err := s.applyBatch(ctx, events)
	if err == nil {
		return results, nil
	}
	if _, refused := refusal(err, events[0]); !refused {
		return nil, interpretError(err)
	}
	results = make([]voucher.ApplyResult, len(events))
	for i := range events {
		one, err := s.applyBatch(ctx, events[i:i+1])
		if err != nil {
			reason, refused := refusal(err, events[i])
			if !refused {
				return nil, interpretError(err)
			}
			results[i] = voucher.ApplyResult{Outcome: voucher.Rejected, Reason: reason}
			continue
		}
		results[i] = one[0]
	}
	return results, nil
}

// applyBatch applies events in one statement (run again when the server
// rolled it back for a reason of its own) and computes their results.
func (s *Store) applyBatch(ctx context.Context, events []voucher.ReservedEvent) (results []voucher.ApplyResult, err error) {
	err = s.rerunRolledBack(ctx, func() error {
		results, err = s.applyBatchOnce(ctx, events)
		return err
	})
	return results, err
}

// applyBatchOnce applies events in one statement and computes their results.
func (s *Store) applyBatchOnce(ctx context.Context, events []voucher.ReservedEvent) ([]voucher.ApplyResult, error) {
	n := len(events)
	var (
		orderIDs   = make([]string, n)
		codes      = make([]string, n)
		customers  = make([]string, n)
		amounts    = make([]int64, n)
		discounts  = make([]int64, n)
		reservedAt = make([]time.Time, n)
		expiresAt  = make([]time.Time, n)
		unique     = make([]string, n)
		// windows stays NULL for a batch without an occurrence (the common
		// sale): the function then skips the occurrences' counters.
		windows []*time.Time
	)
	for i, e := range events {
		orderIDs[i], codes[i], customers[i] = e.OrderID, e.Code, e.CustomerID
		amounts[i], discounts[i] = e.OrderAmount, e.DiscountAmount
		reservedAt[i], expiresAt[i] = e.ReservedAt, e.ExpiresAt
		unique[i] = e.CampaignCode
		if !e.Window.IsZero() && windows == nil {
			windows = make([]*time.Time, n)
		}
	}
	var windowsArg any // nil: NULL
	if windows != nil {
		for i, e := range events {
			windows[i] = windowArg(e.Window)
		}
		windowsArg = windows
	}
	rows, err := s.pool.Query(ctx, qApplyReserved, orderIDs, codes, customers, amounts, discounts, reservedAt, expiresAt, unique, windowsArg)
	if err != nil {
		return nil, err
	}
	type stored struct {
		inserted bool
		code     string
		customer string
	}
	known := make(map[string]stored, n)
	var (
		orderID string
		st      stored
	)
	_, err = pgx.ForEachRow(rows, []any{&orderID, &st.inserted, &st.code, &st.customer}, func() error {
		known[orderID] = st
		return nil
	})
	if err != nil {
		return nil, err
	}

	results := make([]voucher.ApplyResult, n)
	counted := make(map[string]bool, n)
	for i, e := range events {
		st, ok := known[e.OrderID]
		switch {
		case !ok:
			return nil, fmt.Errorf("pgstore: order %s of the batch is not stored after the batch", e.OrderID)
		case st.code != e.Code || st.customer != e.CustomerID:
			results[i] = voucher.ApplyResult{Outcome: voucher.Rejected, Reason: fmt.Sprintf(
				"order_conflict: order %s belongs to voucher %s and customer %s", e.OrderID, st.code, st.customer)}
		case st.inserted && !counted[e.OrderID]:
			// The first occurrence of an orderId in the batch is the one
			// inserted; a repeat in the same batch is a redelivery.
			counted[e.OrderID] = true
			results[i] = voucher.ApplyResult{Outcome: voucher.Applied}
		default:
			results[i] = voucher.ApplyResult{Outcome: voucher.AlreadyApplied}
		}
	}
	return results, nil
}

// applyReplace applies one replacement event (voucherd_apply_replace); a
// refusal of the database is its Rejected result.
func (s *Store) applyReplace(ctx context.Context, e voucher.ReservedEvent) (voucher.ApplyResult, error) {
	var (
		inserted bool
		code     string
		customer string
	)
	err := s.rerunRolledBack(ctx, func() error {
		return s.pool.QueryRow(ctx, qApplyReplace, e.OrderID, e.Code, e.CustomerID, e.OrderAmount, e.DiscountAmount,
			e.ReservedAt, e.ExpiresAt, e.ReplacesOrderID, e.CampaignCode, windowArg(e.Window)).Scan(&inserted, &code, &customer)
	})
	if err != nil {
		if reason, refused := refusal(err, e); refused {
			return voucher.ApplyResult{Outcome: voucher.Rejected, Reason: reason}, nil
		}
		return voucher.ApplyResult{}, interpretError(err)
	}
	switch {
	case code != e.Code || customer != e.CustomerID:
		return voucher.ApplyResult{Outcome: voucher.Rejected, Reason: fmt.Sprintf(
			"order_conflict: order %s belongs to voucher %s and customer %s", e.OrderID, code, customer)}, nil
	case inserted:
		return voucher.ApplyResult{Outcome: voucher.Applied}, nil
	}
	return voucher.ApplyResult{Outcome: voucher.AlreadyApplied}, nil
}

// refusal reports whether err is the database refusing event e for good (so
// it belongs in the dead-letter topic) and why.
func refusal(err error, e voucher.ReservedEvent) (string, bool) {
	code, pgErr := pgCode(err)
	switch {
	case pgErr == nil:
		return "", false
	case code == sqlstateForeignKeyViolation:
		return fmt.Sprintf("unknown voucher %s", e.Code), true
	case code == sqlstateCheckViolation:
		return "check_violation: " + pgErr.ConstraintName, true
	case code == sqlstatePerUserLimit:
		return "per_user_limit: " + pgErr.Message, true
	case code == sqlstateUniqueViolation && pgErr.ConstraintName == "voucher_redemption_code_live_idx":
		return fmt.Sprintf("code_used: campaign code %s is held by another order", e.CampaignCode), true
	case len(code) == 5 && (code[:2] == "22" || code[:2] == "23"):
		// Other data exceptions and integrity violations: a malformed event.
		return fmt.Sprintf("invalid event (%s): %s", code, pgErr.Message), true
	}
	return "", false
}
