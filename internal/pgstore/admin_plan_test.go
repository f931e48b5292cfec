package pgstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/voucher"
)

// listingCase is one listing whose page plan is checked or measured.
type listingCase struct {
	name       string
	vouchers   *voucher.VoucherFilter
	redemption *voucher.RedemptionFilter
}

// listingCases covers every listing and filter, with codes and customers of
// the benchmark's data set (admin_bench_test.go).
func listingCases() []listingCase {
	yes := true
	v := func(name string, f voucher.VoucherFilter) listingCase {
		f.Limit = 100
		return listingCase{name: name, vouchers: &f}
	}
	r := func(name string, f voucher.RedemptionFilter) listingCase {
		f.Limit = 100
		return listingCase{name: name, redemption: &f}
	}
	return []listingCase{
		v("vouchers", voucher.VoucherFilter{}),
		v("vouchers-active", voucher.VoucherFilter{State: voucher.StateActive}),
		v("vouchers-scheduled", voucher.VoucherFilter{State: voucher.StateScheduled}),
		v("vouchers-ended", voucher.VoucherFilter{State: voucher.StateEnded}),
		v("vouchers-disabled", voucher.VoucherFilter{State: voucher.StateDisabled}),
		v("vouchers-flash", voucher.VoucherFilter{FlashSale: &yes}),
		v("vouchers-prefix", voucher.VoucherFilter{CodePrefix: "V01"}),
		r("reservations", voucher.RedemptionFilter{Code: hotVoucher}),
		r("reservations-confirmed", voucher.RedemptionFilter{Code: hotVoucher, Status: voucher.StatusConfirmed}),
		r("reservations-customer", voucher.RedemptionFilter{Code: hotVoucher, CustomerID: strconv.Itoa(hotCustomer)}),
		r("customer-redemptions", voucher.RedemptionFilter{CustomerID: strconv.Itoa(hotCustomer)}),
	}
}

// plan returns PostgreSQL's plan of the first page of c, with sequential
// scans, bitmap scans and sorts priced out: if no index gives the order, the
// plan still sorts.
func plan(t testing.TB, s *pgstore.Store, c listingCase, now time.Time) string {
	t.Helper()
	var q string
	var args []any
	var err error
	if c.vouchers != nil {
		q, args, err = pgstore.VoucherPageQuery(*c.vouchers, now)
	} else {
		q, args, err = pgstore.RedemptionPageQuery(*c.redemption)
	}
	require.NoError(t, err)
	var lines []string
	err = pgx.BeginFunc(context.Background(), s.Pool(), func(tx pgx.Tx) error {
		for _, set := range []string{"enable_seqscan", "enable_bitmapscan", "enable_sort"} {
			if _, err := tx.Exec(context.Background(), "SET LOCAL "+set+" = off"); err != nil {
				return err
			}
		}
		rows, err := tx.Query(context.Background(), "EXPLAIN "+q, args...)
		if err != nil {
			return err
		}
		lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// Every page is read in the listing's order from an index: no plan sorts or
// scans a table.
func TestListingsAreIndexBacked(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	newVoucher(t, s, hotVoucher, 10, 1)
	for _, c := range listingCases() {
		p := plan(t, s, c, now)
		require.NotContains(t, p, "Sort", "%s:\n%s", c.name, p)
		require.NotContains(t, p, "Seq Scan", "%s:\n%s", c.name, p)
		require.Contains(t, p, "Index", "%s:\n%s", c.name, p)
	}
}
