package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readmeExamples returns the shell block of README.md between the
// readme-examples markers.
func readmeExamples(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(raw), "<!-- readme-examples:begin")
	require.True(t, ok, "README.md has no readme-examples:begin marker")
	block, _, ok := strings.Cut(rest, "<!-- readme-examples:end -->")
	require.True(t, ok, "README.md has no readme-examples:end marker")
	_, code, ok := strings.Cut(block, "```sh\n")
	require.True(t, ok, "the README's example block is not a ```sh fence")
	code, _, ok = strings.Cut(code, "```")
	require.True(t, ok, "the README's example block is not closed")
	return code
}

// TestReadmeExamplesRunAgainstDev runs the README's example block with bash
// against `voucherd dev`, as a new user would: twice with no tokens, then
// twice against the same data with tokens set (the server started with them
// and the shell exporting them). The second run of each pass has a `date`
// that behaves as macOS's does (no -d, but -v), for the block's fallback. Every curl in the block fails on an HTTP
// error, so the block's exit status says whether it worked. Then `voucherd
// dev --reset` starts over: the vouchers of those runs are gone.
//
// It is not parallel: `voucherd dev` reads its tokens from the environment.
func TestReadmeExamplesRunAgainstDev(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "%s is needed to run the README's examples (scripts/deps.sh test installs it)", tool)
	}
	script := readmeExamples(t)
	bsdDate := bsdDateShim(t)
	dir := t.TempDir()
	// The PostgreSQL child may run as another user (when the test runs as
	// root), which must reach its folder under the test's temporary one.
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))

	var created []string // voucher codes the runs created
	for _, tokens := range []bool{false, true} {
		api, admin := "", ""
		if tokens {
			api, admin = "readme-api-token", "readme-admin-token"
		}
		t.Setenv("VOUCHERD_API_TOKEN", api)
		t.Setenv("VOUCHERD_ADMIN_TOKEN", admin)
		url, stop := startDev(t, dir)
		if tokens {
			// The server refuses a loopback caller without the token, so
			// the block passes only by sending the headers it says.
			resp, err := http.Get(url + "/vouchers/ANY")
			require.NoError(t, err)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		}
		for run := 1; run <= 2; run++ {
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
			cmd.Env = append(os.Environ(), "VOUCHERD_URL="+url)
			if run == 2 {
				cmd.Env = append(cmd.Env, "PATH="+bsdDate+string(os.PathListSeparator)+os.Getenv("PATH"))
			}
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "the README's examples failed (tokens set: %v, run %d):\n%s", tokens, run, out)
			text := string(out)
			require.Contains(t, text, `"status":"CONFIRMED"`, "run %d:\n%s", run, text)
			require.Contains(t, text, `"status":"RELEASED"`, "run %d:\n%s", run, text)
			require.Contains(t, text, `"confirmed":1`, "run %d:\n%s", run, text)
			require.Contains(t, text, `"remaining":999`, "run %d:\n%s", run, text)
			require.Contains(t, text, `"reason":"CUSTOMER_MISMATCH"`, "run %d:\n%s", run, text)
			require.Contains(t, text, `"error":"BUDGET_EXCEEDED"`, "run %d:\n%s", run, text)
			require.Contains(t, text, `"limit":"budget","budgetRemaining":1000`, "run %d:\n%s", run, text)
			require.Contains(t, text, `"budgetReserved":9000,"budgetConfirmed":0,"budgetRemaining":1000`, "run %d:\n%s", run, text)
			require.Contains(t, text, `"discountAmount":2900,"items":[`, "run %d:\n%s", run, text)
			m := regexp.MustCompile(`"code":"(FLASH-[0-9-]+)"`).FindStringSubmatch(text)
			require.NotNil(t, m, "no voucher code in the output:\n%s", text)
			created = append(created, m[1])
			m = regexp.MustCompile(`"endsAt":"([^"]+)"`).FindStringSubmatch(text)
			require.NotNil(t, m, "no endsAt in the output:\n%s", text)
			ends, err := time.Parse(time.RFC3339, m[1])
			require.NoError(t, err)
			require.WithinDuration(t, time.Now().Add(30*24*time.Hour), ends, time.Hour, "run %d: the window does not end 30 days ahead", run)
		}
		stop()
	}

	url, stop := startDev(t, dir, "--reset")
	defer stop()
	for _, code := range created {
		req, err := http.NewRequest(http.MethodGet, url+"/vouchers/"+code, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer readme-admin-token")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "voucher %s survived voucherd dev --reset", code)
	}
}

