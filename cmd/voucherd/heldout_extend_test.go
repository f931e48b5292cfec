package main

// End-to-end tests of HELD_OUT vs OUT_OF_STOCK, hold extension and
// threshold events, in standard, flash-sync and flash-kafka mode.

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/voucherd/voucherd/internal/kafkalog"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// secondsUntil is the Retry-After value voucherd computes for a hold that
// expires at the RFC 3339 time at: whole seconds from now, rounded up.
func secondsUntil(t *testing.T, at string) int64 {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, at)
	require.NoError(t, err)
	return int64(math.Ceil(time.Until(ts).Seconds()))
}

// requireHeldOut asserts a HELD_OUT answer whose Retry-After (header and
// body, equal) is within a second of wantSecs.
func requireHeldOut(t *testing.T, r response, wantSecs int64) {
	t.Helper()
	require.Equal(t, http.StatusConflict, r.status, string(r.raw))
	require.Equal(t, "HELD_OUT", r.str("error"), string(r.raw))
	got := r.num("retryAfter")
	require.Equal(t, strconv.FormatInt(got, 10), r.header.Get("Retry-After"), "header and body agree")
	require.InDelta(t, wantSecs, got, 1.01, "Retry-After is the time until the earliest hold expires")
}

func (s *stack) extend(code, orderID string, body any) response {
	s.t.Helper()
	return s.do(http.MethodPost, "/vouchers/"+code+"/reservations/"+orderID+"/extend", body)
}

func (s *stack) confirm(code, orderID string) {
	s.t.Helper()
	r := s.do(http.MethodPost, "/vouchers/"+code+"/reservations/"+orderID+"/confirm", nil)
	require.Equal(s.t, http.StatusOK, r.status, string(r.raw))
}

// While some held uses are RESERVED a voucher with no free use is HELD_OUT,
// with Retry-After until the earliest of them expires; once every held use
// is confirmed it is OUT_OF_STOCK. (The flash paths read the holds at most
// once a second per instance, hence the Eventually.)
func TestHeldOutThenOutOfStock(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := s.createVoucher(voucherSpec{TotalLimit: 2})
		r1 := s.reserve(code, 1, "h-1", 100)
		require.Equal(t, http.StatusCreated, r1.status, string(r1.raw))
		r2 := s.reserve(code, 2, "h-2", 100)
		require.Equal(t, http.StatusCreated, r2.status, string(r2.raw))
		s.settle(code, 2)

		// Both RESERVED: h-1 expires first.
		requireHeldOut(t, s.reserve(code, 3, "h-3", 100), secondsUntil(t, r1.str("expiresAt")))

		// h-2 is extended well past h-1; once h-1 is paid, h-2's expiry is
		// the one to wait for.
		ext := s.extend(code, "h-2", map[string]any{"seconds": 1500})
		require.Equal(t, http.StatusOK, ext.status, string(ext.raw))
		s.confirm(code, "h-1")
		want := secondsUntil(t, ext.str("expiresAt"))
		require.Greater(t, want, int64(1400))
		require.Eventually(t, func() bool {
			r := s.reserve(code, 3, "h-3", 100)
			return r.str("error") == "HELD_OUT" && math.Abs(float64(r.num("retryAfter")-want)) <= 1
		}, 5*time.Second, 50*time.Millisecond)
		requireHeldOut(t, s.reserve(code, 3, "h-3", 100), want)

		// Every held use paid: sold out, nothing to wait for.
		s.confirm(code, "h-2")
		require.Eventually(t, func() bool {
			return s.reserve(code, 3, "h-3", 100).str("error") == "OUT_OF_STOCK"
		}, 5*time.Second, 50*time.Millisecond)
		r := s.reserve(code, 4, "h-4", 100)
		require.Equal(t, http.StatusConflict, r.status)
		require.Equal(t, "OUT_OF_STOCK", r.str("error"))
		require.Empty(t, r.header.Get("Retry-After"))
		require.NotContains(t, r.body, "retryAfter")

		// A refund frees a use again.
		rel := s.do(http.MethodDelete, "/vouchers/"+code+"/reservations/h-1", nil)
		require.Equal(t, http.StatusOK, rel.status, string(rel.raw))
		require.Eventually(t, func() bool {
			return s.reserve(code, 3, "h-3", 100).status == http.StatusCreated
		}, 5*time.Second, 50*time.Millisecond)
		s.settle(code, 2)
		s.assertConsistent(code)
	})
}

