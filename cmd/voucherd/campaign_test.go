package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/client"
	"github.com/voucherd/voucherd/internal/testenv"
)

// createCampaign asks for a campaign over a window around now with the
// members of body (a nil member is left out).
func (s *stack) createCampaign(body map[string]any) response {
	s.t.Helper()
	full := map[string]any{
		"name": "welcome-mail", "discountAmount": 5000, "totalLimit": 10,
		"startsAt": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339),
		"endsAt":   time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339),
	}
	for k, v := range body {
		full[k] = v
		if v == nil {
			delete(full, k)
		}
	}
	return s.doToken(http.MethodPost, "/campaigns", full, testAdminToken)
}

// campaignCodes reads every code of a campaign through the JSON pages.
func (s *stack) campaignCodes(id string, limit int) []string {
	s.t.Helper()
	var codes []string
	after := ""
	for range 100 {
		path := fmt.Sprintf("/campaigns/%s/codes?limit=%d", id, limit)
		if after != "" {
			path += "&after=" + after
		}
		r := s.doToken(http.MethodGet, path, nil, testAdminToken)
		require.Equal(s.t, http.StatusOK, r.status, string(r.raw))
		for _, c := range r.body["codes"].([]any) {
			codes = append(codes, c.(map[string]any)["code"].(string))
		}
		if after = r.str("next"); after == "" {
			return codes
		}
	}
	s.t.Fatal("too many pages")
	return nil
}

