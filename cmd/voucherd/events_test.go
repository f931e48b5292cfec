package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/webhook"
)

// receiver is a webhook receiver that verifies every signature and keeps
// what it was sent, in arrival order.
type receiver struct {
	t      testing.TB
	srv    *httptest.Server
	secret atomic.Value // string
	fail   atomic.Bool  // answer 500 while set
	mu     sync.Mutex
	got    []receivedEvent
	bad    atomic.Int64
}

type receivedEvent struct {
	ID        int64           `json:"id"`
	Type      string          `json:"type"`
	CreatedAt time.Time       `json:"createdAt"`
	Data      json.RawMessage `json:"data"`
	header    string
	at        time.Time // when the receiver got it
}

func (e receivedEvent) field(name string) string {
	var m map[string]any
	_ = json.Unmarshal(e.Data, &m)
	s, _ := m[name].(string)
	return s
}

func newReceiver(t testing.TB) *receiver {
	r := &receiver{t: t}
	r.secret.Store("")
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if r.fail.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if !verifySignature(r.secret.Load().(string), req.Header.Get("Voucherd-Signature"), body) {
			r.bad.Add(1)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var e receivedEvent
		if err := json.Unmarshal(body, &e); err != nil {
			r.bad.Add(1)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		e.header, e.at = req.Header.Get("Voucherd-Event-Id"), time.Now()
		r.mu.Lock()
		r.got = append(r.got, e)
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// verifySignature checks "t=<unix>,v1=<hex>" as a receiver would.
func verifySignature(secret, header string, body []byte) bool {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return ts != "" && hmac.Equal([]byte(hex.EncodeToString(m.Sum(nil))), []byte(sig))
}

func (r *receiver) events() []receivedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedEvent(nil), r.got...)
}

// eventsStack is a stack whose webhooks may call the loopback receiver and
// retry quickly.
func eventsStack(t testing.TB, opts stackOptions) *stack {
	tweak := opts.tweak
	opts.tweak = func(c *Config) {
		c.Events.AllowPrivate = true
		c.Events.BackoffBase = 100 * time.Millisecond
		c.Events.BackoffMax = 400 * time.Millisecond
		c.Events.Poll = 20 * time.Millisecond
		if tweak != nil {
			tweak(c)
		}
	}
	return newStack(t, opts)
}

func (s *stack) subscribe(url string, events ...string) (id, secret string) {
	s.t.Helper()
	r := s.doToken(http.MethodPost, "/webhooks", map[string]any{"url": url, "events": events}, testAdminToken)
	require.Equal(s.t, http.StatusCreated, r.status, string(r.raw))
	return r.str("id"), r.str("secret")
}

// feedEvents reads the whole feed, optionally of one voucher.
func (s *stack) feedEvents(code string) []receivedEvent {
	s.t.Helper()
	var out []receivedEvent
	after := ""
	for {
		path := "/events?limit=1000"
		if code != "" {
			path += "&code=" + code
		}
		if after != "" {
			path += "&after=" + after
		}
		r := s.doToken(http.MethodGet, path, nil, testAdminToken)
		require.Equal(s.t, http.StatusOK, r.status, string(r.raw))
		var page struct {
			Events []receivedEvent `json:"events"`
			Next   string          `json:"next"`
		}
		require.NoError(s.t, json.Unmarshal(r.raw, &page))
		out = append(out, page.Events...)
		if len(page.Events) == 0 {
			return out
		}
		after = page.Next
	}
}

func TestWebhookConfirmedOnceSignedNothingForRefusals(t *testing.T) {
	t.Parallel()
	s := eventsStack(t, stackOptions{})
	rcv := newReceiver(t)
	_, secret := s.subscribe(rcv.srv.URL, "reservation.confirmed", "reservation.released")
	rcv.secret.Store(secret)
	code := s.createVoucher(voucherSpec{TotalLimit: 1})

	require.Equal(t, http.StatusCreated, s.reserve(code, 1, "wo-1", 5000).status)
	require.Equal(t, http.StatusCreated, s.reserve(code, 1, "wo-1", 5000).status, "a replay")
	require.Equal(t, http.StatusConflict, s.reserve(code, 2, "wo-2", 5000).status, "a refusal")
	require.Equal(t, http.StatusOK, s.do(http.MethodPost, "/vouchers/"+code+"/reservations/wo-1/confirm", nil).status)
	require.Equal(t, http.StatusOK, s.do(http.MethodPost, "/vouchers/"+code+"/reservations/wo-1/confirm", nil).status, "a replayed confirm")

	require.Eventually(t, func() bool { return len(rcv.events()) >= 1 }, 10*time.Second, 20*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // nothing else arrives
	got := rcv.events()
	require.Len(t, got, 1)
	require.Equal(t, "reservation.confirmed", got[0].Type)
	require.Equal(t, "wo-1", got[0].field("orderId"))
	require.Equal(t, fmt.Sprint(got[0].ID), got[0].header)
	require.Zero(t, rcv.bad.Load())

	feed := s.feedEvents(code)
	types := make([]string, len(feed))
	for i, e := range feed {
		types[i] = e.Type
	}
	require.Equal(t, []string{"voucher.low_stock", "voucher.sold_out", "reservation.confirmed"}, types,
		"reserved is not subscribed: not written")
	require.Equal(t, got[0].ID, feed[2].ID)
}

func TestWebhookReceiverDownThenUpGetsEverythingInOrder(t *testing.T) {
	t.Parallel()
	s := eventsStack(t, stackOptions{})
	rcv := newReceiver(t)
	rcv.fail.Store(true)
	id, secret := s.subscribe(rcv.srv.URL, "reservation.reserved", "reservation.confirmed", "reservation.released")
	rcv.secret.Store(secret)
	codes := []string{s.createVoucher(voucherSpec{TotalLimit: 50}), s.createVoucher(voucherSpec{TotalLimit: 50})}
	for i := range 10 {
		for _, code := range codes {
			o := fmt.Sprintf("%s-d-%d", code, i)
			require.Equal(t, http.StatusCreated, s.reserve(code, int64(i+1), o, 5000).status)
			path := "/vouchers/" + code + "/reservations/" + o
			if i%2 == 0 {
				require.Equal(t, http.StatusOK, s.do(http.MethodPost, path+"/confirm", nil).status)
			} else {
				require.Equal(t, http.StatusOK, s.do(http.MethodDelete, path, nil).status)
			}
		}
	}
	// Failed attempts show in the deliveries listing.
	require.Eventually(t, func() bool {
		r := s.doToken(http.MethodGet, "/webhooks/"+id+"/deliveries?limit=1", nil, testAdminToken)
		list, _ := r.body["deliveries"].([]any)
		if len(list) == 0 {
			return false
		}
		d := list[0].(map[string]any)
		return d["attempts"].(float64) >= 2 && d["lastStatus"].(float64) == 500 && d["status"] == "pending"
	}, 10*time.Second, 50*time.Millisecond)
	rcv.fail.Store(false)

	var wantIDs []int64
	require.Eventually(t, func() bool { // every change sequenced
		wantIDs = wantIDs[:0]
		for _, e := range s.feedEvents("") {
			if strings.HasPrefix(e.Type, "reservation.") {
				wantIDs = append(wantIDs, e.ID)
			}
		}
		return len(wantIDs) == 40
	}, 10*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { return len(rcv.events()) >= 40 }, 30*time.Second, 50*time.Millisecond)
	got := rcv.events()
	perVoucher := map[string][]int64{}
	seen := map[int64]bool{}
	for _, e := range got {
		perVoucher[e.field("voucherCode")] = append(perVoucher[e.field("voucherCode")], e.ID)
		seen[e.ID] = true
	}
	for _, w := range wantIDs {
		require.True(t, seen[w], "event %d delivered", w)
	}
	for code, ids := range perVoucher {
		for i := 1; i < len(ids); i++ {
			require.Less(t, ids[i-1], ids[i], "voucher %s in order", code)
		}
	}
	r := s.doToken(http.MethodGet, "/webhooks/"+id+"/deliveries?status=pending", nil, testAdminToken)
	require.Equal(t, http.StatusOK, r.status)
	require.Empty(t, r.body["deliveries"])
	m := string(s.do(http.MethodGet, "/metrics", nil).raw)
	require.Contains(t, m, `voucherd_webhook_deliveries_total{outcome="retry"}`)
	require.Contains(t, m, `voucherd_webhook_deliveries_total{outcome="delivered"}`)
	require.Contains(t, m, "voucherd_webhook_delivery_lag_seconds_bucket")
}

func TestWebhookURLRefusedUnlessPrivateAllowed(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	for _, url := range []string{"https://127.0.0.1/hook", "https://10.1.2.3/hook", "http://example.com/hook",
		"https://[::1]/hook", "https://169.254.169.254/latest", "https://localhost/hook"} {
		r := s.doToken(http.MethodPost, "/webhooks", map[string]any{"url": url, "events": []string{"voucher.sold_out"}}, testAdminToken)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, url+": "+string(r.raw))
		require.Equal(t, "WEBHOOK_URL_REFUSED", r.str("error"))
	}
	r := s.doToken(http.MethodPost, "/webhooks", map[string]any{"url": "https://example.com/hook", "events": []string{"nope"}}, testAdminToken)
	require.Equal(t, http.StatusBadRequest, r.status)
	r = s.doToken(http.MethodGet, "/webhooks/wh_none", nil, testAdminToken)
	require.Equal(t, http.StatusNotFound, r.status)
}

// TestWebhookFlashSaleEveryMode: a small sale in each mode delivers one
// voucher.sold_out, one reservation.confirmed per CONFIRMED row, and the
// receiver holds the feed's ids.
func TestWebhookFlashSaleEveryMode(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			s := eventsStack(t, m.opts)
			rcv := newReceiver(t)
			_, secret := s.subscribe(rcv.srv.URL, "reservation.confirmed", "voucher.sold_out")
			rcv.secret.Store(secret)
			code := s.createVoucher(voucherSpec{TotalLimit: 100})
			if m.opts.flash {
				require.Equal(t, http.StatusOK, s.do(http.MethodPost, "/vouchers/"+code+"/warmup", nil).status)
			}
			created, _ := s.flashSale(code, 150, 32, code)
			require.EqualValues(t, 100, created)
			s.settle(code, 100)
			parallel(150, 16, func(i int) {
				s.do(http.MethodPost, fmt.Sprintf("/vouchers/%s/reservations/%s-%d/confirm", code, code, i), nil)
			})
			var confirmed int
			require.NoError(t, s.db.QueryRow(s.t.Context(), "SELECT count(*) FROM voucher_redemption WHERE voucher_code = $1 AND status = 'CONFIRMED'", code).Scan(&confirmed))
			require.Equal(t, 100, confirmed)
			require.Eventually(t, func() bool { return len(rcv.events()) >= confirmed+1 }, 60*time.Second, 50*time.Millisecond)
			time.Sleep(200 * time.Millisecond)
			got := rcv.events()
			counts := map[string]int{}
			ids := map[int64]bool{}
			for _, e := range got {
				counts[e.Type]++
				ids[e.ID] = true
			}
			require.Equal(t, map[string]int{"voucher.sold_out": 1, "reservation.confirmed": confirmed}, counts)
			var subscribed int
			for _, e := range s.feedEvents(code) {
				if e.Type == "voucher.low_stock" {
					continue // not subscribed
				}
				subscribed++
				require.True(t, ids[e.ID], "feed event %d delivered", e.ID)
			}
			require.Equal(t, len(ids), subscribed, "the receiver holds the feed's ids")
		})
	}
}