// A flash sale of RESERVED holds is answered HELD_OUT, not OUT_OF_STOCK,
// by every rejected request, most of them from the sold-out cache.
func TestFlashSaleHeldOut(t *testing.T) {
	t.Parallel()
	for _, m := range modes[1:] {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, m.opts)
			code := s.createVoucher(voucherSpec{TotalLimit: 100})
			var created, heldOut atomic.Int64
			parallel(1000, 64, func(i int) {
				r := s.reserve(code, int64(i+1), fmt.Sprintf("fh-%d", i), 100)
				switch {
				case r.status == http.StatusCreated:
					created.Add(1)
				case r.str("error") == "HELD_OUT" && r.num("retryAfter") > 0 && r.header.Get("Retry-After") != "":
					heldOut.Add(1)
				default:
					t.Errorf("unexpected answer %d %s", r.status, r.raw)
				}
			})
			require.EqualValues(t, 100, created.Load())
			require.EqualValues(t, 900, heldOut.Load())
			s.settle(code, 100)
			s.assertConsistent(code)
		})
	}
}

// modesWith returns the modes with tweak applied to each stack's config.
func modesWith(tweak func(*Config)) []struct {
	name string
	opts stackOptions
} {
	out := append(modes[:0:0], modes...)
	for i := range out {
		out[i].opts.tweak = tweak
	}
	return out
}

// Extension within and beyond the maximum, idempotence, and the states it
// refuses.
func TestExtendHold(t *testing.T) {
	t.Parallel()
	const maxHold = 20 * time.Minute
	for _, m := range modesWith(func(c *Config) { c.MaxHold = maxHold }) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, m.opts)
			code := s.createVoucher(voucherSpec{TotalLimit: 5})
			r := s.reserve(code, 1, "e-1", 100)
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			s.settle(code, 1)
			first := r.str("expiresAt")
			got := s.do(http.MethodGet, "/vouchers/"+code+"/reservations/e-1", nil)
			require.Equal(t, http.StatusOK, got.status, string(got.raw))
			created, err := time.Parse(time.RFC3339Nano, got.str("createdAt"))
			require.NoError(t, err)

			// Within the maximum: now + 18 minutes.
			before := time.Now()
			ext := s.extend(code, "e-1", map[string]any{"seconds": 18 * 60})
			require.Equal(t, http.StatusOK, ext.status, string(ext.raw))
			require.Equal(t, "RESERVED", ext.str("status"))
			at, err := time.Parse(time.RFC3339Nano, ext.str("expiresAt"))
			require.NoError(t, err)
			require.WithinRange(t, at, before.Add(18*time.Minute-time.Second), time.Now().Add(18*time.Minute))
			require.NotEqual(t, first, ext.str("expiresAt"))

			// Every read says the same: the redemption and a replay of the
			// reservation (answered by Redis in flash-kafka mode).
			got = s.do(http.MethodGet, "/vouchers/"+code+"/reservations/e-1", nil)
			require.Equal(t, ext.str("expiresAt"), got.str("expiresAt"))
			replay := s.reserve(code, 1, "e-1", 100)
			require.Equal(t, http.StatusCreated, replay.status, string(replay.raw))
			require.Equal(t, ext.str("expiresAt"), replay.str("expiresAt"), "a replay answers the new expiry")

			// The same request again does not add another 18 minutes.
			again := s.extend(code, "e-1", map[string]any{"seconds": 18 * 60})
			require.Equal(t, http.StatusOK, again.status, string(again.raw))
			at2, err := time.Parse(time.RFC3339Nano, again.str("expiresAt"))
			require.NoError(t, err)
			require.WithinRange(t, at2, at, at.Add(5*time.Second))
			// A shorter one never shortens the hold.
			shorter := s.extend(code, "e-1", map[string]any{"seconds": 60})
			require.Equal(t, again.str("expiresAt"), shorter.str("expiresAt"))

			// Beyond the maximum: capped at creation + max hold.
			capped := s.extend(code, "e-1", map[string]any{"seconds": 7200})
			require.Equal(t, http.StatusOK, capped.status, string(capped.raw))
			at3, err := time.Parse(time.RFC3339Nano, capped.str("expiresAt"))
			require.NoError(t, err)
			require.True(t, created.Add(maxHold).Equal(at3), "capped at %s, got %s", created.Add(maxHold), at3)
			replay = s.reserve(code, 1, "e-1", 100)
			require.Equal(t, capped.str("expiresAt"), replay.str("expiresAt"))

			// Bad requests.
			for _, body := range []any{map[string]any{"seconds": 0}, map[string]any{"seconds": -5},
				map[string]any{"seconds": "60"}, map[string]any{}, map[string]any{"seconds": 60, "x": 1},
				map[string]any{"seconds": 40_000_000}} {
				bad := s.extend(code, "e-1", body)
				require.Equal(t, http.StatusBadRequest, bad.status, "%v: %s", body, bad.raw)
				require.Equal(t, "INVALID_REQUEST", bad.str("error"))
			}
			missing := s.extend(code, "nope", map[string]any{"seconds": 60})
			require.Equal(t, http.StatusNotFound, missing.status, string(missing.raw))
			require.Equal(t, "RESERVATION_NOT_FOUND", missing.str("error"))

			// A confirmed hold no longer expires; a released one is gone.
			s.confirm(code, "e-1")
			conf := s.extend(code, "e-1", map[string]any{"seconds": 60})
			require.Equal(t, http.StatusConflict, conf.status, string(conf.raw))
			require.Equal(t, "RESERVATION_CONFIRMED", conf.str("error"))
			require.Equal(t, http.StatusCreated, s.reserve(code, 2, "e-2", 100).status)
			s.settle(code, 2)
			require.Equal(t, http.StatusOK, s.do(http.MethodDelete, "/vouchers/"+code+"/reservations/e-2", nil).status)
			rel := s.extend(code, "e-2", map[string]any{"seconds": 60})
			require.Equal(t, http.StatusConflict, rel.status, string(rel.raw))
			require.Equal(t, "RESERVATION_RELEASED", rel.str("error"))
			s.assertConsistent(code)
		})
	}
}

