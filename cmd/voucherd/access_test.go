package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestValidateAccess(t *testing.T) {
	t.Parallel()
	base := func() Config {
		return Config{FlashWrites: "sync", ReservationTTL: time.Minute, MaxDBConns: 4}
	}
	for name, tc := range map[string]struct {
		tweak   func(*Config)
		errHas  string
		refused bool
	}{
		"defaults":                 {func(c *Config) {}, "", false},
		"placeholder admin token":  {func(c *Config) { c.AdminToken = "change-me-admin-token" }, "VOUCHERD_ADMIN_TOKEN", true},
		"placeholder api token":    {func(c *Config) { c.APIToken = "CHANGE-ME" }, "VOUCHERD_API_TOKEN", true},
		"placeholder in key list":  {func(c *Config) { c.APIKeys = "a:ok,b:x-change-me" }, "VOUCHERD_API_KEYS", true},
		"placeholder in read keys": {func(c *Config) { c.Access.ReadKeys = "d:change-me" }, "VOUCHERD_READ_KEYS", true},
		"pprof on loopback":        {func(c *Config) { c.PprofAddr = "127.0.0.1:6060" }, "", false},
		"pprof on ::1":             {func(c *Config) { c.PprofAddr = "[::1]:6060" }, "", false},
		"pprof on localhost":       {func(c *Config) { c.PprofAddr = "localhost:6060" }, "", false},
		"pprof on every interface": {func(c *Config) { c.PprofAddr = ":6060" }, "--pprof-addr", true},
		"pprof on 0.0.0.0":         {func(c *Config) { c.PprofAddr = "0.0.0.0:6060" }, "--pprof-addr", true},
		"pprof on a pod address":   {func(c *Config) { c.PprofAddr = "10.1.2.3:6060" }, "--pprof-addr", true},
	} {
		cfg := base()
		tc.tweak(&cfg)
		err := cfg.validate()
		if !tc.refused {
			require.NoError(t, err, name)
			continue
		}
		require.ErrorContains(t, err, tc.errHas, name)
		require.NotContains(t, err.Error(), "admin-token", "%s: the error does not repeat the token", name)
	}
}

// A request with 100 KiB of headers is refused before any handler runs.
func TestLargeHeadersRefused(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	req, err := http.NewRequest(http.MethodGet, s.base+"/healthz", nil)
	require.NoError(t, err)
	for i := 0; i < 100; i++ {
		req.Header.Add("X-Filler", strings.Repeat("a", 1024))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	// 32 KiB still pass.
	req.Header.Del("X-Filler")
	req.Header.Set("X-Filler", strings.Repeat("a", 32<<10))
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// With VOUCHERD_METRICS_ADDR, /metrics is served there, without a key, and
// the serving port has none.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{tweak: func(c *Config) { c.Access.MetricsAddr = "127.0.0.1:0" }})
	addr := s.app.MetricsAddr()
	_, _, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "voucherd_keys_file_usable 1")
	r := s.doToken(http.MethodGet, "/metrics", nil, testAdminToken)
	require.Equal(t, http.StatusNotFound, r.status, string(r.raw))
}

// On the serving port, /metrics needs a read or admin key.
func TestMetricsNeedAKey(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	require.Equal(t, http.StatusUnauthorized, s.doToken(http.MethodGet, "/metrics", nil, "").status)
	require.Equal(t, http.StatusForbidden, s.doToken(http.MethodGet, "/metrics", nil, testAPIToken).status)
	require.Equal(t, http.StatusOK, s.doToken(http.MethodGet, "/metrics", nil, testReadToken).status)
	require.Equal(t, http.StatusOK, s.doToken(http.MethodGet, "/metrics", nil, testAdminToken).status)
}