func TestCampaignOverHTTP(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})

	// Admin only; bad bodies change nothing.
	r := s.doToken(http.MethodPost, "/campaigns", map[string]any{"name": "x"}, testAPIToken)
	require.Equal(t, http.StatusUnauthorized, r.status)
	for _, bad := range []map[string]any{
		{"codeCount": 100_001}, {"codeLength": 5}, {"codePrefix": "has space"}, {"name": ""},
		{"flashSale": "yes"}, {"code": "X"}, {"totalLimit": 0},
	} {
		r := s.createCampaign(bad)
		require.Equal(t, http.StatusBadRequest, r.status, "%v: %s", bad, r.raw)
	}

	r = s.createCampaign(map[string]any{"codeCount": 1200, "codePrefix": "WELCOME-", "totalLimit": 3, "perUserLimit": 1})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	id := r.str("id")
	require.Equal(t, "/campaigns/"+id, r.header.Get("Location"))
	require.Equal(t, int64(1200), r.num("codeCount"))
	require.Equal(t, int64(3), r.num("remaining"))

	codes := s.campaignCodes(id, 500)
	require.Len(t, codes, 1200)
	seen := map[string]bool{}
	for _, c := range codes {
		require.Regexp(t, `^WELCOME-[0-9A-HJKMNP-TV-Z]{10}$`, c)
		require.False(t, seen[c])
		seen[c] = true
	}

	// Reservations through the voucher routes: one code once, the budget
	// and the per-customer limit across codes.
	res := s.reserve(codes[0], 1, "c-1", 100_000)
	require.Equal(t, http.StatusCreated, res.status, string(res.raw))
	require.Equal(t, int64(5000), res.num("discountAmount"))
	res = s.reserve(codes[0], 1, "c-1", 100_000)
	require.Equal(t, http.StatusCreated, res.status, "a replay")
	v := s.validate(codes[0], map[string]any{"customerId": 2, "orderAmount": 100_000})
	require.Equal(t, http.StatusOK, v.status, string(v.raw))
	require.Equal(t, false, v.body["valid"])
	require.Equal(t, "ALREADY_USED", v.str("code"))
	v = s.validate(codes[1], map[string]any{"customerId": 2, "orderAmount": 100_000})
	require.Equal(t, true, v.body["valid"], string(v.raw))
	require.Equal(t, int64(5000), v.num("discountAmount"))
	res = s.reserve(codes[0], 2, "c-2", 100_000)
	require.Equal(t, http.StatusConflict, res.status)
	require.Equal(t, "ALREADY_USED", res.str("error"))
	require.Equal(t, "CODE_USED", res.str("reason"))
	res = s.reserve(codes[1], 1, "c-3", 100_000)
	require.Equal(t, http.StatusConflict, res.status)
	require.Equal(t, "ALREADY_USED", res.str("error"))
	require.Empty(t, res.str("reason"), "the customer's limit, not the code")
	require.Equal(t, http.StatusCreated, s.reserve(codes[1], 2, "c-4", 100_000).status)
	require.Equal(t, http.StatusCreated, s.reserve(codes[2], 3, "c-5", 100_000).status)
	res = s.reserve(codes[3], 4, "c-6", 100_000)
	require.Equal(t, http.StatusConflict, res.status)
	require.Equal(t, "HELD_OUT", res.str("error"))

	// Lifecycle by the code.
	require.Equal(t, http.StatusOK, s.do(http.MethodPost, "/vouchers/"+codes[0]+"/reservations/c-1/confirm", nil).status)
	got := s.do(http.MethodGet, "/vouchers/"+codes[0]+"/reservations/c-1", nil)
	require.Equal(t, http.StatusOK, got.status)
	require.Equal(t, codes[0], got.str("voucherCode"))
	require.Equal(t, "CONFIRMED", got.str("status"))
	require.Equal(t, http.StatusOK, s.do(http.MethodDelete, "/vouchers/"+codes[1]+"/reservations/c-4", nil).status)
	require.Equal(t, http.StatusCreated, s.reserve(codes[1], 5, "c-7", 100_000).status, "a released code is free again")

	c := s.doToken(http.MethodGet, "/campaigns/"+id, nil, testAdminToken)
	require.Equal(t, http.StatusOK, c.status)
	require.Equal(t, [3]int64{2, 1, 0}, [3]int64{c.num("reserved"), c.num("confirmed"), c.num("remaining")})
	require.Equal(t, http.StatusNotFound, s.doToken(http.MethodGet, "/campaigns/cmp_NOPE", nil, testAdminToken).status)
	require.Equal(t, http.StatusNotFound, s.reserve(id, 9, "c-8", 100_000).status, "the budget is not a code")

	// More codes, then the CSV export of all of them.
	more := s.doToken(http.MethodPost, "/campaigns/"+id+"/codes", map[string]any{"count": 300}, testAdminToken)
	require.Equal(t, http.StatusCreated, more.status, string(more.raw))
	require.Equal(t, int64(1500), more.num("codeCount"))
	require.Equal(t, http.StatusBadRequest,
		s.doToken(http.MethodPost, "/campaigns/"+id+"/codes", map[string]any{"count": 0}, testAdminToken).status)

	req, err := http.NewRequest(http.MethodGet, s.base+"/campaigns/"+id+"/codes", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	req.Header.Set("Accept", "text/csv")
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	checkAgainstOpenAPI(t, req, resp.StatusCode, resp.Header, raw)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv"))
	rows, err := csv.NewReader(strings.NewReader(string(raw))).ReadAll()
	require.NoError(t, err)
	require.Equal(t, []string{"code", "used"}, rows[0])
	require.Len(t, rows, 1501)
	used := map[string]bool{}
	for _, row := range rows[1:] {
		if row[1] == "true" {
			used[row[0]] = true
		}
	}
	require.Equal(t, map[string]bool{codes[0]: true, codes[1]: true, codes[2]: true}, used)
	s.assertConsistent(id)

	// A percentage campaign answers the discount of each order.
	r = s.createCampaign(map[string]any{"discountAmount": nil, "discountPercent": 12.5, "maxDiscountAmount": 20_000, "codeCount": 2})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	require.Equal(t, 12.5, r.body["discountPercent"])
	pct := s.campaignCodes(r.str("id"), 10)
	res = s.reserve(pct[0], 1, "p-1", 100_000)
	require.Equal(t, http.StatusCreated, res.status, string(res.raw))
	require.Equal(t, int64(12_500), res.num("discountAmount"))
	res = s.reserve(pct[1], 2, "p-2", 1_000_000)
	require.Equal(t, int64(20_000), res.num("discountAmount"), "capped")
	require.Equal(t, http.StatusBadRequest, s.createCampaign(map[string]any{"discountPercent": 10}).status, "two discounts")
}

