package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/live"
)

// sseClient has no overall timeout: streams live as long as the test wants.
var sseClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 128}}

// liveStream is an open GET /vouchers/{code}/live.
type liveStream struct {
	t      testing.TB
	resp   *http.Response
	cancel context.CancelFunc
	events chan sseEvent
}

type sseEvent struct {
	name string
	data []byte
}

// openLive opens the stream with the API token in the Authorization header
// (or, with query set, the read token as ?token=) and fails unless it
// answers 200.
func (s *stack) openLive(code string, query bool) *liveStream {
	s.t.Helper()
	token := testAPIToken
	if query {
		token = testReadToken
	}
	resp, cancel := s.liveRequest(code, token, query)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		cancel()
		s.t.Fatalf("GET /vouchers/%s/live: %d %s", code, resp.StatusCode, body)
	}
	require.Equal(s.t, "text/event-stream", resp.Header.Get("Content-Type"))
	ls := &liveStream{t: s.t, resp: resp, cancel: cancel, events: make(chan sseEvent, 64)}
	go ls.read()
	s.t.Cleanup(ls.close)
	return ls
}

func (s *stack) liveRequest(code, token string, query bool) (*http.Response, context.CancelFunc) {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	url := s.base + "/vouchers/" + code + "/live"
	if query && token != "" {
		url += "?token=" + token
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(s.t, err)
	if !query && token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := sseClient.Do(req)
	require.NoError(s.t, err)
	return resp, cancel
}

// read parses the event stream (event: and data: lines, blank line ends an
// event, comments ignored) into ls.events.
func (ls *liveStream) read() {
	defer close(ls.events)
	sc := bufio.NewScanner(ls.resp.Body)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.name != "" || ev.data != nil {
				ls.events <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = append(ev.data, strings.TrimPrefix(line, "data: ")...)
		}
	}
}

func (ls *liveStream) close() {
	ls.cancel()
	_ = ls.resp.Body.Close()
}

// next returns the next snapshot, failing after timeout.
func (ls *liveStream) next(timeout time.Duration) live.Snapshot {
	ls.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-ls.events:
			require.True(ls.t, ok, "the stream ended")
			if ev.name != "snapshot" {
				ls.t.Logf("event %s: %s", ev.name, ev.data)
				continue
			}
			var s live.Snapshot
			require.NoError(ls.t, json.Unmarshal(ev.data, &s), string(ev.data))
			return s
		case <-deadline:
			ls.t.Fatalf("no snapshot within %v", timeout)
		}
	}
}

// liveCounts are the numbers the live view shows, as the API and the
// database report them.
type liveCounts struct {
	Remaining, Reserved, Confirmed, Released, TotalLimit int64
}

func (s *stack) liveCountsNow(code string) liveCounts {
	s.t.Helper()
	r := s.do(http.MethodGet, "/vouchers/"+code, nil)
	require.Equal(s.t, http.StatusOK, r.status, string(r.raw))
	return liveCounts{
		Remaining: r.num("remaining"), Reserved: r.num("reserved"), Confirmed: r.num("confirmed"),
		Released: int64(s.state(code).released), TotalLimit: r.num("totalLimit"),
	}
}

func snapshotCounts(s live.Snapshot) liveCounts {
	c := liveCounts{Remaining: int64(s.Remaining), Reserved: int64(s.Reserved), Confirmed: int64(s.Confirmed), TotalLimit: int64(s.TotalLimit), Released: -1}
	if s.Released != nil {
		c.Released = *s.Released
	}
	return c
}

// someSales reserves n uses with fresh customers and orders, then confirms
// one and releases one of them.
func (s *stack) someSales(code string, n int, prefix string) {
	s.t.Helper()
	for i := 0; i < n; i++ {
		r := s.reserve(code, s.codes.Add(1)+1000, fmt.Sprintf("%s-%d", prefix, i), 5000)
		require.Equal(s.t, http.StatusCreated, r.status, string(r.raw))
	}
	require.Equal(s.t, http.StatusOK, s.do(http.MethodPost, "/vouchers/"+code+"/reservations/"+prefix+"-0/confirm", nil).status)
	require.Equal(s.t, http.StatusOK, s.do(http.MethodDelete, "/vouchers/"+code+"/reservations/"+prefix+"-1", nil).status)
}