// A hold extended just before its expiry stays; one extended just after is
// released, by the extension or by the expiry job, whichever runs first;
// either way the stores agree.
func TestExtendRacingExpiry(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			opts := m.opts
			// Long enough for the reservations (and, in Kafka mode, the
			// consumer) to be done before the first extension is due.
			opts.ttl = 4 * time.Second
			s := newStack(t, opts)
			const n = 12
			code := s.createVoucher(voucherSpec{TotalLimit: n})
			expires := make([]time.Time, n)
			for i := range n {
				r := s.reserve(code, int64(i+1), fmt.Sprintf("x-%d", i), 100)
				require.Equal(t, http.StatusCreated, r.status, string(r.raw))
				var err error
				expires[i], err = time.Parse(time.RFC3339Nano, r.str("expiresAt"))
				require.NoError(t, err)
			}
			s.settle(code, n)

			// Each order is extended at its own offset from its expiry,
			// from 300ms before to 250ms after, while the expiry job runs
			// every 200ms.
			answers := make([]response, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(time.Until(expires[i].Add(time.Duration(i*50-300) * time.Millisecond)))
					answers[i] = s.extend(code, fmt.Sprintf("x-%d", i), map[string]any{"seconds": 60})
				}()
			}
			wg.Wait()
			time.Sleep(time.Second) // the job catches up with anything due

			outcomes := map[string]int{}
			for i, a := range answers {
				got := s.do(http.MethodGet, "/vouchers/"+code+fmt.Sprintf("/reservations/x-%d", i), nil)
				require.Equal(t, http.StatusOK, got.status, string(got.raw))
				switch {
				case a.status == http.StatusOK:
					require.Equal(t, "RESERVED", got.str("status"), "x-%d was extended", i)
					require.Equal(t, a.str("expiresAt"), got.str("expiresAt"))
					outcomes["extended"]++
				case a.status == http.StatusConflict && a.str("error") == "RESERVATION_RELEASED":
					require.Equal(t, "RELEASED", got.str("status"), "x-%d", i)
					outcomes["released"]++
				default:
					t.Fatalf("x-%d: unexpected answer %d %s", i, a.status, a.raw)
				}
			}
			t.Logf("outcomes: %v", outcomes)
			require.Positive(t, outcomes["extended"], "the early extensions win")
			require.Positive(t, outcomes["released"], "the late ones lose")
			st := s.state(code)
			require.Equal(t, outcomes["extended"], st.reserved)
			require.Equal(t, outcomes["released"], st.released)
			s.assertConsistent(code)
		})
	}
}

// readThresholdEvents reads the events topic until want events arrived,
// then a moment longer to catch any extra one.
func readThresholdEvents(t *testing.T, brokers []string, topic string, want int) []voucher.ThresholdEvent {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	var out []voucher.ThresholdEvent
	deadline := time.Now().Add(30 * time.Second)
	var quiet time.Time
	for {
		if len(out) >= want && quiet.IsZero() {
			quiet = time.Now().Add(time.Second)
		}
		stop := deadline
		if !quiet.IsZero() {
			stop = quiet
		}
		if time.Now().After(stop) {
			break
		}
		ctx, cancel := context.WithDeadline(context.Background(), stop)
		fetches := cl.PollFetches(ctx)
		cancel()
		for _, r := range fetches.Records() {
			e, err := kafkalog.DecodeThresholdEvent(r.Value)
			require.NoError(t, err)
			require.Equal(t, e.Code, string(r.Key))
			out = append(out, e)
		}
	}
	require.Len(t, out, want, "events: %+v", out)
	return out
}