// TestCampaignSaleNeverOversells runs many customers over many codes of
// one campaign at once: the budget is sold whole and never more, each
// code at most once, each customer within the limit.
func TestCampaignSaleNeverOversells(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	r := s.createCampaign(map[string]any{"codeCount": 300, "totalLimit": 50, "perUserLimit": 2})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	id := r.str("id")
	codes := s.campaignCodes(id, 1000)

	var taken atomic.Int64
	statuses := make([]int, 400)
	parallel(400, 32, func(i int) {
		res := s.reserve(codes[i%len(codes)], int64(i%60+1), fmt.Sprintf("sale-%d", i), 100_000)
		statuses[i] = res.status
		if res.status == http.StatusCreated {
			taken.Add(1)
		}
	})
	for _, st := range statuses {
		require.Contains(t, []int{http.StatusCreated, http.StatusConflict}, st)
	}
	require.Equal(t, int64(50), taken.Load())
	c := s.doToken(http.MethodGet, "/campaigns/"+id, nil, testAdminToken)
	require.Equal(t, int64(0), c.num("remaining"))
	s.assertConsistent(id)
}

// TestCampaignReplacementOfAConfirmedOrder is docs/faults.md finding 15:
// a replacement naming the customer's CONFIRMED order and presenting a code
// another order holds is REPLACED_ORDER_NOT_HELD in every mode, as
// voucherd_replace answers it (the replaced order is checked before the
// code). In flash-sync mode the gate does not know confirmations, found
// the code held and answered ALREADY_USED/CODE_USED.
func TestCampaignReplacementOfAConfirmedOrder(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, m.opts)
			r := s.createCampaign(map[string]any{"codeCount": 5, "totalLimit": 5, "perUserLimit": 1, "flashSale": m.opts.flash})
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			id := r.str("id")
			codes := s.campaignCodes(id, 100)
			require.Equal(t, http.StatusCreated, s.reserve(codes[0], 1, "p-1", 100_000).status)
			require.Equal(t, http.StatusCreated, s.reserve(codes[1], 2, "p-2", 100_000).status)
			s.settle(id, 2)
			s.confirmEventually(codes[0], "p-1")
			res := s.replace(codes[1], 1, "p-3", "p-1", 100_000)
			require.Equal(t, http.StatusConflict, res.status, string(res.raw))
			require.Equal(t, "REPLACED_ORDER_NOT_HELD", res.str("error"), string(res.raw))
			res = s.replace(codes[2], 1, "p-4", "p-1", 100_000)
			require.Equal(t, http.StatusConflict, res.status, string(res.raw))
			require.Equal(t, "REPLACED_ORDER_NOT_HELD", res.str("error"), "a free code: %s", res.raw)
			res = s.replace(codes[0], 2, "p-5", "p-2", 100_000)
			require.Equal(t, http.StatusConflict, res.status, string(res.raw))
			require.Equal(t, "ALREADY_USED", res.str("error"), string(res.raw))
			require.Equal(t, "CODE_USED", res.str("reason"), "the customer's hold, a code the confirmed order holds")
		})
	}
}

