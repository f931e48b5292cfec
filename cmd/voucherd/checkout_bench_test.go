package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A timed kind of request of BenchmarkCodeTiming.
type timingKind struct {
	name string
	want int // HTTP status (a validation's refusals are 200)
	code func(i int) string
}

// BenchmarkCodeTiming measures what timing tells a caller enumerating
// codes. Through HTTP on loopback against one voucherd with PostgreSQL (and
// Redis in flash-sync mode), it times reservations, or validations, of
//
//	unknown        a code of campaign form that names nothing (404; a new one every time)
//	campaign-used  a campaign code another order holds (ALREADY_USED, CODE_USED)
//	campaign-off   a code of a disabled campaign (NOT_ELIGIBLE, DISABLED)
//	voucher-ended  a voucher whose window ended (NOT_ELIGIBLE, EXPIRED)
//	campaign-take  a fresh campaign code (201; a validation: valid)
//
// b.N of each, every one with a new orderId and customer, in a random order
// within each round so that drift and neighbours hit all kinds alike, after
// a warm-up of 200 rounds. The code-guessing limit is at its default:
// every request is a new customer's, so it counts each unknown code and
// refuses none. It logs each kind's p50/p90/p99 and, for each
// kind against unknown, the difference of medians, the Kolmogorov-Smirnov
// and Mann-Whitney tests, the probability that an unknown code's answer is
// the slower of the two (AUC) and the requests of each kind a caller would
// need to tell the two apart (Noether's sample size for the Mann-Whitney
// test at 5% significance and 80% power).
func BenchmarkCodeTiming(b *testing.B) {
	for _, m := range modes[:2] {
		for _, op := range []string{"reserve", "validate"} {
			b.Run(m.name+"/"+op, func(b *testing.B) { benchCodeTiming(b, m.opts, op) })
		}
	}
}

func benchCodeTiming(b *testing.B, opts stackOptions, op string) {
	s := newStack(b, opts)
	const warm = 200
	n := b.N + warm

	// One campaign for the takes and the used code, one disabled.
	r := s.createCampaign(map[string]any{"codeCount": n + 1, "codePrefix": "G-", "totalLimit": 1_000_000, "perUserLimit": 1})
	require.Equal(b, http.StatusCreated, r.status, string(r.raw))
	codes := s.campaignCodes(r.str("id"), 1000)
	require.Len(b, codes, n+1)
	used := codes[n]
	require.Equal(b, http.StatusCreated, s.reserve(used, 1, "timing-holder", 5000).status)
	r = s.createCampaign(map[string]any{"codeCount": 1, "codePrefix": "G-"})
	require.Equal(b, http.StatusCreated, r.status, string(r.raw))
	off := s.campaignCodes(r.str("id"), 10)[0]
	p := s.do(http.MethodPatch, "/vouchers/"+r.str("id"), map[string]any{"active": false})
	require.Equal(b, http.StatusOK, p.status, string(p.raw))
	ended := s.createEndedVoucher()

	refused := http.StatusOK
	path, taken := "/validation", http.StatusOK
	if op == "reserve" {
		path, taken = "/reservations", http.StatusCreated
	}
	status := func(reserve int) int {
		if op == "reserve" {
			return reserve
		}
		return refused
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 42))
	const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	kinds := []timingKind{
		{"unknown", http.StatusNotFound, func(int) string {
			var c [10]byte
			for j := range c {
				c[j] = crockford[rng.IntN(len(crockford))]
			}
			return "G-" + string(c[:])
		}},
		{"campaign-used", status(http.StatusConflict), func(int) string { return used }},
		{"campaign-off", status(http.StatusUnprocessableEntity), func(int) string { return off }},
		{"voucher-ended", status(http.StatusUnprocessableEntity), func(int) string { return ended }},
		{"campaign-take", taken, func(i int) string { return codes[i] }},
	}

	seq := 0
	send := func(k timingKind, i int) time.Duration {
		seq++
		body := fmt.Sprintf(`{"customerId":"t%d","orderId":"timing-%d","orderAmount":5000}`, seq, seq)
		req, err := http.NewRequest(http.MethodPost, s.base+"/vouchers/"+k.code(i)+path, strings.NewReader(body))
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+testAPIToken)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := httpClient.Do(req)
		require.NoError(b, err)
		raw, err := io.ReadAll(resp.Body)
		d := time.Since(start)
		resp.Body.Close()
		require.NoError(b, err)
		require.Equal(b, k.want, resp.StatusCode, "%s: %s", k.name, raw)
		if op == "validate" && k.name != "unknown" {
			require.Equal(b, k.name == "campaign-take", bytes.Contains(raw, []byte(`"valid":true`)), "%s: %s", k.name, raw)
		}
		return d
	}
	order := make([]int, len(kinds))
	for j := range order {
		order[j] = j
	}
	samples := make([][]float64, len(kinds))
	b.ResetTimer()
	for i := range n {
		rng.Shuffle(len(order), func(x, y int) { order[x], order[y] = order[y], order[x] })
		for _, j := range order {
			d := send(kinds[j], i)
			if i >= warm {
				samples[j] = append(samples[j], float64(d.Nanoseconds())/1e3)
			}
		}
	}
	b.StopTimer()

	var out strings.Builder
	fmt.Fprintf(&out, "%d of each kind, µs:\n%-14s %8s %8s %8s  %9s %6s %9s %9s %5s %9s\n", b.N,
		"kind", "p50", "p90", "p99", "Δp50", "KS D", "KS p", "MW p", "AUC", "n detect")
	for j, k := range kinds {
		x := slices.Clone(samples[j])
		slices.Sort(x)
		fmt.Fprintf(&out, "%-14s %8.1f %8.1f %8.1f", k.name, quantile(x, 0.5), quantile(x, 0.9), quantile(x, 0.99))
		if j > 0 {
			u := slices.Clone(samples[0])
			slices.Sort(u)
			c := compareSamples(u, x)
			fmt.Fprintf(&out, "  %+9.1f %6.3f %9.2g %9.2g %5.3f %9.0f", quantile(u, 0.5)-quantile(x, 0.5), c.ksD, c.ksP, c.mwP, c.auc, c.detectN)
		}
		out.WriteByte('\n')
		b.ReportMetric(quantile(x, 0.5), k.name+"-p50-µs")
	}
	b.Log(out.String())
}