// Two instances share the stores; a voucher sells out, gets uses back and
// sells out again under concurrent reservations sent to both. Each crossing
// is emitted once in all: in the metrics of the two instances together and
// on the Kafka events topic.
func TestThresholdEventsOncePerCrossing(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			k := testenv.Kafka(t)
			eventsTopic := testenv.Topic(t, k.Brokers, 1)
			opts := m.opts
			opts.tweak = func(c *Config) { c.KafkaBrokers = k.Brokers; c.KafkaEventsTopic = eventsTopic }
			a := newStack(t, opts)
			optsB := opts
			optsB.databaseURL = a.cfg.DatabaseURL
			optsB.tweak = func(c *Config) {
				c.KafkaBrokers = k.Brokers
				c.KafkaEventsTopic = eventsTopic
				c.RedisKeyPrefix = a.cfg.RedisKeyPrefix
				if m.opts.kafka {
					c.KafkaTopic, c.KafkaDLQTopic, c.KafkaGroup = a.cfg.KafkaTopic, a.cfg.KafkaDLQTopic, a.cfg.KafkaGroup
				}
			}
			b := newStack(t, optsB)
			instances := []*stack{a, b}

			// 40 uses: low on stock below 4 free.
			code := a.createVoucher(voucherSpec{TotalLimit: 40})
			sale := func(prefix string, n int) []string {
				var mu sync.Mutex
				var won []string
				parallel(n, 64, func(i int) {
					id := fmt.Sprintf("%s-%d", prefix, i)
					r := instances[i%2].reserve(code, int64(1000*len(prefix)+i+1), id, 100)
					switch {
					case r.status == http.StatusCreated:
						mu.Lock()
						won = append(won, id)
						mu.Unlock()
					case r.str("error") == "HELD_OUT":
					default:
						t.Errorf("unexpected answer %d %s", r.status, r.raw)
					}
				})
				return won
			}
			won := sale("t", 150)
			require.Len(t, won, 40)
			a.settle(code, 40)

			// Ten uses come back, above the threshold again; they sell out
			// again (after the sold-out caches' TTL in flash modes).
			for _, id := range won[:10] {
				r := a.do(http.MethodDelete, "/vouchers/"+code+"/reservations/"+id, nil)
				require.Equal(t, http.StatusOK, r.status, string(r.raw))
			}
			time.Sleep(1500 * time.Millisecond)
			again := sale("tt", 80)
			require.Len(t, again, 10)
			a.settle(code, 40)
			a.assertConsistent(code)

			count := func(typ voucher.ThresholdType) float64 {
				var n float64
				for _, s := range instances {
					n += testutil.ToFloat64(s.app.metrics.ThresholdEvents.WithLabelValues(string(typ)))
				}
				return n
			}
			require.Equal(t, 2.0, count(voucher.ThresholdLowStock))
			require.Equal(t, 2.0, count(voucher.ThresholdSoldOut))

			events := readThresholdEvents(t, k.Brokers, eventsTopic, 4)
			winners := map[string]bool{}
			for _, id := range append(won, again...) {
				winners[id] = true
			}
			byType := map[voucher.ThresholdType]int{}
			for _, e := range events {
				byType[e.Type]++
				require.Equal(t, code, e.Code)
				require.Equal(t, int32(40), e.TotalLimit)
				require.True(t, winners[e.OrderID], "crossed by a reservation that won: %s", e.OrderID)
				require.Equal(t, m.name, string(e.Mode))
				if e.Type == voucher.ThresholdLowStock {
					require.Equal(t, int64(3), e.Remaining)
					require.Equal(t, int64(4), e.Threshold)
				} else {
					require.Zero(t, e.Remaining)
				}
			}
			require.Equal(t, map[voucher.ThresholdType]int{voucher.ThresholdLowStock: 2, voucher.ThresholdSoldOut: 2}, byType)
		})
	}
}

// The live page and the stream's error answers are described in
// api/openapi.yaml (s.do checks every answer against it).
func TestLiveRoutesDescribed(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	code := s.createVoucher(voucherSpec{})
	page := s.doToken(http.MethodGet, "/ui/vouchers/"+code, nil, "")
	require.Equal(t, http.StatusOK, page.status)
	require.Contains(t, page.header.Get("Content-Type"), "text/html")
	unknown := s.doToken(http.MethodGet, "/ui/vouchers/NOPE"+code, nil, "")
	require.Equal(t, http.StatusOK, unknown.status, "the page of an unknown voucher is the same page")
	require.Equal(t, page.raw, unknown.raw)
	r := s.doToken(http.MethodGet, "/vouchers/"+code+"/live", nil, "")
	require.Equal(t, http.StatusUnauthorized, r.status, string(r.raw))
	r = s.do(http.MethodGet, "/vouchers/NOPE"+code+"/live", nil)
	require.Equal(t, http.StatusNotFound, r.status, string(r.raw))
}