// TestCampaignFlash runs a flash campaign in both flash write modes: the
// answers of a standard campaign (a code once, replay, ORDER_CONFLICT for
// an orderId asked with another code, the budget and the per-customer limit
// across codes, validation, confirm and release by the code), with the
// codes in use held in Redis under the budget's keys; a load from
// PostgreSQL rebuilds them.
func TestCampaignFlash(t *testing.T) {
	t.Parallel()
	for _, m := range modes[1:] {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := newStack(t, m.opts)
			r := s.createCampaign(map[string]any{"codeCount": 20, "totalLimit": 3, "perUserLimit": 1, "flashSale": true})
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			require.Equal(t, true, r.body["flashSale"])
			id := r.str("id")
			codes := s.campaignCodes(id, 100)
			gs, err := s.app.gate.Inspect(ctx, id)
			require.NoError(t, err)
			require.True(t, gs.Loaded, "loaded when created")
			require.Empty(t, gs.Codes)

			res := s.reserve(codes[0], 1, "c-1", 100_000)
			require.Equal(t, http.StatusCreated, res.status, string(res.raw))
			require.Equal(t, int64(5000), res.num("discountAmount"))
			res = s.reserve(codes[0], 1, "c-1", 100_000)
			require.Equal(t, http.StatusCreated, res.status, "a replay: %s", res.raw)
			res = s.reserve(codes[5], 1, "c-1", 100_000)
			require.Equal(t, http.StatusConflict, res.status)
			require.Equal(t, "ORDER_CONFLICT", res.str("error"), "an orderId asked with another code")
			v := s.validate(codes[0], map[string]any{"customerId": 2, "orderAmount": 100_000})
			require.Equal(t, http.StatusOK, v.status, string(v.raw))
			require.Equal(t, "ALREADY_USED", v.str("code"))
			require.Equal(t, "CODE_USED", v.str("reason"))
			v = s.validate(codes[1], map[string]any{"customerId": 2, "orderAmount": 100_000})
			require.Equal(t, true, v.body["valid"], string(v.raw))
			res = s.reserve(codes[0], 2, "c-2", 100_000)
			require.Equal(t, http.StatusConflict, res.status)
			require.Equal(t, "ALREADY_USED", res.str("error"))
			require.Equal(t, "CODE_USED", res.str("reason"))
			res = s.reserve(codes[1], 1, "c-3", 100_000)
			require.Equal(t, http.StatusConflict, res.status)
			require.Equal(t, "ALREADY_USED", res.str("error"))
			require.Empty(t, res.str("reason"), "the customer's limit, not the code")
			require.Equal(t, http.StatusCreated, s.reserve(codes[1], 2, "c-4", 100_000).status)
			require.Equal(t, http.StatusCreated, s.reserve(codes[2], 3, "c-5", 100_000).status)
			res = s.reserve(codes[3], 4, "c-6", 100_000)
			require.Equal(t, http.StatusConflict, res.status)
			require.Equal(t, "HELD_OUT", res.str("error"), string(res.raw))
			require.Equal(t, http.StatusNotFound, s.reserve(id, 9, "c-8", 100_000).status, "the budget is not a code")

			// Lifecycle by the code: confirm, read, release (the code and
			// the use come free).
			require.Equal(t, http.StatusOK, s.do(http.MethodPost, "/vouchers/"+codes[0]+"/reservations/c-1/confirm", nil).status)
			got := s.do(http.MethodGet, "/vouchers/"+codes[0]+"/reservations/c-1", nil)
			require.Equal(t, http.StatusOK, got.status)
			require.Equal(t, codes[0], got.str("voucherCode"))
			require.Equal(t, "CONFIRMED", got.str("status"))
			rel := s.do(http.MethodDelete, "/vouchers/"+codes[1]+"/reservations/c-4", nil)
			require.Equal(t, http.StatusOK, rel.status, string(rel.raw))
			res = s.reserve(codes[1], 5, "c-7", 100_000)
			require.Equal(t, http.StatusCreated, res.status, "a released code is free again: %s", res.raw)
			// A retry after a failed payment takes the use and the code over.
			res = s.replace(codes[2], 3, "c-5b", "c-5", 100_000)
			require.Equal(t, http.StatusCreated, res.status, string(res.raw))
			got = s.do(http.MethodGet, "/vouchers/"+codes[2]+"/reservations/c-5b", nil)
			require.Equal(t, http.StatusOK, got.status, string(got.raw))
			require.Equal(t, codes[2], got.str("voucherCode"))
			require.Equal(t, "RESERVED", got.str("status"))
			// In Kafka mode the extension may come before the consumer wrote
			// the replacement: 503, retry.
			var ext response
			require.Eventually(t, func() bool {
				ext = s.extend(codes[2], "c-5b", map[string]any{"seconds": 1800})
				return ext.status != http.StatusServiceUnavailable
			}, 10*time.Second, 50*time.Millisecond)
			require.Equal(t, http.StatusOK, ext.status, string(ext.raw))
			until, err := time.Parse(time.RFC3339Nano, ext.str("expiresAt"))
			require.NoError(t, err)
			require.WithinDuration(t, time.Now().Add(30*time.Minute), until, time.Minute)
			h, found, err := s.app.gate.Lookup(ctx, id, "c-5b")
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, codes[2], h.Code)
			require.True(t, until.Equal(h.ExpiresAt), "the gate's hold extended: %s, %s", until, h.ExpiresAt)
			s.settle(id, 3)
			gs, err = s.app.gate.Inspect(ctx, id)
			require.NoError(t, err)
			require.Equal(t, map[string]string{codes[0]: "c-1", codes[1]: "c-7", codes[2]: "c-5b"}, gs.Codes)
			s.assertConsistent(id)

			// Redis loses the campaign: the next reservation loads it from
			// PostgreSQL, codes in use included.
			require.NoError(t, s.app.gate.Forget(ctx, id))
			res = s.reserve(codes[2], 6, "c-9", 100_000)
			require.Equal(t, http.StatusConflict, res.status, string(res.raw))
			require.Equal(t, "CODE_USED", res.str("reason"))
			gs, err = s.app.gate.Inspect(ctx, id)
			require.NoError(t, err)
			require.Equal(t, map[string]string{codes[0]: "c-1", codes[1]: "c-7", codes[2]: "c-5b"}, gs.Codes)
			s.assertConsistentAfterReconcile(id)

			// A standard campaign made a flash sale by PATCH: the gate loads
			// its budget with the codes its reservations hold.
			r = s.createCampaign(map[string]any{"codeCount": 3, "totalLimit": 3, "perUserLimit": 1})
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			pid := r.str("id")
			pcodes := s.campaignCodes(pid, 10)
			require.Equal(t, http.StatusCreated, s.reserve(pcodes[0], 1, "p-1", 100_000).status)
			patch := s.doToken(http.MethodPatch, "/vouchers/"+pid, map[string]any{"flashSale": true}, testAdminToken)
			require.Equal(t, http.StatusOK, patch.status, string(patch.raw))
			res = s.reserve(pcodes[0], 2, "p-2", 100_000)
			require.Equal(t, "CODE_USED", res.str("reason"), string(res.raw))
			require.Equal(t, http.StatusCreated, s.reserve(pcodes[1], 2, "p-3", 100_000).status)
			s.settle(pid, 2)
			gs, err = s.app.gate.Inspect(ctx, pid)
			require.NoError(t, err)
			require.Equal(t, map[string]string{pcodes[0]: "p-1", pcodes[1]: "p-3"}, gs.Codes)
			s.assertConsistent(pid)
		})
	}
}

