package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Reconciliation's reads: the counters in one statement, a chunk of
// orderIds looked up among one voucher's rows, and the held rows walked in
// pages of one status, each held row once, in (created_at, order_id)
// order, rows sharing a created_at included.
func TestReconcileReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	newVoucher(t, s, "RECON", 20, 20)
	newVoucher(t, s, "OTHER", 20, 20)
	var ids []string
	for i := range 9 {
		id := fmt.Sprintf("r-%d", i)
		ids = append(ids, id)
		// Three rows per instant: the key's order_id breaks the ties.
		_, err := s.Reserve(ctx, request("RECON", 1, id), now.Add(time.Duration(i/3)*time.Second), ttl)
		require.NoError(t, err)
	}
	_, err := s.Reserve(ctx, request("OTHER", 1, "o-1"), now, ttl)
	require.NoError(t, err)
	for _, id := range []string{"r-1", "r-4"} {
		_, err := s.Confirm(ctx, "RECON", id, now)
		require.NoError(t, err)
	}
	_, _, err = s.Release(ctx, "RECON", "r-7", now)
	require.NoError(t, err)

	c, err := s.ReconcileCounts(ctx, "RECON")
	require.NoError(t, err)
	require.Equal(t, voucher.StoreCounts{TotalLimit: 20, Held: 8}, c)
	_, err = s.ReconcileCounts(ctx, "NOPE")
	requireCode(t, err, voucher.CodeVoucherNotFound)

	rows, err := s.RedemptionsAmong(ctx, "RECON", []string{"r-7", "r-1", "o-1", "unknown"})
	require.NoError(t, err)
	status := map[string]voucher.Status{}
	for _, r := range rows {
		status[r.OrderID] = r.Status
		require.Equal(t, "RECON", r.VoucherCode)
	}
	require.Equal(t, map[string]voucher.Status{"r-7": voucher.StatusReleased, "r-1": voucher.StatusConfirmed}, status,
		"any status, only the voucher's rows")

	for _, tc := range []struct {
		st   voucher.Status
		want []string
	}{
		{voucher.StatusReserved, []string{"r-0", "r-2", "r-3", "r-5", "r-6", "r-8"}},
		{voucher.StatusConfirmed, []string{"r-1", "r-4"}},
	} {
		var got []string
		var after voucher.PageKey
		for {
			page, err := s.HeldPage(ctx, "RECON", tc.st, after, 2)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page), 2)
			if len(page) == 0 {
				break
			}
			for _, r := range page {
				require.Equal(t, tc.st, r.Status)
				got = append(got, r.OrderID)
			}
			last := page[len(page)-1]
			after = voucher.PageKey{CreatedAt: last.CreatedAt, OrderID: last.OrderID}
		}
		require.Equal(t, tc.want, got, "%s rows, each once, in order", tc.st)
	}
	_, err = s.HeldPage(ctx, "RECON", voucher.StatusReleased, voucher.PageKey{}, 2)
	require.Error(t, err)
	require.Len(t, ids, 9)
}
