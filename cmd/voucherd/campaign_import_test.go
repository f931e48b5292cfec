package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A shop's own codes imported over HTTP: added, idempotent, refused per
// item with a reason; a code imported with a customerId serves that
// customer only, in every mode; the others serve anyone.
func TestCampaignImport(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		r := s.createCampaign(map[string]any{"codeCount": 1, "flashSale": s.opts.flash})
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		id := r.str("id")
		run := fmt.Sprintf("%d%d", time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
		spring, vip := "SPRING-"+run, "VIP-"+run
		body := map[string]any{"codes": []map[string]any{
			{"code": spring}, {"code": vip, "customerId": "anna@example.com"}, {"code": spring},
		}}
		r = s.doToken(http.MethodPost, "/campaigns/"+id+"/codes", body, testAdminToken)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.EqualValues(t, 2, r.num("added"))
		require.EqualValues(t, 0, r.num("existing"))
		require.JSONEq(t, `[{"index":2,"code":"`+spring+`","reason":"DUPLICATE"}]`, mustJSON(t, r.body["refused"]))
		require.EqualValues(t, 3, r.body["campaign"].(map[string]any)["codeCount"])
		r = s.doToken(http.MethodPost, "/campaigns/"+id+"/codes", body, testAdminToken)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.EqualValues(t, 0, r.num("added"), "sent again: nothing added twice")
		require.EqualValues(t, 2, r.num("existing"))

		for _, bad := range []any{
			map[string]any{"codes": []map[string]any{{"code": "ok-1"}, {"code": "not ok"}}},
			map[string]any{"codes": []map[string]any{}},
			map[string]any{"codes": []map[string]any{{"customerId": "7"}}},
			map[string]any{"count": 1, "codes": []map[string]any{{"code": "X-" + run}}},
		} {
			r = s.doToken(http.MethodPost, "/campaigns/"+id+"/codes", bad, testAdminToken)
			require.Equal(t, http.StatusBadRequest, r.status, "%v: %s", bad, r.raw)
		}

		r = s.doToken(http.MethodGet, "/campaigns/"+id+"/codes?limit=10", nil, testAdminToken)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Contains(t, string(r.raw), `{"code":"`+vip+`","used":false,"customerId":"anna@example.com"}`)
		requireNotEligible(t, s.reserveIn(vip, "bob@example.com", "imp-1", ""), "CUSTOMER_MISMATCH")
		r = s.do(http.MethodPost, "/vouchers/"+vip+"/validation", map[string]any{"customerId": "bob@example.com", "orderAmount": 5000})
		require.Equal(t, "CUSTOMER_MISMATCH", r.str("reason"), string(r.raw))
		r = s.reserveIn(vip, "anna@example.com", "imp-2", "")
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		r = s.reserveIn(spring, "bob@example.com", "imp-3", "")
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		s.settle(id, 2)
		s.assertConsistent(id)
	})
}

// voucherd campaign import streams a CSV in batches: every code lands once,
// a second run adds nothing, refused lines are named, and a malformed line
// names its line number and writes nothing of its batch.
func TestCampaignImportCommand(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	r := s.createCampaign(map[string]any{"codeCount": 0})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	id := r.str("id")
	cli := func(args ...string) (string, string, error) {
		var out, errOut strings.Builder
		args = append(args[:2:2], append([]string{"--url", s.base, "--token", testAdminToken}, args[2:]...)...)
		err := run(t.Context(), args, &out, &errOut)
		return out.String(), errOut.String(), err
	}
	dir := t.TempDir()
	const n = 2_500
	path := writeCodesCSV(t, dir, "codes.csv", n, "IMP", func(i int, b *strings.Builder) {
		if i == 7 {
			b.WriteString("IMP-000001\n") // a duplicate of an earlier line (line 3 with the header)
		}
	})
	out, progress, err := cli("campaign", "import", "--batch", "1000", id, path)
	require.NoError(t, err)
	require.Contains(t, out, "line 10: IMP-000001: DUPLICATE\n")
	require.Contains(t, out, fmt.Sprintf("%d codes: %d added, 0 there already, 1 refused", n+1, n))
	require.Contains(t, progress, "100%")
	require.Equal(t, int32(n), s.campaignCodeCount(id))

	out, _, err = cli("campaign", "import", id, path)
	require.NoError(t, err)
	require.Contains(t, out, fmt.Sprintf("%d codes: 0 added, %d there already, 1 refused", n+1, n))

	// Line 1,503 is malformed: the first batch of 1,000 is written, the
	// second (lines 1,002 on) is not.
	bad := writeCodesCSV(t, dir, "bad.csv", 2_000, "BAD", func(i int, b *strings.Builder) {
		if i == 1_500 {
			b.WriteString("BAD CODE,anna\n")
		}
	})
	_, _, err = cli("campaign", "import", "--batch", "1000", id, bad)
	require.ErrorContains(t, err, "line 1503")
	require.Equal(t, int32(n+1_000), s.campaignCodeCount(id))
}

// writeCodesCSV writes a header and n codes PREFIX-000000.. into dir/name,
// calling extra after each code line (0-based) to add lines.
func writeCodesCSV(t testing.TB, dir, name string, n int, prefix string, extra func(i int, b *strings.Builder)) string {
	var b strings.Builder
	b.WriteString("code,customerId\n")
	for i := range n {
		if i%10 == 0 {
			fmt.Fprintf(&b, "%s-%06d,cus_%d\n", prefix, i, i)
		} else {
			fmt.Fprintf(&b, "%s-%06d\n", prefix, i)
		}
		extra(i, &b)
	}
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path
}

// campaignCodeCount reads a campaign's code count.
func (s *stack) campaignCodeCount(id string) int32 {
	s.t.Helper()
	var n int32
	require.NoError(s.t, s.db.QueryRow(s.t.Context(), `SELECT count(*) FROM campaign_code WHERE campaign_id = $1`, id).Scan(&n))
	var counted int32
	require.NoError(s.t, s.db.QueryRow(s.t.Context(), `SELECT code_count FROM campaign WHERE id = $1`, id).Scan(&counted))
	require.Equal(s.t, n, counted, "campaign.code_count counts the codes")
	return n
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// BenchmarkCampaignImportCSV imports a CSV of 100,000 codes (10% bound to
// a customer) into a fresh campaign per iteration with `voucherd campaign
// import` against an in-process voucherd (standard mode, local PostgreSQL);
// writing the file is not timed. VOUCHERD_BENCH_IMPORT_CODES sets another
// size. The allocations reported are the CLI's and the server's together.
func BenchmarkCampaignImportCSV(b *testing.B) {
	n := 100_000
	if v := os.Getenv("VOUCHERD_BENCH_IMPORT_CODES"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(b, err)
	}
	s := newStack(b, stackOptions{})
	dir := b.TempDir()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		r := s.createCampaign(map[string]any{"codeCount": 0})
		require.Equal(b, http.StatusCreated, r.status, string(r.raw))
		id := r.str("id")
		path := writeCodesCSV(b, dir, fmt.Sprintf("codes-%d.csv", i), n, fmt.Sprintf("B%d", i), func(int, *strings.Builder) {})
		b.StartTimer()
		var out, errOut strings.Builder
		err := run(b.Context(), []string{"campaign", "import", "--url", s.base, "--token", testAdminToken, id, path}, &out, &errOut)
		require.NoError(b, err, errOut.String())
	}
	b.ReportMetric(float64(n), "codes/op")
}