// The stream's snapshots match GET /vouchers/{code} within two ticks, count
// this instance's reservations and rejections, and the route answers
// errors as the API does.
func TestLiveStreamMatchesVoucher(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	code := s.createVoucher(voucherSpec{TotalLimit: 50})
	s.someSales(code, 5, "a")

	ls := s.openLive(code, false)
	first := ls.next(5 * time.Second)
	require.Equal(t, code, first.Code)
	require.Equal(t, live.ScopeInstance, first.Scope)
	require.Equal(t, s.liveCountsNow(code), snapshotCounts(first))
	require.Equal(t, liveCounts{Remaining: 46, Reserved: 3, Confirmed: 1, Released: 1, TotalLimit: 50}, snapshotCounts(first))

	// More sales, and a rejection: customer 7 may hold one use only.
	s.someSales(code, 6, "b")
	require.Equal(t, http.StatusCreated, s.reserve(code, 7, "c-1", 5000).status)
	r := s.reserve(code, 7, "c-2", 5000)
	require.Equal(t, http.StatusConflict, r.status, string(r.raw))
	want := s.liveCountsNow(code)
	tick := s.app.live.Interval()
	deadline := time.Now().Add(2*tick + tick/2)
	var got live.Snapshot
	var sawRate bool
	for {
		got = ls.next(time.Until(deadline) + 10*time.Millisecond)
		sawRate = sawRate || got.ReservationsPerSecond > 0
		if snapshotCounts(got) == want {
			break
		}
		require.True(t, time.Now().Before(deadline), "no snapshot matched %+v within two ticks; last %+v", want, snapshotCounts(got))
	}
	require.Equal(t, liveCounts{Remaining: 40, Reserved: 8, Confirmed: 2, Released: 2, TotalLimit: 50}, want)
	require.Equal(t, map[string]int64{"ALREADY_USED": 1}, got.Rejections)
	if !sawRate {
		got = ls.next(2 * tick)
		sawRate = got.ReservationsPerSecond > 0
	}
	require.True(t, sawRate, "the stream never reported a reservation rate")

	// The page's way in: the token as ?token=.
	q := s.openLive(code, true)
	require.Equal(t, want, snapshotCounts(q.next(5*time.Second)))

	// Errors before the stream starts are the API's JSON errors.
	for _, tc := range []struct {
		name, code, token string
		query             bool
		status            int
		errCode           string
	}{
		{"no token", code, "", false, http.StatusUnauthorized, "UNAUTHORIZED"},
		{"wrong token", code, "nope", false, http.StatusUnauthorized, "UNAUTHORIZED"},
		{"wrong query token", code, "nope", true, http.StatusUnauthorized, "UNAUTHORIZED"},
		{"reservation key as query token", code, testAPIToken, true, http.StatusForbidden, "FORBIDDEN"},
		{"admin key as query token", code, testAdminToken, true, http.StatusForbidden, "FORBIDDEN"},
		{"unknown voucher", "NOPE" + code, testAPIToken, false, http.StatusNotFound, "VOUCHER_NOT_FOUND"},
	} {
		resp, cancel := s.liveRequest(tc.code, tc.token, tc.query)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		cancel()
		require.Equal(t, tc.status, resp.StatusCode, "%s: %s", tc.name, body)
		var e map[string]any
		require.NoError(t, json.Unmarshal(body, &e), "%s: %s", tc.name, body)
		require.Equal(t, tc.errCode, e["error"], tc.name)
	}

	// The stream ends with its client, and the voucher's feed with its last
	// stream.
	ls.close()
	q.close()
	require.Eventually(t, func() bool { return s.app.live.Watchers(code) == 0 }, 5*time.Second, 20*time.Millisecond)
}

