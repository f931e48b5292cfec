package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
)

// Violations finds each kind of breach of the stored counters, for the
// vouchers asked about only, and nothing in a consistent state.
func TestViolations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
	newVoucher(t, s, "INV", 3, 2)
	newVoucher(t, s, "CLEAN", 3, 1)
	for i, c := range []int64{1, 1, 2} {
		_, err := s.Reserve(ctx, request("INV", c, "inv-"+string(rune('a'+i))), now, ttl)
		require.NoError(t, err)
	}
	_, err := s.Reserve(ctx, request("CLEAN", 1, "clean-a"), now, ttl)
	require.NoError(t, err)
	bad, err := pgstore.Violations(ctx, s.Pool())
	require.NoError(t, err)
	require.Empty(t, bad)

	kinds := func(codes ...string) []string {
		bad, err := pgstore.Violations(ctx, s.Pool(), codes...)
		require.NoError(t, err)
		var out []string
		for _, b := range bad {
			out = append(out, b.Kind+" "+b.Voucher)
		}
		return out
	}
	exec := func(sql string) {
		_, err := s.Pool().Exec(ctx, sql)
		require.NoError(t, err)
	}
	exec(`UPDATE voucher SET used_count = 2 WHERE code = 'INV'`)
	require.Equal(t, []string{"used_count INV"}, kinds("INV"))
	require.Empty(t, kinds("CLEAN"), "only the vouchers asked about")
	exec(`UPDATE voucher SET used_count = 3 WHERE code = 'INV'`)

	exec(`UPDATE voucher_customer_usage SET held = 0 WHERE voucher_code = 'INV' AND customer = '2'`)
	exec(`UPDATE voucher_customer_usage SET held = 1 WHERE voucher_code = 'INV' AND customer = '1'`)
	require.Equal(t, []string{"customer usage INV", "customer usage INV"}, kinds("INV"))
	exec(`DELETE FROM voucher_customer_usage WHERE voucher_code = 'INV' AND customer = '2'`)
	require.Equal(t, []string{"customer usage INV", "customer usage INV"}, kinds("INV"), "a missing counter too")
	exec(`INSERT INTO voucher_customer_usage (voucher_code, customer, customer_id, held) VALUES ('INV', '2', 2, 1)`)
	exec(`UPDATE voucher_customer_usage SET held = 2 WHERE voucher_code = 'INV' AND customer = '1'`)

	// The CHECK constraints keep the counters within the limits, so the
	// limits are lowered under the rows.
	exec(`ALTER TABLE voucher DROP CONSTRAINT voucher_used_count_le_total_limit`)
	exec(`UPDATE voucher SET total_limit = 2, per_user_limit = 1 WHERE code = 'INV'`)
	require.Equal(t, []string{"oversell INV", "per-user limit INV"}, kinds())
	exec(`UPDATE voucher SET total_limit = 3, per_user_limit = 2 WHERE code = 'INV'`)
	exec(`ALTER TABLE voucher ADD CONSTRAINT voucher_used_count_le_total_limit CHECK (used_count <= total_limit)`)
	require.Empty(t, kinds())
}
