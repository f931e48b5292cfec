package pgstore

import (
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/voucherd/voucherd/internal/voucher"
)

// SQLSTATEs raised by the stored functions (functions/voucherd_reject.sql).
// VD900, counters that disagree with the redemptions, has no constant: like
// any SQLSTATE not named here it is a bug and becomes CodeInternal.
const (
	// sqlstateRejected is a rule rejection: MESSAGE is the voucher.ErrorCode,
	// DETAIL the facts (rejection), HINT the NOT_ELIGIBLE reason or ''.
	sqlstateRejected = "VD001"
	// sqlstatePerUserLimit is a batch event that would exceed a per-user
	// limit (ApplyReserved).
	sqlstatePerUserLimit = "VD002"
	// sqlstateBatchRetry is a batch of reservations that must be retried one
	// by one because the voucher's rules changed under it
	// (functions/voucherd_reserve_batch.sql).
	sqlstateBatchRetry = "VD003"
	// sqlstateHeldOut is a reservation of a voucher with no free use whose
	// holds are not all confirmed (functions/voucherd_reject_stock.sql):
	// DETAIL is the facts, HINT the milliseconds until the earliest hold
	// expires.
	sqlstateHeldOut = "VD004"
)

// Standard SQLSTATEs the adapter looks at.
const (
	sqlstateUniqueViolation     = "23505"
	sqlstateForeignKeyViolation = "23503"
	sqlstateCheckViolation      = "23514"

	sqlstateSerializationFailure = "40001"
	sqlstateDeadlockDetected     = "40P01"
	sqlstateInternal             = "XX000"
)

// interpretError is the one translation of driver errors into the domain
// vocabulary:
//   - a rejection raised by a function becomes its *voucher.Error;
//   - connection failures, timeouts, cancellations, deadlocks, serialization
//     failures, PostgreSQL's multixact check, shutdowns and resource
//     exhaustion become CodeUnavailable: the transaction rolled back, nothing
//     was taken, trying again may work (writes already ran again by
//     themselves where that is certain: rerunRolledBack);
//   - any other server error is a bug and becomes CodeInternal.
//
// The cause is kept in Err in both of the last cases.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	var domain *voucher.Error
	if errors.As(err, &domain) {
		return domain
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == sqlstateRejected:
			return rejection(pgErr.Message, pgErr.Hint, pgErr.Detail, 0)
		case pgErr.Code == sqlstateHeldOut:
			ms, _ := strconv.ParseInt(pgErr.Hint, 10, 64)
			return rejection(string(voucher.CodeHeldOut), "", pgErr.Detail, ms)
		case transientSQLState(pgErr.Code) || multixactCheck(pgErr):
			return voucher.Unavailable(err, "the database is unavailable")
		default:
			return &voucher.Error{Code: voucher.CodeInternal, Message: "unexpected database error", Err: err}
		}
	}
	// Everything else comes from the driver or the network: connect and I/O
	// errors, a closed pool, context cancellation and deadlines.
	return voucher.Unavailable(err, "the database is unavailable")
}

// notSent marks a write that failed before its statement reached the
// server: no connection could be had from the pool.
type notSent struct{ err error }

func (e notSent) Error() string { return "not sent: " + e.err.Error() }
func (e notSent) Unwrap() error { return e.err }

// interpretWriteError is interpretError for a write statement that runs in
// its own implicit transaction. A CodeUnavailable answer is marked
// OutcomeUnknown unless the write provably changed nothing (mayHaveApplied).
func interpretWriteError(err error) error {
	out := interpretError(err)
	var e *voucher.Error
	if !errors.As(out, &e) || e.Code != voucher.CodeUnavailable || !mayHaveApplied(err) {
		return out
	}
	return &voucher.Error{Code: voucher.CodeUnavailable, OutcomeUnknown: true, Err: err,
		Message: "the database did not answer; the reservation may or may not stand: retry with the same orderId"}
}

// mayHaveApplied reports whether a write statement that ended with err may
// have committed. Conservative: only three failures prove it did not:
//   - no connection was had for it (notSent);
//   - pgx reports that nothing was sent (pgconn.SafeToRetry);
//   - the server answered an error of severity ERROR: the statement failed,
//     and with it its implicit transaction, whose commit runs after the
//     statement.
//
// Everything else may have reached the server and committed: a connection
// lost or a reply cut after the statement was sent (the COMMIT's reply
// included), a context that ended while the statement ran, a FATAL or PANIC
// ending the session, an error decoding the reply.
func mayHaveApplied(err error) bool {
	var ns notSent
	if errors.As(err, &ns) || pgconn.SafeToRetry(err) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		sev := pgErr.SeverityUnlocalized
		if sev == "" {
			sev = pgErr.Severity
		}
		return sev != "ERROR"
	}
	return true
}

// transientSQLState reports whether a server error says nothing about the
// request itself, so that the same request may succeed later.
func transientSQLState(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"), // connection exception
		strings.HasPrefix(code, "40"), // transaction rollback: serialization failure, deadlock
		strings.HasPrefix(code, "53"), // insufficient resources, too many connections
		strings.HasPrefix(code, "57"), // operator intervention: query canceled (timeout), shutdown
		strings.HasPrefix(code, "58"), // system error (I/O)
		code == "55P03",               // lock_not_available (lock_timeout)
		code == "25006":               // read_only_sql_transaction: a failover left us on a replica
		return true
	}
	return false
}

// multixactCheck reports whether e is PostgreSQL's sanity check on row-lock
// bookkeeping ("new multixact has more than one updating member", XX000).
// A transaction that took a KEY SHARE lock on a voucher row (the foreign key
// check of a redemption insert) and then updates that row can, rarely, meet
// it when another updater of the row aborts at the same moment: seen once
// in ~10 runs of TestReserveBatchInstancesStress, whose Kafka batches abort
// after their voucher update (VD002). The server refuses the update before
// writing it and rolls the transaction back: the request changed nothing and
// may simply run again.
func multixactCheck(e *pgconn.PgError) bool {
	return e.Code == sqlstateInternal && strings.HasPrefix(e.Message, "new multixact has more than one updating member")
}

// rolledBack reports whether err is the server rolling back a statement's
// transaction for a reason of its own that running the statement again is
// expected to avoid: a serialization failure, a deadlock, or the multixact
// check. The statement changed nothing.
func rolledBack(err error) bool {
	code, pgErr := pgCode(err)
	return code == sqlstateSerializationFailure || code == sqlstateDeadlockDetected ||
		(pgErr != nil && multixactCheck(pgErr))
}

// pgCode returns the SQLSTATE of err, or "" when it is not a server error.
func pgCode(err error) (string, *pgconn.PgError) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code, pgErr
	}
	return "", nil
}