// Fifty open streams of one voucher cost about one read of it per tick, not
// fifty.
func TestLiveManyClientsShareReads(t *testing.T) {
	t.Parallel()
	// No expiry runs during the test, so the query counter counts the live
	// view alone.
	// The events loop polls the store on its own; it is kept out of the
	// count with the expiry job.
	s := newStack(t, stackOptions{tweak: func(c *Config) { c.ExpiryInterval, c.Events.Poll = time.Hour, time.Hour }})
	code := s.createVoucher(voucherSpec{TotalLimit: 100})
	s.someSales(code, 4, "a")
	want := s.liveCountsNow(code)

	const clients = 50
	streams := make([]*liveStream, clients)
	parallel(clients, 10, func(i int) { streams[i] = s.openLive(code, false) })
	for _, ls := range streams {
		require.Equal(t, want, snapshotCounts(ls.next(5*time.Second)))
	}
	require.Equal(t, clients, s.app.live.Watchers(code))

	tick := s.app.live.Interval()
	// Work the setup left to the background (the events loop sequencing the
	// sales' events, on loaded cores later than here) ends before the count
	// starts: a tick with no more than the live view's own two reads.
	require.Eventually(t, func() bool {
		q := s.app.store.Queries()
		time.Sleep(tick)
		return s.app.store.Queries()-q <= 2
	}, 30*time.Second, 10*time.Millisecond)
	before := s.app.store.Queries()
	start := time.Now()
	var snapshots atomic.Int64
	var wg sync.WaitGroup
	for _, ls := range streams {
		wg.Add(1)
		go func(ls *liveStream) {
			defer wg.Done()
			deadline := time.After(3 * tick)
			for {
				select {
				case ev, ok := <-ls.events:
					if !ok {
						return
					}
					if ev.name == "snapshot" {
						snapshots.Add(1)
					}
				case <-deadline:
					return
				}
			}
		}(ls)
	}
	wg.Wait()
	queries := s.app.store.Queries() - before
	elapsed := time.Since(start)
	ticks := int64(elapsed/tick) + 1
	t.Logf("%d clients, %v: %d snapshots delivered, %d queries", clients, elapsed.Round(time.Millisecond), snapshots.Load(), queries)
	require.GreaterOrEqual(t, snapshots.Load(), int64(clients*2), "every client gets a snapshot per tick")
	// A tick reads the voucher and its released count: two statements.
	require.LessOrEqual(t, queries, 2*ticks, "reads grow with the number of clients")
	require.Less(t, queries, int64(10))
}

