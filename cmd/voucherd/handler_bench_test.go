package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
)

// BenchmarkHandler measures the served handler (routes, auth, metrics,
// service, gate, store) of a flash-sync stack per request, without
// net/http's connection work: each iteration calls ServeHTTP with one
// reused request whose body carries a fresh customerId and orderId. Its
// allocs/op and B/op do not depend on the machine's load; ns/op does, and
// cpu-ns/op (the process's user and system CPU time per iteration, the
// stack's background work included) much less.
// Sub-benchmarks: healthz (GET /healthz, the no-op route); refusal (a
// reservation of a sold-out flash voucher: 409 HELD_OUT from the gate's
// sold-out cache, no Redis or PostgreSQL call); take (a reservation that
// takes a use: Redis script and PostgreSQL write per request; give it a
// fixed count, e.g. -benchtime 2000x); take/standard (the same of a
// standard voucher in the same stack: one PostgreSQL write, no gate).
// Every sub-benchmark also counts what the stack asked of Redis per
// iteration, from the shared test Redis's INFO commandstats (this process
// is its only client): redis-scripts/op the scripts run (EVALSHA and
// EVAL), redis-cmds/op every command, those the scripts ran included; -v
// logs the count per command.
//
//	go test -run '^$' -bench 'Handler' -benchmem ./cmd/voucherd/
func BenchmarkHandler(b *testing.B) {
	h, soldOut, plenty, standard := handlerStack(b)
	b.Run("healthz", func(b *testing.B) {
		req := newBenchRequest(b, http.MethodGet, "/healthz")
		w := &discardWriter{h: http.Header{}}
		defer reportCPU(b)()
		defer reportRedisCalls(b)()
		for b.Loop() {
			clear(w.h)
			w.status = 0
			h.ServeHTTP(w, req.next())
			if w.status != http.StatusOK {
				b.Fatalf("status %d", w.status)
			}
		}
	})
	for _, c := range []struct {
		name, code string
		status     int
	}{
		{"refusal", soldOut, http.StatusConflict},
		{"take", plenty, http.StatusCreated},
		{"take/standard", standard, http.StatusCreated},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := newBenchRequest(b, http.MethodPost, "/vouchers/"+c.code+"/reservations")
			w := &discardWriter{h: http.Header{}}
			base := time.Now().UnixNano() / 1000 % 1_000_000_000 * 1_000_000
			n := int64(0)
			defer reportCPU(b)()
			defer reportRedisCalls(b)()
			for b.Loop() {
				n++
				clear(w.h)
				w.status = 0
				r := req.reserve(base+n, 5000)
				h.ServeHTTP(w, r)
				if w.status != c.status {
					b.Fatalf("status %d, want %d", w.status, c.status)
				}
			}
		})
	}
}

// handlerStack starts a flash-sync stack and returns its served handler, a
// sold-out flash voucher whose refusals come from the gate's sold-out
// cache, a flash voucher with more uses than any run takes, and a
// standard voucher with as many.
func handlerStack(t testing.TB) (h http.Handler, soldOut, plenty, standard string) {
	s := newStack(t, stackOptions{flash: true})
	soldOut = s.createVoucher(voucherSpec{TotalLimit: 3})
	for i := range 3 {
		r := s.reserve(soldOut, int64(i+1), "sell-"+strconv.Itoa(i), 5000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	}
	hits := s.app.gate.SoldOutHits()
	require.Eventually(t, func() bool {
		r := s.reserve(soldOut, 99, "probe-"+strconv.FormatInt(time.Now().UnixNano(), 10), 5000)
		require.Equal(t, http.StatusConflict, r.status, string(r.raw))
		return s.app.gate.SoldOutHits() > hits
	}, 10*time.Second, 20*time.Millisecond)
	notFlash := false
	return s.app.server.Handler, soldOut, s.createVoucher(voucherSpec{TotalLimit: 1 << 30}),
		s.createVoucher(voucherSpec{TotalLimit: 1 << 30, Flash: &notFlash})
}

// reportRedisCalls starts counting the commands the shared test Redis
// runs; the function it returns reports them per iteration:
// redis-scripts/op (EVALSHA and EVAL) and redis-cmds/op (every command,
// those run by scripts included, the count's own INFO left out), and logs
// the count of each command.
func reportRedisCalls(b *testing.B) func() {
	addr := testenv.Redis(b).Addr
	start := redisCommandCalls(b, addr)
	return func() {
		end := redisCommandCalls(b, addr)
		var scripts, all int64
		names := make([]string, 0, len(end))
		for name, n := range end {
			d := n - start[name]
			if name == "info" || d == 0 {
				continue
			}
			names = append(names, name)
			all += d
			if name == "evalsha" || name == "eval" {
				scripts += d
			}
		}
		slices.Sort(names)
		var per strings.Builder
		for _, name := range names {
			fmt.Fprintf(&per, " %s=%.2f", name, float64(end[name]-start[name])/float64(b.N))
		}
		b.Logf("redis commands per iteration (N=%d):%s", b.N, per.String())
		b.ReportMetric(float64(scripts)/float64(b.N), "redis-scripts/op")
		b.ReportMetric(float64(all)/float64(b.N), "redis-cmds/op")
	}
}

// redisCommandCalls returns the calls of each command the Redis at addr
// has run (INFO commandstats), by lower-case command name.
func redisCommandCalls(b *testing.B, addr string) map[string]int64 {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	require.NoError(b, err)
	defer c.Close()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(b, err)
	calls := map[string]int64{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(n, 10, 64)
		require.NoError(b, err)
		calls[strings.TrimPrefix(name, "cmdstat_")] = v
	}
	return calls
}

// reportCPU starts counting the process's CPU time; the function it returns
// reports it per iteration as cpu-ns/op.
func reportCPU(b *testing.B) func() {
	start := processCPU(b)
	return func() {
		b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
	}
}

// processCPU returns the user and system CPU time of this process so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchRequest is one *http.Request reused by every iteration, with its
// body rewritten in place.
type benchRequest struct {
	r    *http.Request
	body benchBody
}

func newBenchRequest(b testing.TB, method, path string) *benchRequest {
	u, err := url.Parse(path)
	require.NoError(b, err)
	br := &benchRequest{}
	br.r = &http.Request{
		Method: method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Host: "127.0.0.1", RemoteAddr: "127.0.0.1:40000", RequestURI: path,
		Header: http.Header{
			"Authorization": {"Bearer " + testAPIToken},
			"Content-Type":  {"application/json"},
		},
	}
	br.r = br.r.WithContext(context.Background())
	return br
}

// next returns the request with its body rewound.
func (br *benchRequest) next() *http.Request {
	br.body.off = 0
	br.r.Body = &br.body
	br.r.ContentLength = int64(len(br.body.b))
	return br.r
}

// reserve writes a reservation body for customer n with orderId "h<n>".
func (br *benchRequest) reserve(n, amount int64) *http.Request {
	b := append(br.body.b[:0], `{"customerId":`...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, `,"orderId":"h`...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, `","orderAmount":`...)
	b = strconv.AppendInt(b, amount, 10)
	br.body.b = append(b, '}')
	return br.next()
}

// benchBody is a request body read from a reused buffer.
type benchBody struct {
	b   []byte
	off int
}

func (r *benchBody) Read(p []byte) (int, error) {
	if r.off >= len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.off:])
	r.off += n
	return n, nil
}

func (r *benchBody) Close() error { return nil }

// discardWriter is a ResponseWriter that keeps the status and drops the body.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.h }

func (w *discardWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(p), nil
}