// TestReadmeSignatureCheckInShell runs the README's shell receiver check on
// a body signed as deliveries are: it verifies, and a changed body does not.
func TestReadmeSignatureCheckInShell(t *testing.T) {
	t.Parallel()
	_, err := exec.LookPath("openssl")
	require.NoError(t, err, "openssl is needed to run the README's signature check (make deps installs it)")
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(raw), "<!-- webhook-verify:begin -->")
	require.True(t, ok)
	block, _, ok := strings.Cut(rest, "<!-- webhook-verify:end -->")
	require.True(t, ok)
	_, script, ok := strings.Cut(block, "```sh\n")
	require.True(t, ok)
	script, _, _ = strings.Cut(script, "```")

	dir := t.TempDir()
	body := []byte(`{"id":42,"type":"reservation.confirmed","createdAt":"2026-12-04T10:00:00Z","data":{"orderId":"o-1"}}`)
	sig := webhook.Sign("whsec_readme", time.Now(), body)
	for _, tc := range []struct {
		body []byte
		ok   bool
	}{{body, true}, {append(body[:len(body):len(body)], ' '), false}} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "body.json"), tc.body, 0o600))
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SECRET=whsec_readme", "SIG="+sig)
		out, err := cmd.CombinedOutput()
		if tc.ok {
			require.NoError(t, err, string(out))
			require.Equal(t, "verified\n", string(out))
		} else {
			require.Error(t, err, string(out))
		}
	}
}

