package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scrape reads /metrics as a map from series (name and labels as
// written) to value.
func (s *stack) scrape() map[string]float64 {
	s.t.Helper()
	r := s.do(http.MethodGet, "/metrics", nil)
	require.Equal(s.t, http.StatusOK, r.status)
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(r.raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(s.t, err, line)
		out[line[:i]] = v
	}
	return out
}

// Every refusal of a reservation or validation is counted by its reason,
// in every mode: unknown codes (404), customers blocked for guessing
// (429), a voucher past its window (EXPIRED), a campaign code another
// order holds (CODE_USED).
func TestRefusalsCountedByReason(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			opts := m.opts
			opts.tweak = func(c *Config) { c.UnknownCodeLimit = 2 }
			refusalsCountedByReason(t, newStack(t, opts))
		})
	}
}

func refusalsCountedByReason(t *testing.T, s *stack) {
	ended := s.createEndedVoucher()
	open := s.createVoucher(voucherSpec{TotalLimit: 10})
	c := s.createCampaign(map[string]any{"codeCount": 2, "codePrefix": "R-"})
	require.Equal(t, http.StatusCreated, c.status, string(c.raw))
	codes := s.campaignCodes(c.str("id"), 10)

	for i := range 2 {
		r := s.reserve(fmt.Sprintf("R-NOPE%d", i), 5, fmt.Sprintf("u-%d", i), 5000)
		require.Equal(t, http.StatusNotFound, r.status, string(r.raw))
	}
	v := s.validate("R-NOPE9", map[string]any{"customerId": 5, "orderAmount": 5000})
	require.Equal(t, http.StatusNotFound, v.status, string(v.raw))
	r := s.reserve(open, 5, "u-blocked", 5000)
	require.Equal(t, http.StatusTooManyRequests, r.status, string(r.raw))
	v = s.validate(open, map[string]any{"customerId": 5, "orderAmount": 5000})
	require.Equal(t, http.StatusTooManyRequests, v.status, string(v.raw))

	r = s.reserve(ended, 6, "u-ended", 5000)
	require.Equal(t, "EXPIRED", r.str("reason"), string(r.raw))
	v = s.validate(ended, map[string]any{"customerId": 6, "orderAmount": 5000})
	require.Equal(t, "EXPIRED", v.str("reason"), string(v.raw))

	require.Equal(t, http.StatusCreated, s.reserve(codes[0], 7, "u-code", 5000).status)
	r = s.reserve(codes[0], 8, "u-code-2", 5000)
	require.Equal(t, "CODE_USED", r.str("reason"), string(r.raw))
	v = s.validate(codes[0], map[string]any{"customerId": 8, "orderAmount": 5000})
	require.Equal(t, "CODE_USED", v.str("reason"), string(v.raw))

	m := s.scrape()
	for series, want := range map[string]float64{
		`voucherd_refusals_total{op="reservation",reason="VOUCHER_NOT_FOUND"}`: 2,
		`voucherd_refusals_total{op="validation",reason="VOUCHER_NOT_FOUND"}`:  1,
		`voucherd_refusals_total{op="reservation",reason="TOO_MANY_REQUESTS"}`: 1,
		`voucherd_refusals_total{op="validation",reason="TOO_MANY_REQUESTS"}`:  1,
		`voucherd_refusals_total{op="reservation",reason="EXPIRED"}`:           1,
		`voucherd_refusals_total{op="validation",reason="EXPIRED"}`:            1,
		`voucherd_refusals_total{op="reservation",reason="CODE_USED"}`:         1,
		`voucherd_refusals_total{op="validation",reason="CODE_USED"}`:          1,
		`voucherd_validations_total{outcome="VOUCHER_NOT_FOUND"}`:              1,
		`voucherd_validations_total{outcome="TOO_MANY_REQUESTS"}`:              1,
		`voucherd_validations_total{outcome="EXPIRED"}`:                        1,
		`voucherd_validations_total{outcome="CODE_USED"}`:                      1,
		`voucherd_unknown_code_lookups_total{key="api"}`:                       3,
		`voucherd_guess_refusals_total{key="api"}`:                             2,
	} {
		require.Equal(t, want, m[series], series)
	}
	// The reservations' own counter by path and code, as before.
	var notFound, tooMany float64
	for series, n := range m {
		if strings.HasPrefix(series, "voucherd_reservations_total{") {
			switch {
			case strings.Contains(series, `outcome="VOUCHER_NOT_FOUND"`):
				notFound += n
			case strings.Contains(series, `outcome="TOO_MANY_REQUESTS"`):
				tooMany += n
			}
		}
	}
	require.Equal(t, 2.0, notFound)
	require.Equal(t, 1.0, tooMany)
}

