package httpapi

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// counterStore answers only the read of a voucher's counters and records
// the reads it was asked for; any other read (the voucher with its live
// counts among them) reaches the nil Store and fails the request.
type counterStore struct {
	noStore
	mu    sync.Mutex
	reads []string
}

func (s *counterStore) ReconcileCounts(_ context.Context, code string) (voucher.StoreCounts, error) {
	s.mu.Lock()
	s.reads = append(s.reads, "ReconcileCounts "+code)
	s.mu.Unlock()
	if code != "SALE" {
		return voucher.StoreCounts{}, voucher.Errorf(voucher.CodeVoucherNotFound, "voucher %q not found", code)
	}
	return voucher.StoreCounts{TotalLimit: 10}, nil
}

// The reconciliation endpoint reads no voucher with its live counts (a
// count of every held row): an unknown voucher is answered 404 by the
// pass's first read, of the voucher's counter rows; without Redis a known
// one is 503 after that one read.
func TestReconcileEndpointReadsOnlyCounters(t *testing.T) {
	t.Parallel()
	st := &counterStore{}
	svc, err := voucher.NewService(voucher.ServiceConfig{Store: st})
	require.NoError(t, err)
	ring, err := NewKeyring([]Key{{Name: "ops", Secret: "adm-1", Admin: true}})
	require.NoError(t, err)
	s, err := New(Config{Service: svc, Keys: ring})
	require.NoError(t, err)
	for _, tc := range []struct {
		method, code string
		status       int
	}{
		{"GET", "NOPE", 404},
		{"POST", "NOPE", 404},
		{"GET", "SALE", 503},
		{"POST", "SALE", 503},
	} {
		st.reads = nil
		status, body := do(s, tc.method, "/vouchers/"+tc.code+"/reconciliation", "203.0.113.9:4000", "Bearer adm-1")
		require.Equal(t, tc.status, status, "%s %s: %s", tc.method, tc.code, body)
		require.Equal(t, []string{"ReconcileCounts " + tc.code}, st.reads, "%s %s", tc.method, tc.code)
	}
	st.reads = nil
	status, _ := do(s, "GET", "/vouchers/bad%20code/reconciliation", "203.0.113.9:4000", "Bearer adm-1")
	require.Equal(t, 404, status)
	require.Empty(t, st.reads, "a code that cannot exist reads nothing")
}
