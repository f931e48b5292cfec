package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/live"
	"github.com/voucherd/voucherd/internal/voucher"
)

// do sends method path from remote with auth (an Authorization value, or
// "" for none) and returns the status and body.
func do(s *Server, method, path, remote, auth string) (int, string) {
	req := httptest.NewRequest(method, path, nil)
	req.RemoteAddr = remote
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func TestReadKeys(t *testing.T) {
	t.Parallel()
	s, m := newTestServer(t, []Key{
		{Name: "checkout", Secret: "api-1"}, {Name: "ops", Secret: "adm-1", Admin: true},
		{Name: "dash", Secret: "read-1", Read: true},
	})
	const remote = "203.0.113.9:4000"
	for _, tc := range []struct {
		name, method, path, auth string
		status                   int
		key                      string
	}{
		{"read key reads a voucher", "GET", "/vouchers/bad!code", "Bearer read-1", 404, "dash"},
		{"read key cannot reserve", "POST", "/vouchers/bad!code/reservations", "Bearer read-1", 403, AnonymousKey},
		{"read key cannot confirm", "POST", "/vouchers/bad!code/reservations/o1/confirm", "Bearer read-1", 403, AnonymousKey},
		{"read key cannot release", "DELETE", "/vouchers/bad!code/reservations/o1", "Bearer read-1", 403, AnonymousKey},
		{"read key is no admin key", "GET", "/vouchers?state=bogus", "Bearer read-1", 403, AnonymousKey},
		{"reservation key reads a voucher", "GET", "/vouchers/bad!code", "Bearer api-1", 404, "checkout"},
		{"admin key reads a voucher", "GET", "/vouchers/bad!code", "Bearer adm-1", 404, "ops"},
		{"a longer token than any secret", "GET", "/vouchers/bad!code", "Bearer read-1-and-more", 401, AnonymousKey},
	} {
		status, body := do(s, tc.method, tc.path, remote, tc.auth)
		require.Equal(t, tc.status, status, "%s: %s", tc.name, body)
		require.Equal(t, tc.key, m.last(), tc.name)
	}
	require.Equal(t, []string{"dash"}, s.keys.ReadNames())
}

// A token in the URL (the live view's ?token=) may only be a read key.
func TestURLTokenOnlyReadKeys(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, []Key{
		{Name: "checkout", Secret: "api-1"}, {Name: "ops", Secret: "adm-1", Admin: true},
		{Name: "dash", Secret: "read-1", Read: true},
	})
	req := func(tok string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/vouchers/C/live", nil)
		r.RemoteAddr = "203.0.113.9:4000"
		return withURLToken(r, tok)
	}
	name, err := s.authenticate(req("read-1"), roleRead)
	require.NoError(t, err)
	require.Equal(t, "dash", name)
	for _, tok := range []string{"api-1", "adm-1"} {
		_, err := s.authenticate(req(tok), roleRead)
		require.Equal(t, voucher.CodeForbidden, voucher.CodeOf(err), tok)
	}
	_, err = s.authenticate(req("nope"), roleRead)
	require.Equal(t, voucher.CodeUnauthorized, voucher.CodeOf(err))
	_, err = s.authenticate(req("read-1"), roleAPI)
	require.Equal(t, voucher.CodeForbidden, voucher.CodeOf(err), "a URL token never opens a reservation route")
}

func TestKeyringRefusesReservedNames(t *testing.T) {
	t.Parallel()
	for _, keys := range [][]Key{
		{{Name: LoopbackKey, Secret: "x"}},
		{{Name: AnonymousKey, Secret: "x", Admin: true}},
		{{Name: voucher.SystemActor, Secret: "x", Admin: true}},
		{{Name: "both", Secret: "x", Admin: true, Read: true}},
	} {
		_, err := NewKeyring(keys)
		require.Error(t, err, keys[0].Name)
	}
}