// TestLiveBrowserPage loads the live page in headless Chromium during a
// sale and checks that its numbers follow the API; it keeps a screenshot.
func TestLiveBrowserPage(t *testing.T) {
	t.Parallel()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		chromium = "/usr/bin/chromium"
		if _, serr := os.Stat(chromium); serr != nil {
			t.Fatalf("headless Chromium is needed for the live page test and was not found (%v): apt-get install chromium (or run scripts/deps.sh)", err)
		}
	}
	s := newStack(t, stackOptions{})
	code := s.createVoucher(voucherSpec{TotalLimit: 200})
	s.someSales(code, 5, "a")
	require.Equal(t, http.StatusCreated, s.reserve(code, 7, "r-1", 5000).status)

	b := startBrowser(t, chromium)
	page := b.open(s.base + "/ui/vouchers/" + code + "?token=" + testReadToken)

	// The page shows what the API says.
	want := s.liveCountsNow(code)
	start := page.waitMatch(want, 10*time.Second)
	t.Logf("page at open: %+v", start)

	// A sale in progress: reservations arrive while the page is open.
	samplesBefore := page.number("samples")
	seen := map[int64]bool{start.Remaining: true}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Rejected: customer 7 holds the one use allowed.
		if r := s.reserve(code, 7, "r-2", 5000); r.status != http.StatusConflict {
			t.Errorf("reserve r-2: %d %s", r.status, r.raw)
		}
		for i := 0; i < 30; i++ {
			r := s.reserve(code, 5000+int64(i), fmt.Sprintf("live-%d", i), 5000)
			if r.status != http.StatusCreated {
				t.Errorf("reserve live-%d: %d %s", i, r.status, r.raw)
				return
			}
			time.Sleep(70 * time.Millisecond)
		}
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(150 * time.Millisecond):
			seen[page.number("remaining")] = true
		}
	}
	want = s.liveCountsNow(code)
	end := page.waitMatch(want, 2*s.app.live.Interval()+5*time.Second)
	seen[end.Remaining] = true
	t.Logf("page at end: %+v; remaining values seen: %v", end, seen)
	require.Equal(t, start.Remaining-30, end.Remaining)
	require.GreaterOrEqual(t, len(seen), 3, "the page did not follow the sale: %v", seen)
	require.Greater(t, page.number("samples"), samplesBefore)
	peak := page.text("rps-peak")
	require.NotEqual(t, "0", peak)
	require.NotEqual(t, "0.0", peak)
	require.Equal(t, "1", page.text("rej-ALREADY_USED"))
	require.Equal(t, "live", page.text("status"))
	points, err := page.eval(`document.querySelector("#chart-rps polyline").getAttribute("data-points")`)
	require.NoError(t, err)
	require.NotEqual(t, "", points)
	require.NotEqual(t, "1", points, "the chart has a single point")

	png := page.screenshot()
	dir := os.Getenv("VOUCHERD_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "live-page-"+code+".png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot of the live page: %s", path)

	// The page itself: no token needed, a strict CSP, the same page for
	// any valid code (it tells nothing of which codes exist); a code that
	// cannot exist is refused.
	resp, err := http.Get(s.base + "/ui/vouchers/" + code)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
	require.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"))
	resp, err = http.Get(s.base + "/ui/vouchers/bad%20code")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// browser is headless Chromium driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: NUL-terminated JSON on fds 3 and 4), which
// needs no WebSocket client and no free port.
type browser struct {
	t      testing.TB
	cmd    *exec.Cmd
	in     *os.File
	mu     sync.Mutex
	nextID int
	waits  map[int]chan cdpMessage
	stderr *lockedBuffer
	closed chan struct{}
}

type cdpMessage struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func startBrowser(t testing.TB, path string) *browser {
	t.Helper()
	profile := t.TempDir()
	cmdIn, toBrowser, err := os.Pipe()
	require.NoError(t, err)
	fromBrowser, cmdOut, err := os.Pipe()
	require.NoError(t, err)
	b := &browser{t: t, in: toBrowser, waits: map[int]chan cdpMessage{}, stderr: new(lockedBuffer), closed: make(chan struct{})}
	b.cmd = exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--no-default-browser-check", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-extensions", "--mute-audio",
		"--user-data-dir="+profile, "--remote-debugging-pipe", "--window-size=1200,800", "about:blank")
	b.cmd.ExtraFiles = []*os.File{cmdIn, cmdOut} // fd 3: commands in, fd 4: answers out
	b.cmd.Stderr = b.stderr
	require.NoError(t, b.cmd.Start())
	_ = cmdIn.Close()
	_ = cmdOut.Close()
	exited := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(exited) }()
	go b.readLoop(fromBrowser)
	// Registered after TempDir, so it runs first: the profile is removed
	// only once Chromium is gone.
	t.Cleanup(func() {
		_, _ = b.call("", "Browser.close", nil, 3*time.Second)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = b.cmd.Process.Kill()
			<-exited
		}
		_ = toBrowser.Close()
		_ = fromBrowser.Close()
		if t.Failed() {
			t.Logf("chromium stderr:\n%s", tail(b.stderr.String(), 4000))
		}
	})
	return b
}

