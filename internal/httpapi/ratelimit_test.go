package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

func TestBuckets(t *testing.T) {
	t.Parallel()
	b := newBuckets(Rate{PerSecond: 2, Burst: 3})
	t0 := time.Unix(1000, 0)
	for i := 0; i < 3; i++ {
		require.Zero(t, b.take("a", t0), "burst %d", i)
	}
	require.Equal(t, 500*time.Millisecond, b.take("a", t0))
	require.Zero(t, b.take("b", t0), "another id has its own bucket")
	require.Zero(t, b.take("a", t0.Add(500*time.Millisecond)), "refilled at the rate")
	require.Greater(t, b.take("a", t0.Add(500*time.Millisecond)), time.Duration(0))
	require.Nil(t, newBuckets(Rate{}), "a zero rate is no limit")
}

func newLimitedServer(t *testing.T, limits RateLimits) (*Server, *[]string) {
	t.Helper()
	svc, err := voucher.NewService(voucher.ServiceConfig{Store: noStore{}})
	require.NoError(t, err)
	ring, err := NewKeyring([]Key{{Name: "checkout", Secret: "api-1"}, {Name: "billing", Secret: "api-2"}})
	require.NoError(t, err)
	var mu sync.Mutex
	var hits []string
	limits.OnLimited = func(limit string) {
		mu.Lock()
		hits = append(hits, limit)
		mu.Unlock()
	}
	s, err := New(Config{Service: svc, Keys: ring, RateLimits: limits})
	require.NoError(t, err)
	return s, &hits
}

func TestRateLimitPerClient(t *testing.T) {
	t.Parallel()
	s, hits := newLimitedServer(t, RateLimits{PerClient: Rate{PerSecond: 0.01, Burst: 3}})
	for i := 0; i < 3; i++ {
		status, _ := do(s, "GET", "/vouchers/bad!code", "203.0.113.9:4000", "Bearer api-1")
		require.Equal(t, 404, status)
	}
	req := httptest.NewRequest("GET", "/vouchers/bad!code", nil)
	req.RemoteAddr = "203.0.113.9:4001"
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusTooManyRequests, rec.Code, "counted before authentication: no key is needed to be limited")
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
	status, _ := do(s, "GET", "/vouchers/bad!code", "198.51.100.1:4000", "Bearer api-1")
	require.Equal(t, 404, status, "another client")
	for i := 0; i < 5; i++ {
		status, _ := do(s, "GET", "/vouchers/bad!code", "127.0.0.1:4000", "Bearer api-1")
		require.Equal(t, 404, status, "loopback is not limited by default")
	}
	require.Equal(t, []string{"client"}, *hits)
}

func TestRateLimitPerKey(t *testing.T) {
	t.Parallel()
	s, hits := newLimitedServer(t, RateLimits{PerKey: Rate{PerSecond: 0.01, Burst: 2}, Loopback: true})
	for i, remote := range []string{"203.0.113.9:1", "198.51.100.1:1"} {
		status, _ := do(s, "GET", "/vouchers/bad!code", remote, "Bearer api-1")
		require.Equal(t, 404, status, i)
	}
	status, body := do(s, "GET", "/vouchers/bad!code", "127.0.0.1:1", "Bearer api-1")
	require.Equal(t, 429, status, "the key's bucket is shared by its clients; Loopback set: loopback counts")
	require.Contains(t, body, "API key")
	status, _ = do(s, "GET", "/vouchers/bad!code", "127.0.0.1:1", "Bearer api-2")
	require.Equal(t, 404, status, "another key")
	require.Equal(t, []string{"key"}, *hits)
}

func TestClientAddr(t *testing.T) {
	t.Parallel()
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	for _, tc := range []struct {
		name, remote string
		xff          []string
		trusted      []netip.Prefix
		want         string
	}{
		{"the TCP peer", "203.0.113.9:4000", nil, nil, "203.0.113.9"},
		{"X-Forwarded-For ignored by default", "10.1.1.1:4000", []string{"198.51.100.1"}, nil, "10.1.1.1"},
		{"an untrusted peer's header ignored", "203.0.113.9:4000", []string{"198.51.100.1"}, proxies, "203.0.113.9"},
		{"a trusted proxy's client", "10.1.1.1:4000", []string{"198.51.100.1"}, proxies, "198.51.100.1"},
		{"right-most untrusted", "10.1.1.1:4000", []string{"1.1.1.1, 198.51.100.1, 10.2.2.2"}, proxies, "198.51.100.1"},
		{"spoofed left entries do not count", "10.1.1.1:4000", []string{"6.6.6.6", "198.51.100.1"}, proxies, "198.51.100.1"},
		{"all trusted: the left-most", "10.1.1.1:4000", []string{"10.3.3.3, 10.2.2.2"}, proxies, "10.3.3.3"},
		{"garbage stops the walk", "10.1.1.1:4000", []string{"6.6.6.6, junk, 10.2.2.2"}, proxies, "10.2.2.2"},
		{"no header", "10.1.1.1:4000", nil, proxies, "10.1.1.1"},
		{"IPv6 peer", "[fd00::1]:4000", []string{"2001:db8::7"}, proxies, "2001:db8::7"},
	} {
		s := &Server{cfg: Config{RateLimits: RateLimits{TrustedProxies: tc.trusted}}}
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		require.Equal(t, tc.want, s.clientAddr(r), tc.name)
	}
}