// /metrics on the serving port names vouchers and keys: read and admin
// keys only; loopback clients only when neither is configured.
func TestMetricsNeedReadOrAdminKey(t *testing.T) {
	t.Parallel()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "voucherd_x 1\n") })
	newServer := func(keys []Key) *Server {
		svc, err := voucher.NewService(voucher.ServiceConfig{Store: noStore{}})
		require.NoError(t, err)
		ring, err := NewKeyring(keys)
		require.NoError(t, err)
		s, err := New(Config{Service: svc, Keys: ring, MetricsHandler: metrics})
		require.NoError(t, err)
		return s
	}
	s := newServer([]Key{{Name: "checkout", Secret: "api-1"}, {Name: "ops", Secret: "adm-1", Admin: true}, {Name: "dash", Secret: "read-1", Read: true}})
	const remote = "203.0.113.9:4000"
	for auth, want := range map[string]int{"": 401, "Bearer api-1": 403, "Bearer read-1": 200, "Bearer adm-1": 200, "Bearer nope": 401} {
		status, body := do(s, "GET", "/metrics", remote, auth)
		require.Equal(t, want, status, "%q: %s", auth, body)
	}
	status, _ := do(s, "GET", "/metrics", "127.0.0.1:4000", "")
	require.Equal(t, 401, status, "keys configured: loopback needs one too")

	s = newServer([]Key{{Name: "checkout", Secret: "api-1"}})
	status, _ = do(s, "GET", "/metrics", "127.0.0.1:4000", "")
	require.Equal(t, 200, status, "no read or admin key: loopback clients only")
	status, _ = do(s, "GET", "/metrics", remote, "Bearer api-1")
	require.Equal(t, 403, status)
}

// The live page answers alike for every code and reads nothing.
func TestLivePageReadsNothing(t *testing.T) {
	t.Parallel()
	var reads atomic.Int64
	hub, err := live.NewHub(live.Config{Voucher: func(ctx context.Context, code string) (voucher.Voucher, error) {
		reads.Add(1)
		return voucher.Voucher{}, voucher.Errorf(voucher.CodeVoucherNotFound, "not found")
	}})
	require.NoError(t, err)
	t.Cleanup(hub.Close)
	svc, err := voucher.NewService(voucher.ServiceConfig{Store: noStore{}})
	require.NoError(t, err)
	s, err := New(Config{Service: svc, APIToken: "api-1", Extra: LiveRoutes(hub)})
	require.NoError(t, err)
	var first string
	for _, code := range []string{"SECRETSALE", "NOPE", "x"} {
		status, body := do(s, "GET", "/ui/vouchers/"+code, "203.0.113.9:4000", "")
		require.Equal(t, 200, status, code)
		if first == "" {
			first = body
		}
		require.Equal(t, first, body, code)
	}
	status, _ := do(s, "GET", "/ui/vouchers/bad%20code", "203.0.113.9:4000", "")
	require.Equal(t, 404, status, "a code that cannot exist")
	require.Zero(t, reads.Load())
}

// /readyz names the dependency that is down, never its raw error.
func TestReadyzHidesErrors(t *testing.T) {
	t.Parallel()
	svc, err := voucher.NewService(voucher.ServiceConfig{Store: noStore{}})
	require.NoError(t, err)
	raw := errors.New("dial tcp 127.0.0.1:59909: connect: connection refused")
	for ready, want := range map[error]string{
		DependencyDown("postgres", raw): "not ready: postgres",
		raw:                             "not ready",
	} {
		s, err := New(Config{Service: svc, Ready: func(context.Context) error { return ready }})
		require.NoError(t, err)
		status, body := do(s, "GET", "/readyz", "203.0.113.9:4000", "")
		require.Equal(t, http.StatusServiceUnavailable, status)
		require.Contains(t, body, `"message":"`+want+`"`)
		require.False(t, strings.Contains(body, "127.0.0.1") || strings.Contains(body, "dial"), body)
	}
}

// Keys lost (SetClosed) are not keys never configured: loopback clients
// are refused too.
func TestClosedKeyringRefusesLoopback(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil)
	status, _ := do(s, "GET", "/vouchers/bad!code", "127.0.0.1:5000", "")
	require.Equal(t, 404, status, "no key configured: loopback clients get in")
	require.NoError(t, s.keys.SetClosed([]Key{{Name: "ops", Secret: "adm-1", Admin: true}}))
	status, _ = do(s, "GET", "/vouchers/bad!code", "127.0.0.1:5000", "")
	require.Equal(t, 403, status)
	status, _ = do(s, "GET", "/vouchers?state=bogus", "127.0.0.1:5000", "Bearer adm-1")
	require.Equal(t, 400, status, "the keys that remain work")
	require.NoError(t, s.keys.Set(nil))
	status, _ = do(s, "GET", "/vouchers/bad!code", "127.0.0.1:5000", "")
	require.Equal(t, 404, status, "Set opens the loopback door again")
}
