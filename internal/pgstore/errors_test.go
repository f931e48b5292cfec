package pgstore

import (
	"context"
	"errors"
	"fmt"
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