// TestCampaignFlashExpiry lets a flash campaign's reservation expire, in
// both flash write modes: the expiry job frees its code and its use in
// PostgreSQL and in Redis, the orderId stays released, and the code takes
// a new order.
func TestCampaignFlashExpiry(t *testing.T) {
	t.Parallel()
	for _, m := range modes[1:] {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			opts := m.opts
			// Long enough for the CODE_USED below to come before the expiry
			// on a loaded machine.
			opts.ttl = 3 * time.Second
			s := newStack(t, opts)
			r := s.createCampaign(map[string]any{"codeCount": 5, "totalLimit": 1, "perUserLimit": 1, "flashSale": true})
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			id := r.str("id")
			codes := s.campaignCodes(id, 10)
			require.Equal(t, http.StatusCreated, s.reserve(codes[0], 1, "x-1", 100_000).status)
			require.Equal(t, "CODE_USED", s.reserve(codes[0], 2, "x-2", 100_000).str("reason"))

			require.Eventually(t, func() bool { return s.state(id).released == 1 }, 10*time.Second, 50*time.Millisecond)
			require.Equal(t, "ORDER_RELEASED", s.reserve(codes[0], 1, "x-1", 100_000).str("error"))
			// The code and the use came back (after the sold-out cache's TTL).
			require.Eventually(t, func() bool {
				return s.reserve(codes[0], 2, "x-2", 100_000).status == http.StatusCreated
			}, 5*time.Second, 100*time.Millisecond)
			s.settle(id, 1)
			s.assertConsistent(id)
		})
	}
}

// TestCampaignFlashSaleNeverOversells runs many customers over many codes
// of one flash campaign at once, in both flash write modes: the budget is
// sold whole and never more, each code at most once (PostgreSQL and Redis),
// each customer within the limit.
func TestCampaignFlashSaleNeverOversells(t *testing.T) {
	t.Parallel()
	for _, m := range modes[1:] {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, m.opts)
			r := s.createCampaign(map[string]any{"codeCount": 300, "totalLimit": 50, "perUserLimit": 2, "flashSale": true})
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			id := r.str("id")
			codes := s.campaignCodes(id, 1000)

			var taken atomic.Int64
			statuses := make([]int, 400)
			parallel(400, 32, func(i int) {
				res := s.reserve(codes[i%len(codes)], int64(i%60+1), fmt.Sprintf("sale-%d", i), 100_000)
				statuses[i] = res.status
				if res.status == http.StatusCreated {
					taken.Add(1)
				}
			})
			for _, st := range statuses {
				require.Contains(t, []int{http.StatusCreated, http.StatusConflict}, st)
			}
			require.Equal(t, int64(50), taken.Load())
			s.settle(id, 50)
			c := s.doToken(http.MethodGet, "/campaigns/"+id, nil, testAdminToken)
			require.Equal(t, int64(0), c.num("remaining"))
			gs, err := s.app.gate.Inspect(context.Background(), id)
			require.NoError(t, err)
			require.Len(t, gs.Codes, 50, "one code per use in Redis")
			s.assertConsistent(id)
		})
	}
}

