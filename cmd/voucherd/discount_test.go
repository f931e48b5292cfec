package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/client"
	"github.com/voucherd/voucherd/internal/bench"
)

// A percentage voucher answers, in every mode, the discount computed for
// each order (rounded down, at most the cap, 0 on a tiny order); the
// redemption row stores that amount; replays, the reservation read and the
// listing answer it, also after the voucher's discount was patched.
func TestPercentDiscount(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := fmt.Sprintf("P%d%d", time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
		r := s.do(http.MethodPost, "/vouchers", fmt.Sprintf(`{"code":%q,"discountPercent":12.5,"maxDiscountAmount":40000,
			"totalLimit":10,"perUserLimit":10,"startsAt":%q,"endsAt":%q,"flashSale":%t}`,
			code, time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339), s.opts.flash))
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.Equal(t, 12.5, r.body["discountPercent"])
		require.Equal(t, float64(40000), r.body["maxDiscountAmount"])
		require.NotContains(t, r.body, "discountAmount")

		orders := []struct {
			id            string
			amount, wants int64
		}{
			{"o1", 120_000, 15_000},               // 12.5% exactly
			{"o2", 1_000_000, 40_000},             // capped
			{"o3", 7, 0},                          // rounds down to nothing
			{"o4", 319_999, 39_999},               // 39,999.875 rounded down, just under the cap
			{"o5", 1_000_000_000_000_000, 40_000}, // the largest order
		}
		for _, o := range orders {
			r := s.reserve(code, 1, code+"-"+o.id, o.amount)
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			require.Equal(t, o.wants, r.num("discountAmount"), o.id)
		}
		s.settle(code, len(orders))
		for _, o := range orders {
			var stored int64
			require.NoError(t, s.db.QueryRow(context.Background(),
				`SELECT discount_amount FROM voucher_redemption WHERE order_id = $1`, code+"-"+o.id).Scan(&stored))
			require.Equal(t, o.wants, stored, "the row of %s stores the computed discount", o.id)
		}

		// The discount changes to a fixed amount: orders reserved before keep theirs.
		r = s.do(http.MethodPatch, "/vouchers/"+code, `{"discountAmount":5}`)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, float64(5), r.body["discountAmount"])
		require.NotContains(t, r.body, "discountPercent")
		require.NotContains(t, r.body, "maxDiscountAmount")
		for _, o := range orders {
			r := s.reserve(code, 1, code+"-"+o.id, o.amount)
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			require.Equal(t, o.wants, r.num("discountAmount"), "replay of %s after the patch", o.id)
			r = s.do(http.MethodGet, "/vouchers/"+code+"/reservations/"+code+"-"+o.id, nil)
			require.Equal(t, http.StatusOK, r.status, string(r.raw))
			require.Equal(t, o.wants, r.num("discountAmount"), "read of %s", o.id)
		}
		page := s.doToken(http.MethodGet, "/vouchers/"+code+"/reservations?limit=100", nil, testAdminToken)
		require.Equal(t, http.StatusOK, page.status, string(page.raw))
		listed := map[string]int64{}
		for _, row := range page.body["reservations"].([]any) {
			m := row.(map[string]any)
			listed[m["orderId"].(string)] = int64(m["discountAmount"].(float64))
		}
		for _, o := range orders {
			require.Equal(t, o.wants, listed[code+"-"+o.id], "listing of %s", o.id)
		}

		// New orders get the new discount once every instance has read it
		// (flash modes route from a definition cached for VoucherCacheTTL).
		time.Sleep(s.cfg.VoucherCacheTTL + 100*time.Millisecond)
		r = s.reserve(code, 2, code+"-new", 120_000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.Equal(t, int64(5), r.num("discountAmount"))
		s.settle(code, len(orders)+1)
		s.assertConsistent(code)
	})
}

// The Go client creates and patches a percentage voucher and reads the
// computed discount of a reservation.
func TestClientPercentDiscount(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	ctx := context.Background()
	admin := client.New(s.base, testAdminToken)
	code := fmt.Sprintf("C%d%d", time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
	start := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	v, err := admin.CreateVoucher(ctx, client.Voucher{Code: code, DiscountPercent: 33.33, TotalLimit: 5, PerUserLimit: 5,
		StartsAt: start, EndsAt: start.Add(48 * time.Hour)})
	require.NoError(t, err)
	require.Equal(t, 33.33, v.DiscountPercent)
	require.Zero(t, v.DiscountAmount)
	require.Zero(t, v.MaxDiscountAmount)

	api := client.New(s.base, testAPIToken)
	red, err := api.Reserve(ctx, code, client.ReserveRequest{CustomerID: "1", OrderID: code + "-1", OrderAmount: 300})
	require.NoError(t, err)
	require.Equal(t, int64(99), red.DiscountAmount, "33.33% of 300 is 99.99, rounded down")

	pct, capAmount := 7.5, int64(10)
	v, err = admin.PatchVoucher(ctx, code, client.VoucherPatch{DiscountPercent: &pct, MaxDiscountAmount: &capAmount})
	require.NoError(t, err)
	require.Equal(t, 7.5, v.DiscountPercent)
	require.Equal(t, int64(10), v.MaxDiscountAmount)
	red, err = api.Reserve(ctx, code, client.ReserveRequest{CustomerID: "1", OrderID: code + "-2", OrderAmount: 1000})
	require.NoError(t, err)
	require.Equal(t, int64(10), red.DiscountAmount, "7.5% of 1000 is 75, capped at 10")
	red, err = api.Reserve(ctx, code, client.ReserveRequest{CustomerID: "1", OrderID: code + "-1", OrderAmount: 300})
	require.NoError(t, err)
	require.Equal(t, int64(99), red.DiscountAmount, "a replay answers the original discount")

	_, err = admin.CreateVoucher(ctx, client.Voucher{Code: code + "X", DiscountAmount: 1, DiscountPercent: 5, TotalLimit: 5,
		StartsAt: start, EndsAt: start.Add(48 * time.Hour)})
	var apiErr *client.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusBadRequest, apiErr.Status)
	require.Contains(t, apiErr.Message, "discountAmount and discountPercent exclude each other")
}