// bsdDateShim returns a folder holding a `date` that answers as macOS's
// (BSD) date does to the README's calls: -d is an illegal option, -v+Nd
// moves the date N days ahead.
func bsdDateShim(t *testing.T) string {
	t.Helper()
	real, err := exec.LookPath("date")
	require.NoError(t, err)
	dir := t.TempDir()
	shim := `#!/usr/bin/env bash
args=()
for a in "$@"; do
	case "$a" in
	-d | --date*) echo "date: illegal option -- d" >&2; exit 1 ;;
	-v+*d) n=${a#-v+}; args+=(-d "+${n%d} days") ;;
	-v*) echo "date shim: unsupported $a" >&2; exit 1 ;;
	*) args+=("$a") ;;
	esac
done
exec ` + real + ` "${args[@]}"
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "date"), []byte(shim), 0o755))
	return dir
}

// startDev runs `voucherd dev` in-process on free ports with its data in dir
// and returns its base URL once it answers, and a function that stops it.
func startDev(t *testing.T, dir string, args ...string) (string, func()) {
	t.Helper()
	ports := freePorts(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"dev", "--dir", dir, "--log-level", "warn",
			"--addr", fmt.Sprintf("127.0.0.1:%d", ports[0]),
			"--pg-port", fmt.Sprint(ports[1]), "--redis-port", fmt.Sprint(ports[2])}, args...), &out, &out)
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("voucherd dev: %v\n%s", err, out.String())
			}
		case <-time.After(60 * time.Second):
			t.Errorf("voucherd dev did not stop in 60s\n%s", out.String())
		}
	}
	t.Cleanup(stop)
	url := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("voucherd dev exited at start: %v\n%s", err, out.String())
		default:
		}
		if resp, err := http.Get(url + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, stop
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("voucherd dev not ready after 90s\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		require.NoError(t, ln.Close())
	}
	return ports
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestHelpSaysTrueDefaults checks the help of the subcommands that override
// serve's settings: they list only the flags they honour, with the defaults
// they use. Not parallel: the defaults come from the environment.
func TestHelpSaysTrueDefaults(t *testing.T) {
	t.Setenv("VOUCHERD_LOG_FORMAT", "")
	help := func(args ...string) string {
		var out bytes.Buffer
		err := run(context.Background(), append(args, "--help"), &out, &out)
		require.ErrorIs(t, err, flag.ErrHelp)
		return out.String()
	}
	flagNames := func(text string) []string {
		var names []string
		for _, m := range regexp.MustCompile(`(?m)^  -([a-z-]+)`).FindAllStringSubmatch(text, -1) {
			names = append(names, m[1])
		}
		return names
	}

	dev := help("dev")
	require.Regexp(t, `-log-format string\n\s+json or text \(VOUCHERD_LOG_FORMAT\) \(default "text"\)`, dev)
	for _, name := range []string{"database-url", "redis-addr", "migrate", "flash-writes", "kafka-brokers"} {
		require.NotContains(t, flagNames(dev), name, "dev sets %s itself", name)
	}
	require.Contains(t, flagNames(dev), "reset")
	require.Contains(t, dev, "VOUCHERD_API_TOKEN")

	serve := help("serve")
	require.Regexp(t, `-log-format string\n\s+json or text \(VOUCHERD_LOG_FORMAT\) \(default "json"\)`, serve)
	require.Contains(t, serve, "VOUCHERD_ADMIN_TOKEN")

	consume := help("consume")
	require.NotContains(t, flagNames(consume), "addr", "consume serves no HTTP")
	require.NotContains(t, flagNames(consume), "consumer", "consume always consumes")
	require.Contains(t, flagNames(consume), "kafka-group")

	reconcile := help("reconcile")
	for _, name := range []string{"migrate", "db-min-conns", "log-format", "log-level"} {
		require.NotContains(t, flagNames(reconcile), name, "reconcile sets %s itself", name)
	}
	require.Contains(t, flagNames(reconcile), "reconcile-grace")
}

// TestReadmeDescribesEveryVariable checks that README.md names every
// VOUCHERD_* variable `voucherd serve` reads, in full or in the short form
// of its configuration table (`VOUCHERD_KAFKA_TOPIC` / `_DLQ_TOPIC`).
func TestReadmeDescribesEveryVariable(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(raw)
	var cfg Config
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	registerServeFlags(fs, &cfg)
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		m := regexp.MustCompile(`\((VOUCHERD_[A-Z0-9_]+)\)`).FindStringSubmatch(f.Usage)
		require.NotNil(t, m, "flag -%s names no variable in its help", f.Name)
		names = append(names, m[1])
	})
	for _, m := range regexp.MustCompile(`(?m)^  (VOUCHERD_[A-Z0-9_]+)\s`).FindAllStringSubmatch(envOnlyHelp, -1) {
		names = append(names, m[1])
	}
	for _, name := range names {
		found := strings.Contains(readme, "`"+name+"`")
		for i, r := range name {
			found = found || (r == '_' && i >= len("VOUCHERD") && strings.Contains(readme, "`"+name[i:]+"`"))
		}
		require.True(t, found, "README.md does not describe %s", name)
	}
}

// TestWarmupCommandSaysWhetherInRedis runs `voucherd warmup` against a
// server: on a voucher that is loaded already (creating a flash voucher
// loads it) it says the voucher is in Redis, also in its JSON; after Redis
// lost it, that this call loaded it; while another loader holds the lock,
// that it is not in Redis yet; a standard voucher is refused.
func TestWarmupCommandSaysWhetherInRedis(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true})
	code := s.createVoucher(voucherSpec{})
	warmup := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"warmup", "--url", s.base, "--token", testAdminToken}, args...), &out, &errOut)
		return out.String() + errOut.String(), err
	}
	out, err := warmup(code)
	require.NoError(t, err, out)
	require.Equal(t, code+" is in Redis: it was there already; nothing changed\n", out)
	out, err = warmup("--json", code)
	require.NoError(t, err, out)
	require.JSONEq(t, `{"code":"`+code+`","inRedis":true,"loadedByThisCall":false}`, out)
	require.NoError(t, s.app.gate.Forget(context.Background(), code))
	out, err = warmup(code)
	require.NoError(t, err, out)
	require.Equal(t, code+" is in Redis: loaded by this call\n", out)

	// Another loader holds the voucher's lock and has not loaded it: after
	// a short wait the answer says it is not in Redis.
	ctx := context.Background()
	require.NoError(t, s.app.gate.Forget(ctx, code))
	unlock, ok, err := s.app.gate.Lock(ctx, code, 30*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	r := s.do(http.MethodPost, "/vouchers/"+code+"/warmup", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, map[string]any{"code": code, "inRedis": false, "loadedByThisCall": false}, r.body)
	out, err = warmup(code)
	require.Error(t, err, out)
	require.Contains(t, err.Error(), "not in Redis yet")
	unlock()
	out, err = warmup(code)
	require.NoError(t, err, out)
	require.Equal(t, code+" is in Redis: loaded by this call\n", out)

	standard := false
	plain := s.createVoucher(voucherSpec{Flash: &standard})
	out, err = warmup(plain)
	require.Error(t, err, out)
	require.Contains(t, err.Error(), "not a flash-sale voucher")
}
