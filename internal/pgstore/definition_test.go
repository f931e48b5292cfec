package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// VoucherDefinition answers what Voucher does but the live counts, and
// never reads a redemption: its cost does not grow with the voucher's
// holds (the service's definition cache re-reads it on the reservation
// path, once per TTL, however many holds the voucher has).
func TestVoucherDefinitionReadsNoRedemptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.Postgres(t)
	s, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.NoError(t, s.Migrate(ctx))
	t.Cleanup(func() { checkAllConsistent(t, s) })

	newVoucher(t, s, "DEF", 10, 1, func(v *voucher.Voucher) {
		v.FlashSale = true
		v.Budget = voucher.Budget{Amount: 1_000_000, Clip: true}
		v.Stacking = voucher.Stacking{Stackable: true, ExclusiveGroup: "g"}
	})
	for i := 1; i <= 5; i++ {
		_, err := s.Reserve(ctx, request("DEF", int64(i), fmt.Sprintf("def-%d", i)), now, ttl)
		require.NoError(t, err)
	}
	_, err = s.Confirm(ctx, "DEF", "def-1", now)
	require.NoError(t, err)

	full, err := s.Voucher(ctx, "DEF")
	require.NoError(t, err)
	require.Equal(t, int32(4), full.Reserved)
	require.NotZero(t, full.Budget.Reserved)
	want := full
	want.Reserved, want.Confirmed, want.Budget.Reserved, want.Budget.Confirmed = 0, 0, 0, 0
	def, err := s.VoucherDefinition(ctx, "DEF")
	require.NoError(t, err)
	require.Equal(t, want, def)

	_, err = s.VoucherDefinition(ctx, "NOPE")
	requireCode(t, err, voucher.CodeVoucherNotFound)

	sql, err := os.ReadFile("queries/voucher_definition.sql")
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, pg.URL)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	rows, err := conn.Query(ctx, "EXPLAIN (FORMAT TEXT) "+string(sql), "DEF")
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotContains(t, strings.Join(lines, "\n"), "voucher_redemption", "the definition read reads redemptions")
}