// lockedBuffer collects Chromium's stderr, which it writes while the test
// may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (b *browser) readLoop(r io.Reader) {
	defer close(b.closed)
	br := bufio.NewReader(r)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMessage
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == 0 {
			continue // events
		}
		b.mu.Lock()
		ch := b.waits[m.ID]
		delete(b.waits, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// call sends one command (to a page session when session is set) and waits
// for its answer.
func (b *browser) call(session, method string, params any, timeout time.Duration) (json.RawMessage, error) {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpMessage, 1)
	b.waits[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if params == nil {
		msg["params"] = map[string]any{}
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	if _, err := b.in.Write(append(data, 0)); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		return m.Result, nil
	case <-b.closed:
		return nil, fmt.Errorf("%s: chromium went away", method)
	case <-time.After(timeout):
		return nil, fmt.Errorf("%s: no answer within %v", method, timeout)
	}
}

// page is one browser tab.
type page struct {
	b       *browser
	session string
}

func (b *browser) open(url string) *page {
	b.t.Helper()
	res, err := b.call("", "Target.createTarget", map[string]any{"url": url}, 20*time.Second)
	require.NoError(b.t, err, "chromium: %s", tail(b.stderr.String(), 2000))
	var target struct {
		TargetID string `json:"targetId"`
	}
	require.NoError(b.t, json.Unmarshal(res, &target))
	res, err = b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, 10*time.Second)
	require.NoError(b.t, err)
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	require.NoError(b.t, json.Unmarshal(res, &attached))
	return &page{b: b, session: attached.SessionID}
}

// eval evaluates a JavaScript expression in the page and returns its value
// as a string ("" for null).
func (p *page) eval(expr string) (string, error) {
	res, err := p.b.call(p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, 10*time.Second)
	if err != nil {
		return "", err
	}
	var out struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		return "", err
	}
	if out.ExceptionDetails != nil {
		return "", errors.New(out.ExceptionDetails.Text)
	}
	if out.Result.Value == nil {
		return "", nil
	}
	return fmt.Sprint(out.Result.Value), nil
}

// text returns the text of the element with the id ("" when absent).
func (p *page) text(id string) string {
	p.b.t.Helper()
	v, err := p.eval(fmt.Sprintf(`(function(){var e=document.getElementById(%q);return e?e.textContent:null})()`, id))
	require.NoError(p.b.t, err)
	return v
}

// number returns the element's text as an integer, -1 when it is not one.
func (p *page) number(id string) int64 {
	p.b.t.Helper()
	var n int64
	if _, err := fmt.Sscan(p.text(id), &n); err != nil {
		return -1
	}
	return n
}

func (p *page) counts() liveCounts {
	return liveCounts{
		Remaining: p.number("remaining"), Reserved: p.number("reserved"), Confirmed: p.number("confirmed"),
		Released: p.number("released"), TotalLimit: p.number("total"),
	}
}

// waitMatch waits until the page shows want and returns what it shows.
func (p *page) waitMatch(want liveCounts, timeout time.Duration) liveCounts {
	p.b.t.Helper()
	deadline := time.Now().Add(timeout)
	var got liveCounts
	for {
		got = p.counts()
		if got == want {
			return got
		}
		if time.Now().After(deadline) {
			p.b.t.Fatalf("the page shows %+v, the API %+v (status %q)\nchromium: %s", got, want, p.text("status"), tail(p.b.stderr.String(), 2000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *page) screenshot() []byte {
	p.b.t.Helper()
	res, err := p.b.call(p.session, "Page.captureScreenshot", map[string]any{"format": "png"}, 20*time.Second)
	require.NoError(p.b.t, err)
	var shot struct {
		Data string `json:"data"`
	}
	require.NoError(p.b.t, json.Unmarshal(res, &shot))
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	require.NoError(p.b.t, err)
	require.True(p.b.t, bytes.HasPrefix(png, []byte("\x89PNG")), "not a PNG")
	return png
}