func TestWebhookCLI(t *testing.T) {
	t.Parallel()
	s := eventsStack(t, stackOptions{})
	rcv := newReceiver(t)
	cli := func(args ...string) string {
		var out, errOut bytes.Buffer
		args = append(args[:1:1], append([]string{"--url", s.base, "--token", testAdminToken}, args[1:]...)...)
		require.NoError(t, run(t.Context(), append([]string{"webhook"}, args...), &out, &errOut), errOut.String())
		return out.String()
	}
	out := cli("create", "--endpoint", rcv.srv.URL, "--events", "voucher.disabled,voucher.enabled", "--json")
	var w struct{ ID, Secret string }
	require.NoError(t, json.Unmarshal([]byte(out), &w))
	require.NotEmpty(t, w.Secret)
	rcv.secret.Store(w.Secret)
	require.Contains(t, cli("list"), w.ID)
	code := s.createVoucher(voucherSpec{})
	require.Equal(t, http.StatusOK, s.do(http.MethodPatch, "/vouchers/"+code, map[string]any{"active": false}).status)
	require.Eventually(t, func() bool { return len(rcv.events()) == 1 }, 10*time.Second, 20*time.Millisecond)
	// The sender records the delivery after the receiver's answer reaches
	// it, a moment after the receiver has the event.
	require.Eventually(t, func() bool { return strings.Contains(cli("deliveries", w.ID), "delivered") }, 15*time.Second, 50*time.Millisecond)
	require.Contains(t, cli("update", "--active", "false", w.ID), "active  false")
	var out2, errOut bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"events", "--url", s.base, "--token", testAdminToken, "--code", code}, &out2, &errOut), errOut.String())
	require.Contains(t, out2.String(), "voucher.disabled")
	cli("delete", w.ID)
}