// TestCampaignCommand creates a campaign with the CLI, which shows its
// progress, and exports its codes as CSV.
func TestCampaignCommand(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	cli := func(args ...string) (string, string) {
		var out, errOut bytes.Buffer
		args = append(append(args[:1:1], "--url", s.base, "--token", testAdminToken), args[1:]...)
		require.NoError(t, run(t.Context(), append([]string{"campaign"}, args...), &out, &errOut), errOut.String())
		return out.String(), errOut.String()
	}
	out, progress := cli("create", "--json", "--name", "cli", "--codes", "25000", "--prefix", "CLI-",
		"--discount", "500", "--total", "100")
	require.Contains(t, progress, "codes: 10000/25000 (40%)")
	require.Contains(t, progress, "codes: 25000/25000 (100%)")
	var c client.Campaign
	require.NoError(t, json.Unmarshal([]byte(out), &c))
	require.Equal(t, int32(25000), c.CodeCount)

	out, _ = cli("add-codes", "--codes", "10", c.ID)
	require.Regexp(t, `codes +25010 \(CLI- \+ 10 characters\)`, out)
	out, _ = cli("codes", c.ID)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Equal(t, "code,used", lines[0])
	require.Len(t, lines, 25011)
	require.Regexp(t, `^CLI-[0-9A-HJKMNP-TV-Z]{10},false$`, lines[1])

	out, _ = cli("create", "--name", "cli-flash", "--codes", "3", "--discount", "500", "--total", "2", "--flash")
	require.Regexp(t, `flash sale +true`, out)
}

// TestCampaignFlashKafkaThroughPostgresOutage stops PostgreSQL under a
// flash campaign in Kafka mode: a code the instance resolved before still
// reserves (its campaign remembered, its budget served from the cache), a
// held code is still CODE_USED, a code never seen is 503 with nothing
// taken; once PostgreSQL is back the consumer writes what was taken.
func TestCampaignFlashKafkaThroughPostgresOutage(t *testing.T) {
	t.Parallel()
	srv := testenv.NewPostgres(t)
	s := newStack(t, stackOptions{kafka: true, databaseURL: srv.NewDatabase(t).URL})
	r := s.createCampaign(map[string]any{"codeCount": 5, "totalLimit": 10, "perUserLimit": 1, "flashSale": true})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	id := r.str("id")
	codes := s.campaignCodes(id, 10)
	require.Equal(t, http.StatusCreated, s.reserve(codes[0], 1, "po-1", 100_000).status)
	require.Equal(t, http.StatusCreated, s.reserve(codes[1], 2, "po-2", 100_000).status)
	rel := s.do(http.MethodDelete, "/vouchers/"+codes[1]+"/reservations/po-2", nil)
	require.Equal(t, http.StatusOK, rel.status, string(rel.raw))
	s.settle(id, 1)

	srv.Stop(t)
	res := s.reserve(codes[1], 3, "po-3", 100_000)
	require.Equal(t, http.StatusCreated, res.status, "a code seen before: %s", res.raw)
	res = s.reserve(codes[0], 4, "po-4", 100_000)
	require.Equal(t, http.StatusConflict, res.status, string(res.raw))
	require.Equal(t, "CODE_USED", res.str("reason"))
	res = s.reserve(codes[2], 5, "po-5", 100_000)
	require.Equal(t, http.StatusServiceUnavailable, res.status, "a code never seen: %s", res.raw)
	srv.Start(t)
	// The test's own pool drops the connections the restart broke.
	require.Eventually(t, func() bool {
		_, err := s.db.Exec(context.Background(), "SELECT 1")
		return err == nil
	}, 30*time.Second, 100*time.Millisecond)

	s.settle(id, 2)
	require.Equal(t, http.StatusCreated, s.reserve(codes[2], 5, "po-5", 100_000).status, "nothing was taken for it")
	s.settle(id, 3)
	s.assertConsistent(id)
}