// voucherd bench --percent creates percentage vouchers: every reservation it
// makes stores the discount computed for its order amount.
func TestBenchPercentDiscount(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := runBench(ctx, []string{"--url", s.base, "--mode=flash", "--api-token", testAPIToken, "--admin-token", testAdminToken,
		"--percent=12.5", "--max-discount=10000", "--total=20", "--requests=200", "--customers=100", "--concurrency=4",
		"--max-duration=60s", "--database-url", s.cfg.DatabaseURL, "--json", "--quiet"}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	var rep bench.Report
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), stdout.String())
	require.Len(t, rep.Vouchers, 1)
	var pct int32
	var maxDisc int64
	require.NoError(t, s.db.QueryRow(ctx, `SELECT discount_percent_bp, max_discount_amount FROM voucher WHERE code = $1`,
		rep.Vouchers[0]).Scan(&pct, &maxDisc))
	require.Equal(t, int32(1250), pct)
	require.Equal(t, int64(10000), maxDisc)
	var rows, wrong int
	require.NoError(t, s.db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE discount_amount <> 10000)
		FROM voucher_redemption WHERE voucher_code = $1`, rep.Vouchers[0]).Scan(&rows, &wrong))
	require.Equal(t, 20, rows, "the voucher sold out")
	require.Zero(t, wrong, "12.5%% of 100,000 is 12,500, capped at 10,000")
}

// voucherd voucher create and patch take --percent and --max-discount, and
// print the percentage.
func TestCLIPercentDiscount(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	cli := func(args ...string) (string, error) {
		var out, errOut strings.Builder
		args = append(args[:2:2], append([]string{"--url", s.base, "--token", testAdminToken}, args[2:]...)...)
		err := run(t.Context(), args, &out, &errOut)
		return out.String(), err
	}
	code := fmt.Sprintf("L%d%d", time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
	out, err := cli("voucher", "create", "--code", code, "--percent", "12.5", "--max-discount", "40000", "--total", "3")
	require.NoError(t, err)
	require.Contains(t, out, "12.5% of the order amount, at most 40000")
	r := s.reserve(code, 1, code+"-1", 1000)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	require.Equal(t, int64(125), r.num("discountAmount"))

	out, err = cli("voucher", "patch", "--percent", "20", code)
	require.NoError(t, err)
	require.Contains(t, out, "20% of the order amount, at most 40000", "the cap is kept")
	out, err = cli("voucher", "patch", "--discount", "300", code)
	require.NoError(t, err)
	require.Contains(t, out, "discount    300\n")

	_, err = cli("voucher", "create", "--code", code+"X", "--percent", "12.345", "--total", "3")
	require.ErrorContains(t, err, "discountPercent must be a number from 1 to 100 with at most two decimals")
	_, err = cli("voucher", "create", "--code", code+"Y", "--percent", "5", "--discount", "10", "--total", "3")
	require.ErrorContains(t, err, "discountAmount and discountPercent exclude each other")
}

// A fixed discount never exceeds the order amount, in every mode: a
// voucher of 1,000 off on an order of 400 answers 400, the reservation, its
// replay and its validation alike.
func TestFixedDiscountAtMostTheOrderAmount(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := s.createVoucher(voucherSpec{TotalLimit: 5})
		v := s.validate(code, map[string]any{"customerId": 1, "orderAmount": 300})
		require.Equal(t, http.StatusOK, v.status, string(v.raw))
		require.JSONEq(t, `{"valid":true,"discountAmount":300}`, string(v.raw))
		for range 2 {
			r := s.reserve(code, 1, code+"-small", 400)
			require.Contains(t, []int{http.StatusCreated, http.StatusOK}, r.status, string(r.raw))
			require.EqualValues(t, 400, r.num("discountAmount"), string(r.raw))
		}
		r := s.reserve(code, 2, code+"-big", 5000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.EqualValues(t, 1000, r.num("discountAmount"), string(r.raw))
	})
}
