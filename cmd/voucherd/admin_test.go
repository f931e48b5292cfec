package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

const (
	promoKey    = "promo-team"
	promoSecret = "promo-secret-1"
)

// withPromoKey adds a named admin key to the stack's keys.
func withPromoKey(c *Config) { c.AdminKeys = promoKey + ":" + promoSecret }

// pages walks a listing with the admin token and returns every row of the
// field, failing on a repeated key.
func (s *stack) pages(path, field, key string, limit int) []map[string]any {
	s.t.Helper()
	var rows []map[string]any
	seen := map[string]bool{}
	after := ""
	for range 100 {
		u, err := url.Parse(path)
		require.NoError(s.t, err)
		q := u.Query()
		q.Set("limit", fmt.Sprint(limit))
		if after != "" {
			q.Set("after", after)
		}
		r := s.doToken(http.MethodGet, u.Path+"?"+q.Encode(), nil, testAdminToken)
		require.Equal(s.t, http.StatusOK, r.status, string(r.raw))
		list, _ := r.body[field].([]any)
		for _, x := range list {
			row := x.(map[string]any)
			k := fmt.Sprint(row[key])
			require.False(s.t, seen[k], "%s listed twice", k)
			seen[k] = true
			rows = append(rows, row)
		}
		after = r.str("next")
		if after == "" {
			return rows
		}
	}
	s.t.Fatal("more than 100 pages")
	return nil
}

func column(rows []map[string]any, key string) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, fmt.Sprint(r[key]))
	}
	return out
}