// 1,000 reservations of unknown codes from one client address, each with a
// fresh customerId: the client's budget ends them, loopback included.
func TestGuessingLimitCountsTheClient(t *testing.T) {
	t.Parallel()
	const budget = 50
	s := newStack(t, stackOptions{tweak: func(c *Config) {
		c.Access.UnknownCodeLimitPerClient, c.Access.UnknownCodeLimitPerKey = budget, -1
	}})
	statuses := map[int]int{}
	var retryAfter string
	for i := 0; i < 1000; i++ {
		r := s.reserve(fmt.Sprintf("NOPE%d", i), int64(100_000+i), fmt.Sprintf("g-%d", i), 5000)
		statuses[r.status]++
		if r.status == http.StatusTooManyRequests && retryAfter == "" {
			retryAfter = r.header.Get("Retry-After")
		}
	}
	// The miss past the budget is answered 404 and blocks what follows.
	require.Equal(t, map[int]int{http.StatusNotFound: budget + 1, http.StatusTooManyRequests: 1000 - budget - 1}, statuses)
	require.NotEmpty(t, retryAfter)
}

// The same with one API key used from many places: the key's budget.
func TestGuessingLimitCountsTheKey(t *testing.T) {
	t.Parallel()
	const budget = 30
	s := newStack(t, stackOptions{tweak: func(c *Config) {
		c.Access.UnknownCodeLimitPerClient, c.Access.UnknownCodeLimitPerKey = -1, budget
	}})
	statuses := map[int]int{}
	for i := 0; i < 100; i++ {
		statuses[s.reserve(fmt.Sprintf("NOPE%d", i), int64(200_000+i), fmt.Sprintf("k-%d", i), 5000).status]++
	}
	require.Equal(t, map[int]int{http.StatusNotFound: budget + 1, http.StatusTooManyRequests: 100 - budget - 1}, statuses)
}

// The per-key rate limit answers 429 with Retry-After and counts it.
func TestRateLimitAnswers429(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{tweak: func(c *Config) {
		c.Access.RatePerKey, c.Access.BurstPerKey, c.Access.RateLimitLoopback = 0.01, 5, true
	}})
	statuses := map[int]int{}
	var r response
	for i := 0; i < 8; i++ {
		r = s.doToken(http.MethodGet, "/vouchers/NOPE", nil, testAPIToken)
		statuses[r.status]++
	}
	require.Equal(t, map[int]int{http.StatusNotFound: 5, http.StatusTooManyRequests: 3}, statuses)
	require.NotEmpty(t, r.header.Get("Retry-After"))
	require.Equal(t, "TOO_MANY_REQUESTS", r.str("error"))
	m := s.doToken(http.MethodGet, "/metrics", nil, testAdminToken)
	require.Contains(t, string(m.raw), `voucherd_rate_limited_total{limit="key"} 3`)
}

// Codes added to a campaign and reads of its codes are in the audit trail,
// with the key that made them.
func TestCampaignCodesAudited(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	r := s.createCampaign(map[string]any{"codeCount": 20, "codePrefix": "AUD-"})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	id := r.str("id")
	more := s.doToken(http.MethodPost, "/campaigns/"+id+"/codes", map[string]any{"count": 5}, testAdminToken)
	require.Equal(t, http.StatusCreated, more.status, string(more.raw))
	require.Len(t, s.campaignCodes(id, 100), 25)
	req, err := http.NewRequest(http.MethodGet, s.base+"/campaigns/"+id+"/codes", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	req.Header.Set("Accept", "text/csv")
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	_, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	audit := s.pages("/vouchers/"+id+"/audit", "entries", "id", 10)
	require.Equal(t, []string{"create", "add_codes", "export_codes", "export_codes"}, column(audit, "action"))
	require.Equal(t, []string{"admin", "admin", "admin", "admin"}, column(audit, "keyName"))
	require.Equal(t, map[string]any{"count": float64(5)}, audit[1]["after"])
	require.Equal(t, "page", audit[2]["after"].(map[string]any)["format"])
	require.Equal(t, "all", audit[3]["after"].(map[string]any)["format"])
}