// The guess limit counts the spellings of one mailbox as one customer,
// although an unknown code has no voucher to normalise them; the ids
// stored and answered stay as sent (the voucher's normalisation is none).
func TestGuessLimitFoldsEmailSpellings(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{tweak: func(c *Config) { c.UnknownCodeLimit = 2 }})
	code := s.createVoucher(voucherSpec{TotalLimit: 10})
	reserve := func(code, customer, order string) response {
		return s.do(http.MethodPost, "/vouchers/"+code+"/reservations",
			map[string]any{"customerId": customer, "orderId": order, "orderAmount": 5000})
	}
	for i, id := range []string{"Jane+1@x.com", "jane+2@x.com", "JANE@X.COM"} {
		r := reserve("NOPE", id, fmt.Sprint("f-", i))
		require.Equal(t, http.StatusNotFound, r.status, string(r.raw))
	}
	r := reserve(code, "j.ane+shop@x.com", "f-dots")
	require.Equal(t, http.StatusCreated, r.status, "dots count outside gmail.com: another mailbox: %s", r.raw)
	var stored string
	require.NoError(t, s.db.QueryRow(t.Context(), `SELECT customer FROM voucher_redemption WHERE order_id = 'f-dots'`).Scan(&stored))
	require.Equal(t, "j.ane+shop@x.com", stored, "stored as sent")
	r = reserve(code, "jane+shop@x.com", "f-blocked")
	require.Equal(t, http.StatusTooManyRequests, r.status, string(r.raw))
	require.NotEmpty(t, r.header.Get("Retry-After"))
	r = reserve(code, "john@x.com", "f-john")
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
}

// A reservation or validation of an unknown code costs one PostgreSQL
// statement, and the refusals of known codes it could be compared with
// cost the same one: a campaign code another order holds, a code of a
// disabled campaign, a voucher past its window (refused by its cached
// definition). A campaign code taken costs one more, the reservation's
// write (a validation's read).
func TestCodeLookupsCostOneStatement(t *testing.T) {
	t.Parallel()
	// Definitions stay cached for the whole test, as within a second.
	s := newStack(t, stackOptions{tweak: func(c *Config) { c.UnknownCodeLimit, c.VoucherCacheTTL = -1, time.Hour }})
	c := s.createCampaign(map[string]any{"codeCount": 3, "codePrefix": "S-"})
	require.Equal(t, http.StatusCreated, c.status, string(c.raw))
	codes := s.campaignCodes(c.str("id"), 10)
	require.Equal(t, http.StatusCreated, s.reserve(codes[0], 1, "s-holder", 5000).status)
	off := s.createCampaign(map[string]any{"codeCount": 1, "codePrefix": "S-"})
	offCode := s.campaignCodes(off.str("id"), 10)[0]
	require.Equal(t, http.StatusOK, s.do(http.MethodPatch, "/vouchers/"+off.str("id"), map[string]any{"active": false}).status)
	ended := s.createEndedVoucher()
	require.Equal(t, http.StatusUnprocessableEntity, s.reserve(ended, 1, "s-warm", 5000).status, "caches the definition")

	// statements sums the request path's PostgreSQL calls by operation.
	statements := func() map[string]float64 {
		out := map[string]float64{}
		for series, n := range s.scrape() {
			const prefix = `voucherd_dependency_duration_seconds_count{dependency="postgres",op="`
			if op, ok := strings.CutPrefix(series, prefix); ok && !strings.HasPrefix(op, "expire") {
				out[strings.TrimSuffix(op, `"}`)] = n
			}
		}
		return out
	}
	seq := 0
	for _, tc := range []struct {
		name, code string
		status     int
		want       map[string]float64
	}{
		{"unknown", "S-0000000000", http.StatusNotFound, map[string]float64{"resolve_code": 1}},
		{"campaign code used", codes[0], http.StatusConflict, map[string]float64{"resolve_code": 1}},
		{"campaign off", offCode, http.StatusUnprocessableEntity, map[string]float64{"resolve_code": 1}},
		{"voucher ended", ended, http.StatusUnprocessableEntity, map[string]float64{"resolve_code": 1}},
		{"campaign code taken", codes[1], http.StatusCreated, map[string]float64{"resolve_code": 1, "reserve": 1}},
	} {
		// The validation first: the reservation takes the code.
		for _, op := range []string{"validation", "reservations"} {
			before := statements()
			seq++
			r := s.do(http.MethodPost, "/vouchers/"+tc.code+"/"+op,
				map[string]any{"customerId": 100 + seq, "orderId": fmt.Sprint("s-", seq), "orderAmount": 5000})
			want := tc.want
			if op == "validation" {
				wantStatus := http.StatusOK
				if tc.status == http.StatusNotFound {
					wantStatus = tc.status
				}
				require.Equal(t, wantStatus, r.status, "%s: %s", tc.name, r.raw)
				if tc.status == http.StatusCreated {
					want = map[string]float64{"resolve_code": 1, "validate": 1}
				}
			} else {
				require.Equal(t, tc.status, r.status, "%s: %s", tc.name, r.raw)
			}
			after := statements()
			got := map[string]float64{}
			for k, n := range after {
				if d := n - before[k]; d != 0 {
					got[k] = d
				}
			}
			require.Equal(t, want, got, "%s %s", tc.name, op)
		}
	}
}