func TestAdminListingsAndAudit(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{tweak: withPromoKey})
	now := time.Now()
	prefix := fmt.Sprintf("L%d", now.UnixNano()%1_000_000)
	create := func(suffix string, starts, ends time.Duration, flash bool) string {
		code := prefix + suffix
		r := s.doToken(http.MethodPost, "/vouchers", map[string]any{
			"code": code, "discountAmount": 100, "totalLimit": 10, "perUserLimit": 5, "flashSale": flash,
			"startsAt": now.Add(starts).UTC().Format(time.RFC3339Nano), "endsAt": now.Add(ends).UTC().Format(time.RFC3339Nano),
		}, promoSecret)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		return code
	}
	act := create("-act", -time.Hour, time.Hour, false)
	create("-sch", time.Hour, 2*time.Hour, false)
	// A voucher cannot be created already ended: move its window back.
	ended := create("-end", -2*time.Hour, time.Hour, false)
	_, err := s.db.Exec(t.Context(), `UPDATE voucher SET ends_at = $2 WHERE code = $1`, ended, now.Add(-time.Hour))
	require.NoError(t, err)
	create("-fl", -time.Hour, 2*time.Hour, true)
	dis := create("-dis", -time.Hour, time.Hour, false)
	r := s.doToken(http.MethodPatch, "/vouchers/"+dis, map[string]any{"active": false}, promoSecret)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, false, r.body["active"])

	listed := func(query string) []string {
		return column(s.pages("/vouchers?codePrefix="+prefix+query, "vouchers", "code", 2), "code")
	}
	require.Equal(t, []string{prefix + "-act", prefix + "-dis", prefix + "-end", prefix + "-fl", prefix + "-sch"}, listed(""))
	require.Equal(t, []string{prefix + "-act", prefix + "-fl"}, listed("&state=active"))
	require.Equal(t, []string{prefix + "-sch"}, listed("&state=scheduled"))
	require.Equal(t, []string{prefix + "-end"}, listed("&state=ended"))
	require.Equal(t, []string{prefix + "-dis"}, listed("&state=disabled"))
	require.Equal(t, []string{prefix + "-fl"}, listed("&flashSale=true"))
	require.Equal(t, []string{prefix + "-act"}, listed("&flashSale=false&state=active"))

	// Reservations of a voucher and of a customer, with the counts.
	for i, c := range []int64{1, 2, 1, 3} {
		r := s.reserve(act, c, fmt.Sprintf("%s-o%d", prefix, i), 100)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	}
	require.Equal(t, http.StatusOK, s.do(http.MethodPost, "/vouchers/"+act+"/reservations/"+prefix+"-o0/confirm", nil).status)
	require.Equal(t, http.StatusOK, s.do(http.MethodDelete, "/vouchers/"+act+"/reservations/"+prefix+"-o1", nil).status)
	rows := s.pages("/vouchers?codePrefix="+prefix+"-act", "vouchers", "code", 10)
	require.Len(t, rows, 1)
	require.EqualValues(t, 2, rows[0]["reserved"])
	require.EqualValues(t, 1, rows[0]["confirmed"])
	require.EqualValues(t, 7, rows[0]["remaining"])
	res := func(query string) []string {
		return column(s.pages("/vouchers/"+act+"/reservations"+query, "reservations", "orderId", 1), "orderId")
	}
	o := func(i int) string { return fmt.Sprintf("%s-o%d", prefix, i) }
	require.Equal(t, []string{o(0), o(1), o(2), o(3)}, res(""))
	require.Equal(t, []string{o(2), o(3)}, res("?status=RESERVED"))
	require.Equal(t, []string{o(0)}, res("?status=CONFIRMED"))
	require.Equal(t, []string{o(1)}, res("?status=RELEASED"))
	require.Equal(t, []string{o(0), o(2)}, res("?customerId=1"))
	require.Equal(t, []string{o(2)}, res("?customerId=1&status=RESERVED"))
	red := s.pages("/customers/1/redemptions", "redemptions", "orderId", 1)
	require.Contains(t, column(red, "orderId"), o(0))
	require.Contains(t, column(red, "orderId"), o(2))

	// The audit trail names the key, never its secret.
	audit := s.pages("/vouchers/"+dis+"/audit", "entries", "id", 1)
	require.Equal(t, []string{"create", "deactivate"}, column(audit, "action"))
	require.Equal(t, []string{promoKey, promoKey}, column(audit, "keyName"))
	require.Nil(t, audit[0]["before"])
	require.Equal(t, true, audit[1]["before"].(map[string]any)["active"])
	require.Equal(t, false, audit[1]["after"].(map[string]any)["active"])
	r = s.do(http.MethodPatch, "/vouchers/"+dis, map[string]any{"active": true})
	require.Equal(t, http.StatusOK, r.status)
	audit = s.pages("/vouchers/"+dis+"/audit", "entries", "id", 10)
	require.Equal(t, "activate", audit[2]["action"])
	require.Equal(t, "admin", audit[2]["keyName"], "the single admin token is the key named admin")

	metrics := s.do(http.MethodGet, "/metrics", nil).raw
	require.Contains(t, string(metrics), `key="`+promoKey+`"`)
	require.NotContains(t, string(metrics), promoSecret)

	// Bad requests change nothing and say why.
	for _, tc := range []struct {
		path, token string
		status      int
		code        string
	}{
		{"/vouchers?state=soon", testAdminToken, 400, "INVALID_REQUEST"},
		{"/vouchers?state=", testAdminToken, 400, "INVALID_REQUEST"},
		{"/vouchers?flashSale=yes", testAdminToken, 400, "INVALID_REQUEST"},
		{"/vouchers?limit=0", testAdminToken, 400, "INVALID_REQUEST"},
		{"/vouchers?limit=1001", testAdminToken, 400, "INVALID_REQUEST"},
		{"/vouchers?after=nope", testAdminToken, 400, "INVALID_REQUEST"},
		{"/vouchers?offset=10", testAdminToken, 400, "INVALID_REQUEST"},
		{"/vouchers?codePrefix=a%20b", testAdminToken, 400, "INVALID_REQUEST"},
		{"/vouchers/" + act + "/reservations?status=GONE", testAdminToken, 400, "INVALID_REQUEST"},
		{"/vouchers/" + act + "/reservations?customerId=a%2Fb", testAdminToken, 400, "INVALID_REQUEST"},
		{"/vouchers/" + act + "/reservations?customerId=", testAdminToken, 400, "INVALID_REQUEST"},
		{"/vouchers/NOPE" + prefix + "/reservations", testAdminToken, 404, "VOUCHER_NOT_FOUND"},
		{"/vouchers/NOPE" + prefix + "/audit", testAdminToken, 404, "VOUCHER_NOT_FOUND"},
		{"/customers/a%20b/redemptions", testAdminToken, 400, "INVALID_REQUEST"},
		{"/customers/" + strings.Repeat("c", 65) + "/redemptions", testAdminToken, 400, "INVALID_REQUEST"},
		{"/vouchers", testAPIToken, 401, "UNAUTHORIZED"},
		{"/customers/1/redemptions", testAPIToken, 401, "UNAUTHORIZED"},
		{"/vouchers/" + act + "/audit", "", 401, "UNAUTHORIZED"},
	} {
		r := s.doToken(http.MethodGet, tc.path, nil, tc.token)
		require.Equal(t, tc.status, r.status, "%s: %s", tc.path, r.raw)
		require.Equal(t, tc.code, r.str("error"), tc.path)
	}
}

