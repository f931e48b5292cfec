package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

func TestInterpretError(t *testing.T) {
	t.Parallel()
	domain := voucher.Errorf(voucher.CodeOutOfStock, "gone")
	tests := []struct {
		name   string
		err    error
		code   voucher.ErrorCode
		reason voucher.Reason
		msg    string
		cause  bool
	}{
		{"rejection", &pgconn.PgError{Code: "VD001", Message: "OUT_OF_STOCK", Detail: "voucher X has no uses left"},
			voucher.CodeOutOfStock, "", "voucher X has no uses left", false},
		{"rejection with reason", fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "VD001", Message: "NOT_ELIGIBLE", Detail: "too early", Hint: "NOT_STARTED"}),
			voucher.CodeNotEligible, voucher.ReasonNotStarted, "too early", false},
		{"domain error passes through", domain, voucher.CodeOutOfStock, "", "gone", false},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, voucher.CodeUnavailable, "", "the database is unavailable", true},
		{"serialization", &pgconn.PgError{Code: "40001"}, voucher.CodeUnavailable, "", "the database is unavailable", true},
		{"statement timeout", &pgconn.PgError{Code: "57014"}, voucher.CodeUnavailable, "", "the database is unavailable", true},
		{"shutdown", &pgconn.PgError{Code: "57P01"}, voucher.CodeUnavailable, "", "the database is unavailable", true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, voucher.CodeUnavailable, "", "the database is unavailable", true},
		{"read-only replica", &pgconn.PgError{Code: "25006"}, voucher.CodeUnavailable, "", "the database is unavailable", true},
		{"network", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, voucher.CodeUnavailable, "", "the database is unavailable", true},
		{"context", context.DeadlineExceeded, voucher.CodeUnavailable, "", "the database is unavailable", true},
		{"multixact check", &pgconn.PgError{Code: "XX000", Message: "new multixact has more than one updating member: 0 3[1049 (nokeyupd), 1050 (keysh), 1050 (nokeyupd)]"},
			voucher.CodeUnavailable, "", "the database is unavailable", true},
		{"other internal error", &pgconn.PgError{Code: "XX000", Message: "could not read block 0"}, voucher.CodeInternal, "", "unexpected database error", true},
		{"bug", &pgconn.PgError{Code: "42883", Message: "function does not exist"}, voucher.CodeInternal, "", "unexpected database error", true},
		{"inconsistent counters", &pgconn.PgError{Code: "VD900"}, voucher.CodeInternal, "", "unexpected database error", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ve *voucher.Error
			require.True(t, errors.As(interpretError(tc.err), &ve))
			require.Equal(t, tc.code, ve.Code)
			require.Equal(t, tc.reason, ve.Reason)
			require.Equal(t, tc.msg, ve.Message)
			if tc.cause {
				require.ErrorIs(t, ve, tc.err, "the cause is kept")
			}
		})
	}
	require.NoError(t, interpretError(nil))
}

func TestRolledBack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"deadlock", &pgconn.PgError{Code: "40P01"}, true},
		{"serialization failure", fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "40001"}), true},
		{"multixact check", &pgconn.PgError{Code: "XX000", Message: "new multixact has more than one updating member: 0 2[7 (nokeyupd), 8 (nokeyupd)]"}, true},
		{"other internal error", &pgconn.PgError{Code: "XX000", Message: "could not read block 0"}, false},
		// The commit may have happened: not for the store to run again.
		{"connection lost", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, false},
		{"statement timeout", &pgconn.PgError{Code: "57014"}, false},
		{"context", context.DeadlineExceeded, false},
		{"rejection", &pgconn.PgError{Code: "VD001", Message: "OUT_OF_STOCK"}, false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, rolledBack(tc.err))
		})
	}
}

func TestInterpretWriteError(t *testing.T) {
	t.Parallel()
	sent := errors.New("connection refused")
	tests := []struct {
		name    string
		err     error
		code    voucher.ErrorCode
		unknown bool
	}{
		// Provably not applied.
		{"no connection from the pool", notSent{sent}, voucher.CodeUnavailable, false},
		{"server error", &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "57014"}, voucher.CodeUnavailable, false},
		{"injected connection failure raised as ERROR", &pgconn.PgError{SeverityUnlocalized: "ERROR", Code: "08006"}, voucher.CodeUnavailable, false},
		{"deadlock", &pgconn.PgError{SeverityUnlocalized: "ERROR", Code: "40P01"}, voucher.CodeUnavailable, false},
		{"rejection", &pgconn.PgError{SeverityUnlocalized: "ERROR", Code: "VD001", Message: "OUT_OF_STOCK"}, voucher.CodeOutOfStock, false},
		// May have committed.
		{"reply lost", io.ErrUnexpectedEOF, voucher.CodeUnavailable, true},
		{"connection reset", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, voucher.CodeUnavailable, true},
		{"deadline while the statement ran", context.DeadlineExceeded, voucher.CodeUnavailable, true},
		{"session terminated", &pgconn.PgError{SeverityUnlocalized: "FATAL", Code: "57P01"}, voucher.CodeUnavailable, true},
		{"server error without severity", &pgconn.PgError{Code: "08006"}, voucher.CodeUnavailable, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ve *voucher.Error
			require.True(t, errors.As(interpretWriteError(tc.err), &ve))
			require.Equal(t, tc.code, ve.Code)
			require.Equal(t, tc.unknown, ve.OutcomeUnknown)
			require.Equal(t, tc.unknown, voucher.IsOutcomeUnknown(ve))
		})
	}
}
