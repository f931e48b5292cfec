package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// noStore is a Store whose methods are never reached by these tests: the
// requests they send are decided before the service calls the store.
type noStore struct{ voucher.Store }

type keyMetrics struct {
	mu   sync.Mutex
	keys []string
}

func (m *keyMetrics) ObserveRequest(route, key, outcome string, status int, d time.Duration) {
	m.mu.Lock()
	m.keys = append(m.keys, key)
	m.mu.Unlock()
}

func (m *keyMetrics) last() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keys[len(m.keys)-1]
}

func newTestServer(t *testing.T, keys []Key) (*Server, *keyMetrics) {
	t.Helper()
	svc, err := voucher.NewService(voucher.ServiceConfig{Store: noStore{}})
	require.NoError(t, err)
	ring, err := NewKeyring(keys)
	require.NoError(t, err)
	m := &keyMetrics{}
	s, err := New(Config{Service: svc, Keys: ring, Metrics: m})
	require.NoError(t, err)
	return s, m
}

// send sends a request the service answers without its store: a reservation
// route (an invalid code: 404) or an admin route (a bad state: 400).
func send(s *Server, admin bool, remote, auth string) int {
	path := "/vouchers/bad!code"
	if admin {
		path = "/vouchers?state=bogus"
	}
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = remote
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec.Code
}

func TestKeyringSetValidates(t *testing.T) {
	t.Parallel()
	ring, err := NewKeyring([]Key{{Name: "a", Secret: "s1"}})
	require.NoError(t, err)
	for name, keys := range map[string][]Key{
		"empty name":      {{Name: "", Secret: "x"}},
		"name with space": {{Name: "a b", Secret: "x"}},
		"empty secret":    {{Name: "b", Secret: ""}},
		"name twice":      {{Name: "b", Secret: "x"}, {Name: "b", Secret: "y", Admin: true}},
		"secret twice":    {{Name: "b", Secret: "x"}, {Name: "c", Secret: "x", Admin: true}},
		"name too long":   {{Name: fmt.Sprintf("%065d", 0), Secret: "x"}},
	} {
		require.Error(t, ring.Set(keys), name)
	}
	api, admin := ring.Names()
	require.Equal(t, []string{"a"}, api, "a refused set keeps the keys in use")
	require.Empty(t, admin)
}

func TestAuthenticateByNamedKeys(t *testing.T) {
	t.Parallel()
	s, m := newTestServer(t, []Key{
		{Name: "checkout", Secret: "api-1"}, {Name: "billing", Secret: "api-2"},
		{Name: "ops", Secret: "adm-1", Admin: true}, {Name: "promo", Secret: "adm-2", Admin: true},
	})
	const remote = "203.0.113.9:4000"
	for _, tc := range []struct {
		name   string
		admin  bool
		auth   string
		status int
		key    string
	}{
		{"reservation key", false, "Bearer api-1", 404, "checkout"},
		{"second reservation key", false, "Bearer api-2", 404, "billing"},
		{"admin key opens reservation routes", false, "Bearer adm-2", 404, "promo"},
		{"scheme in any case", false, "bearer api-2", 404, "billing"},
		{"admin key", true, "Bearer adm-1", 400, "ops"},
		{"reservation key on an admin route", true, "Bearer api-1", 401, AnonymousKey},
		{"unknown secret", false, "Bearer nope", 401, AnonymousKey},
		{"prefix of a secret", false, "Bearer api-", 401, AnonymousKey},
		{"no header", false, "", 401, AnonymousKey},
		{"basic auth", false, "Basic api-1", 401, AnonymousKey},
	} {
		require.Equal(t, tc.status, send(s, tc.admin, remote, tc.auth), tc.name)
		require.Equal(t, tc.key, m.last(), tc.name)
	}
}

func TestNoKeysMeansLoopbackOnly(t *testing.T) {
	t.Parallel()
	s, m := newTestServer(t, []Key{{Name: "ops", Secret: "adm", Admin: true}})
	require.Equal(t, 404, send(s, false, "127.0.0.1:5000", ""))
	require.Equal(t, LoopbackKey, m.last())
	require.Equal(t, 403, send(s, false, "203.0.113.9:5000", "Bearer adm"))
	require.Equal(t, 400, send(s, true, "203.0.113.9:5000", "Bearer adm"))
}

// Keys replaced while requests run: a caller moves to the new key once it is
// added, and the old key is removed once no request carries it; no request
// is refused.
func TestKeyringSetWhileServing(t *testing.T) {
	t.Parallel()
	const rotations = 50
	s, _ := newTestServer(t, []Key{{Name: "k0", Secret: "secret-0"}})
	var current atomic.Int64
	var inflight [rotations + 1]atomic.Int64 // requests in flight by key
	var refused, sent atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				g := current.Load()
				inflight[g].Add(1)
				if current.Load() != g {
					inflight[g].Add(-1)
					continue
				}
				if send(s, false, "203.0.113.9:1", fmt.Sprintf("Bearer secret-%d", g)) != 404 {
					refused.Add(1)
				}
				sent.Add(1)
				inflight[g].Add(-1)
			}
		}()
	}
	key := func(i int64) Key { return Key{Name: fmt.Sprint("k", i), Secret: fmt.Sprint("secret-", i)} }
	for i := int64(1); i <= rotations; i++ {
		require.NoError(t, s.keys.Set([]Key{key(i - 1), key(i)}))
		current.Store(i)
		// Some requests with the new key, then none left with the old.
		for seen := sent.Load(); sent.Load() < seen+4; {
			time.Sleep(100 * time.Microsecond)
		}
		for inflight[i-1].Load() > 0 {
			time.Sleep(100 * time.Microsecond)
		}
		require.NoError(t, s.keys.Set([]Key{key(i)}))
	}
	close(stop)
	wg.Wait()
	require.Zero(t, refused.Load())
	require.Positive(t, sent.Load())
}

// TestLoopbackAddresses: IPv4, IPv6 and IPv4-mapped loopback addresses,
// with or without a port, are loopback; others are not.
func TestLoopbackAddresses(t *testing.T) {
	t.Parallel()
	for remote, want := range map[string]bool{
		"127.0.0.1:5000": true, "127.1.2.3:80": true, "[::1]:5000": true, "[::ffff:127.0.0.1]:5000": true,
		"::1": true, "127.0.0.1": true,
		"203.0.113.9:5000": false, "[2001:db8::1]:5000": false, "localhost:5000": false, "": false, "garbage": false,
	} {
		require.Equal(t, want, isLoopback(remote), remote)
	}
}

// TestRequestIDs: a usable X-Request-Id of the client is answered as it
// came; a missing or unusable one is replaced by a new id, a different one
// per request.
func TestRequestIDs(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil)
	id := func(got ...string) string {
		req := httptest.NewRequest(http.MethodGet, "/vouchers/bad!code", nil)
		req.RemoteAddr = "127.0.0.1:5000"
		for _, v := range got {
			req.Header.Add("X-Request-Id", v)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec.Header().Get("X-Request-Id")
	}
	require.Equal(t, "client-1", id("client-1"))
	require.Equal(t, "client-1", id("client-1", "client-2"))
	generated := map[string]bool{}
	for _, bad := range []string{"", strings.Repeat("x", 129), "a\nb"} {
		got := id(bad)
		require.Regexp(t, `^[0-9a-f]{16}$`, got, bad)
		generated[got] = true
	}
	generated[id()] = true
	require.Len(t, generated, 4)
}