func TestDeactivateInEveryMode(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		start, end := time.Now().Add(-time.Hour).UTC().Truncate(time.Second), time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		code := s.createVoucher(voucherSpec{TotalLimit: 10, PerUserLimit: 5, StartsAt: start, EndsAt: end})
		for i := range 2 {
			require.Equal(t, http.StatusCreated, s.reserve(code, 1, fmt.Sprintf("%s-h%d", code, i), 100).status)
		}
		r := s.do(http.MethodPatch, "/vouchers/"+code, map[string]any{"active": false})
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, start.Format(time.RFC3339), r.str("startsAt"), "the window is kept")
		require.Equal(t, end.Format(time.RFC3339), r.str("endsAt"), "the window is kept")

		r = s.reserve(code, 2, code+"-new", 100)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
		require.Equal(t, "NOT_ELIGIBLE", r.str("error"))
		require.Equal(t, "DISABLED", r.str("reason"))
		// A retry of a hold made before is answered with it (in Kafka mode
		// once its row landed, as for a voucher past its window).
		s.settle(code, 2)
		require.Equal(t, http.StatusCreated, s.reserve(code, 1, code+"-h0", 100).status)
		require.Equal(t, http.StatusOK, s.do(http.MethodPost, "/vouchers/"+code+"/reservations/"+code+"-h0/confirm", nil).status)
		require.Equal(t, http.StatusOK, s.do(http.MethodDelete, "/vouchers/"+code+"/reservations/"+code+"-h1", nil).status)

		r = s.do(http.MethodPatch, "/vouchers/"+code, map[string]any{"active": true})
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, http.StatusCreated, s.reserve(code, 2, code+"-again", 100).status)
		s.settle(code, 2)
		s.assertConsistent(code)
	})
}

// secondInstance starts another voucherd on the stack's database, Redis
// prefix and (Kafka mode) topic, without its own consumer.
func (s *stack) secondInstance(t *testing.T) *stack {
	cfg := s.cfg
	cfg.RunConsumer = false
	app, err := NewApp(t.Context(), cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	require.NoError(t, err)
	require.NoError(t, app.Start(t.Context()))
	t.Cleanup(func() { _ = app.Close() })
	return &stack{t: t, app: app, base: "http://" + app.Addr(), db: s.db, opts: s.opts, cfg: cfg}
}

// A deactivation racing a flash sale on two instances: once the PATCH is
// answered, no reservation sent afterwards is accepted on either instance
// beyond the stated staleness (none in flash-sync mode, where PostgreSQL
// refuses; the voucher cache TTL in flash-kafka mode).
func TestDeactivationRacingAFlashSale(t *testing.T) {
	t.Parallel()
	for _, m := range []struct {
		name      string
		opts      stackOptions
		staleness time.Duration
	}{
		{"flash-sync", stackOptions{flash: true}, 0},
		{"flash-kafka", stackOptions{kafka: true}, time.Second},
	} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			a := newStack(t, m.opts)
			b := a.secondInstance(t)
			require.Equal(t, time.Second, a.cfg.VoucherCacheTTL, "the staleness asserted is the cache TTL")
			code := a.createVoucher(voucherSpec{TotalLimit: 100_000})

			type answer struct {
				sent     time.Time
				instance int
				status   int
				reason   string
			}
			var (
				mu      sync.Mutex
				answers []answer
				acked   atomic.Pointer[time.Time]
				next    atomic.Int64
				wg      sync.WaitGroup
			)
			stop := make(chan struct{})
			for w := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					inst := []*stack{a, b}[w%2]
					for {
						select {
						case <-stop:
							return
						default:
						}
						i := next.Add(1)
						if i > 20_000 {
							return
						}
						sent := time.Now()
						r := inst.reserve(code, i, fmt.Sprintf("%s-%d", code, i), 100)
						mu.Lock()
						answers = append(answers, answer{sent, w % 2, r.status, r.str("reason")})
						mu.Unlock()
					}
				}()
			}
			time.Sleep(500 * time.Millisecond)
			r := a.do(http.MethodPatch, "/vouchers/"+code, map[string]any{"active": false})
			require.Equal(t, http.StatusOK, r.status, string(r.raw))
			at := time.Now()
			acked.Store(&at)
			time.Sleep(m.staleness + 700*time.Millisecond)
			close(stop)
			wg.Wait()

			var before, late, refused int
			for _, x := range answers {
				switch {
				case x.status == http.StatusCreated && x.sent.Before(at):
					before++
				case x.status == http.StatusCreated:
					// Sent after the PATCH was answered: allowed only within
					// the staleness (an instance's cached definition, which
					// a read racing the PATCH may refill even on the
					// instance that answered it).
					require.True(t, x.sent.Before(at.Add(m.staleness)),
						"reservation sent %s after the deactivation was acknowledged was accepted by instance %d",
						x.sent.Sub(at), x.instance)
					late++
				case x.status == http.StatusUnprocessableEntity:
					require.Equal(t, "DISABLED", x.reason)
					refused++
				default:
					t.Fatalf("unexpected answer %d", x.status)
				}
			}
			t.Logf("%d accepted before the PATCH was answered, %d after within the staleness, %d refused", before, late, refused)
			require.Positive(t, before)
			require.Positive(t, refused)
			a.settle(code, before+late)
			st := a.state(code)
			require.Equal(t, before+late, st.reserved, "every 201 is a row, nothing else is")
			a.assertConsistent(code)
		})
	}
}