// TestEventsTopicHoldsTheFeed: with VOUCHERD_EVENTS_TOPIC set, every event
// of the feed is produced to the topic, keyed by voucher code, with its id.
func TestEventsTopicHoldsTheFeed(t *testing.T) {
	t.Parallel()
	k := testenv.Kafka(t)
	topic := testenv.Topic(t, k.Brokers, 3)
	s := eventsStack(t, stackOptions{tweak: func(c *Config) {
		c.KafkaBrokers = k.Brokers
		c.Events.Topic = topic
		c.Events.Reserved = true
	}})
	code := s.createVoucher(voucherSpec{TotalLimit: 5})
	for i := range 6 {
		s.reserve(code, int64(i+1), fmt.Sprintf("%s-k-%d", code, i), 5000)
	}
	require.Equal(t, http.StatusOK, s.do(http.MethodPost, "/vouchers/"+code+"/reservations/"+code+"-k-0/confirm", nil).status)
	var feed []receivedEvent
	require.Eventually(t, func() bool { feed = s.feedEvents(code); return len(feed) == 8 }, 10*time.Second, 50*time.Millisecond,
		"5 reserved, low_stock, sold_out, confirmed")

	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	got := map[int64]string{}
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < len(feed) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fetches := cl.PollFetches(ctx)
		cancel()
		for _, r := range fetches.Records() {
			var e receivedEvent
			require.NoError(t, json.Unmarshal(r.Value, &e))
			require.Equal(t, code, string(r.Key))
			got[e.ID] = e.Type
		}
	}
	for _, e := range feed {
		require.Equal(t, e.Type, got[e.ID], "event %d on the topic", e.ID)
	}
}

// BenchmarkWebhookDeliveryLag measures the time from an event's commit to
// its arrival at a receiver on loopback (a standard voucher, each op a
// reservation and its confirmation over HTTP, 16 at a time; the receiver
// subscribes to reservation.confirmed; the events loop at its default
// poll):
//
//	go test -run '^$' -bench WebhookDeliveryLag -benchtime 2000x ./cmd/voucherd/
func BenchmarkWebhookDeliveryLag(b *testing.B) {
	s := eventsStack(b, stackOptions{tweak: func(c *Config) { c.Events.Poll = webhook.DefaultPoll }})
	rcv := newReceiver(b)
	_, secret := s.subscribe(rcv.srv.URL, "reservation.confirmed")
	rcv.secret.Store(secret)
	code := s.createVoucher(voucherSpec{TotalLimit: 1_000_000})
	b.ResetTimer()
	parallel(b.N, 16, func(i int) {
		o := fmt.Sprintf("lag-%d", i)
		s.reserve(code, int64(i+1), o, 5000)
		s.do(http.MethodPost, "/vouchers/"+code+"/reservations/"+o+"/confirm", nil)
	})
	deadline := time.Now().Add(time.Minute)
	for len(rcv.events()) < b.N && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	b.StopTimer()
	got := rcv.events()
	if len(got) < b.N {
		b.Fatalf("%d of %d events delivered", len(got), b.N)
	}
	lags := make([]time.Duration, len(got))
	for i, e := range got {
		lags[i] = e.at.Sub(e.CreatedAt)
	}
	slices.Sort(lags)
	b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "lag-p50-ms")
	b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "lag-p99-ms")
}
