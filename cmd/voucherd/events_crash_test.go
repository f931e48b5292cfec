package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
)

// serveProcess starts this test binary as `voucherd serve` on a free port
// and waits until it answers.
func serveProcess(t testing.TB, dbURL string, env ...string) (base string, cmd *exec.Cmd) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cmd = exec.Command(exe, "serve")
	cmd.Env = append(os.Environ(), "VOUCHERD_ADDR="+addr, "VOUCHERD_DATABASE_URL="+dbURL,
		"VOUCHERD_ADMIN_TOKEN="+testAdminToken, "VOUCHERD_API_TOKEN="+testAPIToken, "VOUCHERD_LOG_LEVEL=warn")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base = "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond)
	return base, cmd
}

// TestWebhookDeliveriesSurviveKill9: voucherd is killed with SIGKILL while
// deliveries are in flight to a slow receiver and started again: every
// event of the feed is delivered, and only events that were in flight may
// arrive twice.
func TestWebhookDeliveriesSurviveKill9(t *testing.T) {
	t.Parallel()
	dbURL := testenv.Postgres(t).URL
	env := []string{"VOUCHERD_WEBHOOK_ALLOW_PRIVATE=true", "VOUCHERD_WEBHOOK_TIMEOUT=1s",
		"VOUCHERD_WEBHOOK_BACKOFF=100ms", "VOUCHERD_WEBHOOK_BACKOFF_MAX=200ms", "VOUCHERD_EVENTS_POLL=20ms"}
	base, first := serveProcess(t, dbURL, env...)
	s := &stack{t: t, base: base}

	rcv := newReceiver(t)
	slow := rcv.srv.Config.Handler
	rcv.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
		slow.ServeHTTP(w, r)
	})
	_, secret := s.subscribe(rcv.srv.URL, "reservation.reserved")
	rcv.secret.Store(secret)
	const n = 8
	codes := make([]string, n)
	for i := range codes {
		codes[i] = fmt.Sprintf("CRASH%d", i)
		r := s.doToken(http.MethodPost, "/vouchers", map[string]any{"code": codes[i], "discountAmount": 100,
			"totalLimit": 100, "startsAt": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339),
			"endsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, testAdminToken)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	}
	parallel(n*10, 16, func(i int) {
		r := s.reserve(codes[i%n], int64(i+1), fmt.Sprintf("crash-%d", i), 5000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	})
	require.Eventually(t, func() bool { return len(rcv.events()) >= n }, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	before := len(rcv.events())

	base, _ = serveProcess(t, dbURL, env...)
	s.base = base
	var feed []receivedEvent
	require.Eventually(t, func() bool { feed = s.feedEvents(""); return len(feed) == n*10 }, 20*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		seen := map[int64]bool{}
		for _, e := range rcv.events() {
			seen[e.ID] = true
		}
		return len(seen) == len(feed)
	}, 60*time.Second, 50*time.Millisecond)
	count := map[int64]int{}
	for _, e := range rcv.events() {
		count[e.ID]++
	}
	dups := 0
	for _, e := range feed {
		require.Positive(t, count[e.ID], "event %d delivered", e.ID)
		dups += count[e.ID] - 1
	}
	t.Logf("%d delivered before the kill, %d delivered twice", before, dups)
	require.LessOrEqual(t, dups, n, "only the deliveries in flight (one per voucher) come twice")
}