// A key rotation under load: reservations and admin reads run all along
// while a new key is added to the keys file, the callers move to it, and
// the old key is removed. No request fails.
func TestKeyRotationUnderLoad(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "keys")
	write := func(lines ...string) {
		// Written whole and renamed, so the watcher never reads half a file.
		tmp := file + ".tmp"
		require.NoError(t, os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
		require.NoError(t, os.Rename(tmp, file))
	}
	write("# order service keys", "api checkout-v1 old-api-secret", "admin ops-v1 old-admin-secret")
	s := newStack(t, stackOptions{tweak: func(c *Config) {
		c.APIToken, c.AdminToken, c.KeysFile = "", "", file
	}})
	code := s.createVoucherWith("old-admin-secret", 1_000_000)

	var apiKey, adminKey atomic.Pointer[string]
	set := func(p *atomic.Pointer[string], v string) { p.Store(&v) }
	set(&apiKey, "old-api-secret")
	set(&adminKey, "old-admin-secret")
	var (
		sent, failed atomic.Int64
		wg           sync.WaitGroup
		mu           sync.Mutex
		failures     []string
	)
	stop := make(chan struct{})
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50_000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var r response
				if w == 0 {
					r = s.doToken(http.MethodGet, "/vouchers/"+code+"/reservations?limit=5", nil, *adminKey.Load())
				} else {
					r = s.doToken(http.MethodPost, "/vouchers/"+code+"/reservations", map[string]any{
						"customerId": w*1_000_000 + i + 1, "orderId": fmt.Sprintf("rot-%d-%d", w, i), "orderAmount": 100,
					}, *apiKey.Load())
				}
				sent.Add(1)
				if r.status != http.StatusCreated && r.status != http.StatusOK {
					failed.Add(1)
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%d %s", r.status, r.raw))
					mu.Unlock()
				}
			}
		}()
	}
	works := func(method, path, secret string) bool {
		return s.doToken(method, path, nil, secret).status != http.StatusUnauthorized
	}
	eventually := func(what string, cond func() bool) {
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			require.True(t, time.Now().Before(deadline), what)
			time.Sleep(50 * time.Millisecond)
		}
	}
	time.Sleep(300 * time.Millisecond)
	// 1. Add the new keys next to the old ones.
	write("api checkout-v1 old-api-secret", "api checkout-v2 new-api-secret",
		"admin ops-v1 old-admin-secret", "admin ops-v2 new-admin-secret")
	eventually("the new keys are loaded", func() bool {
		return works(http.MethodGet, "/vouchers/"+code, "new-api-secret") && works(http.MethodGet, "/vouchers", "new-admin-secret")
	})
	// 2. Callers move to them.
	time.Sleep(300 * time.Millisecond)
	set(&apiKey, "new-api-secret")
	set(&adminKey, "new-admin-secret")
	time.Sleep(300 * time.Millisecond)
	// 3. The old keys go; SIGHUP makes it immediate (the file watcher
	// would also see the change within a second).
	write("api checkout-v2 new-api-secret", "admin ops-v2 new-admin-secret")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	eventually("the old keys are removed", func() bool {
		return !works(http.MethodGet, "/vouchers/"+code, "old-api-secret") && !works(http.MethodGet, "/vouchers", "old-admin-secret")
	})
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	require.Zero(t, failed.Load(), "failed requests: %v", failures)
	require.Greater(t, sent.Load(), int64(100))
	t.Logf("%d requests during the rotation, none failed", sent.Load())

	// A broken file fails closed: its keys are refused, and with no other
	// key no request gets in, not even a loopback client's without a key.
	write("api only-two-fields")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	eventually("the broken file's keys are refused", func() bool {
		return !works(http.MethodGet, "/vouchers/"+code, "new-api-secret")
	})
	require.Equal(t, http.StatusUnauthorized, s.doToken(http.MethodGet, "/vouchers/"+code, nil, "").status, "the read key of the environment remains")
	require.Equal(t, http.StatusForbidden, s.doToken(http.MethodPost, "/vouchers/"+code+"/reservations", map[string]any{"orderId": "o-1", "customerId": 1, "orderAmount": 5000}, "").status)
	write("api checkout-v2 new-api-secret", "admin ops-v2 new-admin-secret")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	eventually("the fixed file's keys are back", func() bool {
		return works(http.MethodGet, "/vouchers/"+code, "new-api-secret")
	})
	s.assertConsistent(code)
}

// createVoucherWith creates a standard voucher with the given admin secret.
func (s *stack) createVoucherWith(secret string, total int) string {
	s.t.Helper()
	code := fmt.Sprintf("K%d%d", time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
	r := s.doToken(http.MethodPost, "/vouchers", map[string]any{
		"code": code, "discountAmount": 100, "totalLimit": total,
		"startsAt": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "endsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	}, secret)
	require.Equal(s.t, http.StatusCreated, r.status, string(r.raw))
	return code
}

// The CLI drives every administration route through the Go client.
func TestAdminCLI(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	code := s.createVoucher(voucherSpec{TotalLimit: 5})
	require.Equal(t, http.StatusCreated, s.reserve(code, 77, code+"-o1", 100).status)
	cli := func(args ...string) string {
		var out, errOut strings.Builder
		args = append(args[:2:2], append([]string{"--url", s.base, "--token", testAdminToken}, args[2:]...)...)
		require.NoError(t, run(t.Context(), args, &out, &errOut), errOut.String())
		return out.String()
	}
	require.Contains(t, cli("voucher", "deactivate", code), "active      false")
	out := cli("voucher", "list", "--state", "disabled", "--prefix", code, "--json")
	var page struct {
		Vouchers []struct {
			Code   string `json:"code"`
			Active bool   `json:"active"`
		} `json:"vouchers"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.Vouchers, 1)
	require.Equal(t, code, page.Vouchers[0].Code)
	require.Contains(t, cli("voucher", "reservations", "--status", "RESERVED", code), code+"-o1")
	require.Contains(t, cli("customer", "redemptions", "77"), code+"-o1")
	audit := cli("voucher", "audit", "--all", "--limit", "1", code)
	require.Contains(t, audit, "create")
	require.Contains(t, audit, "deactivate")
	require.NotContains(t, audit, testAdminToken)
	require.Contains(t, cli("voucher", "activate", code), "active      true")

	budgeted := code + "B"
	out = cli("voucher", "create", "--code", budgeted, "--discount", "300", "--total", "10", "--budget", "1000", "--clip")
	require.Contains(t, out, "budget      1000 (a discount that does not fit is clipped to what is left)")
	require.Equal(t, http.StatusCreated, s.reserve(budgeted, 77, budgeted+"-o1", 1000).status)
	require.Contains(t, cli("voucher", "patch", "--budget", "2000", budgeted), "budget now  300 reserved, 0 confirmed, 1700 remaining")
}

// A reconciliation that repairs something is recorded in the audit trail
// with the key that asked for it; a dry run and a repair that finds nothing
// are not.
func TestReconciliationRepairIsAudited(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true, tweak: withPromoKey})
	code := s.createVoucher(voucherSpec{TotalLimit: 10})
	now := time.Now()
	d, err := s.app.gate.Reserve(t.Context(), code, 1, voucher.Hold{OrderID: "orphan-a", CustomerID: "9", OrderAmount: 100,
		DiscountAmount: 10, ReservedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	require.Equal(t, http.StatusOK, s.do(http.MethodGet, "/vouchers/"+code+"/reconciliation", nil).status)
	r := s.doToken(http.MethodPost, "/vouchers/"+code+"/reconciliation", nil, promoSecret)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, true, r.body["repaired"])
	require.Equal(t, http.StatusOK, s.do(http.MethodPost, "/vouchers/"+code+"/reconciliation", nil).status)

	audit := s.pages("/vouchers/"+code+"/audit", "entries", "id", 10)
	require.Equal(t, []string{"create", "reconcile"}, column(audit, "action"))
	require.Equal(t, promoKey, audit[1]["keyName"])
	require.Equal(t, []any{"orphan-a"}, audit[1]["after"].(map[string]any)["orphans"])
	s.assertConsistent(code)
}
