package httpapi

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Rate is a token bucket: PerSecond requests a second on average, Burst at
// once. A zero PerSecond is no limit.
type Rate struct {
	PerSecond float64
	Burst     int
}

// RateLimits configures the request rate limits and how the client address
// is found.
type RateLimits struct {
	// PerKey limits each API key (requests without a key are not counted
	// here); PerClient each client address, before authentication.
	PerKey, PerClient Rate
	// Loopback applies PerKey and PerClient to loopback clients too;
	// false (the default) lets a load test on the host run unlimited. The
	// code-guessing limit counts loopback clients either way.
	Loopback bool
	// TrustedProxies are the addresses whose X-Forwarded-For is believed:
	// when the TCP peer is one of them, the client is the right-most
	// address of X-Forwarded-For not in the list. Empty (the default)
	// never reads X-Forwarded-For: the client is the TCP peer.
	TrustedProxies []netip.Prefix
	// OnLimited is called for each request refused by a limit ("key" or
	// "client"); optional.
	OnLimited func(limit string)
}

// maxBuckets bounds the buckets a limiter keeps. Past it, the buckets that
// are full again (the same as a new one) are dropped, at most once a
// second; if that is not enough, all are, so memory stays bounded and an
// honest client loses at worst what it had saved up.
const maxBuckets = 100_000

// buckets is one token bucket per id (a key name or a client address).
type buckets struct {
	rate  float64
	burst float64

	mu    sync.Mutex
	m     map[string]*bucket
	swept time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newBuckets(r Rate) *buckets {
	if r.PerSecond <= 0 {
		return nil
	}
	burst := float64(max(r.Burst, 1))
	return &buckets{rate: r.PerSecond, burst: burst, m: map[string]*bucket{}}
}

// take takes a token of id at now; it returns 0 when one was there, else
// how long until one will be.
func (b *buckets) take(id string, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	bk := b.m[id]
	if bk == nil {
		if len(b.m) >= maxBuckets && now.Sub(b.swept) >= time.Second {
			b.swept = now
			b.sweep(now)
		}
		bk = &bucket{tokens: b.burst, at: now}
		b.m[id] = bk
	}
	if elapsed := now.Sub(bk.at).Seconds(); elapsed > 0 {
		bk.tokens = math.Min(b.burst, bk.tokens+elapsed*b.rate)
		bk.at = now
	}
	if bk.tokens >= 1 {
		bk.tokens--
		return 0
	}
	return time.Duration((1 - bk.tokens) / b.rate * float64(time.Second))
}

// sweep drops the buckets that are full again; all of them when that
// leaves the map at its bound. b.mu is held.
func (b *buckets) sweep(now time.Time) {
	for id, bk := range b.m {
		if bk.tokens+now.Sub(bk.at).Seconds()*b.rate >= b.burst {
			delete(b.m, id)
		}
	}
	if len(b.m) >= maxBuckets {
		clear(b.m)
	}
}

// tooMany is the refusal of a rate limit: 429 with Retry-After.
func tooMany(d time.Duration, what string) error {
	return &voucher.Error{Code: voucher.CodeTooManyRequests, RetryAfter: max(d, time.Second),
		Message: "too many requests from this " + what + "; retry later"}
}

// clientAddr returns the client address of r: the TCP peer, or, when the
// peer is a trusted proxy, the right-most address of X-Forwarded-For that
// is not a trusted proxy (the left-most when all are). It never allocates
// on the path without trusted proxies.
func (s *Server) clientAddr(r *http.Request) string {
	peer := hostOf(r.RemoteAddr)
	trusted := s.cfg.RateLimits.TrustedProxies
	if len(trusted) == 0 || !inPrefixes(peer, trusted) {
		return peer
	}
	client := peer
	values := r.Header.Values("X-Forwarded-For")
	for i := len(values) - 1; i >= 0; i-- {
		list := values[i]
		for list != "" {
			var item string
			if j := strings.LastIndexByte(list, ','); j >= 0 {
				item, list = list[j+1:], list[:j]
			} else {
				item, list = list, ""
			}
			item = strings.TrimSpace(item)
			if _, err := netip.ParseAddr(item); err != nil {
				// Not an address: what is left of the header cannot be
				// believed either.
				return client
			}
			client = item
			if !inPrefixes(item, trusted) {
				return client
			}
		}
	}
	return client
}

// hostOf strips the port of a host:port.
func hostOf(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

func inPrefixes(addr string, prefixes []netip.Prefix) bool {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// limitClient applies the per-client limit to a request from client.
func (s *Server) limitClient(client string, now time.Time) error {
	if s.byClient == nil || (!s.cfg.RateLimits.Loopback && isLoopback(client)) {
		return nil
	}
	if d := s.byClient.take(client, now); d > 0 {
		s.limited("client")
		return tooMany(d, "client address")
	}
	return nil
}

// limitKey applies the per-key limit to a request with key from client.
func (s *Server) limitKey(key, client string, now time.Time) error {
	if s.byKey == nil || key == AnonymousKey || key == LoopbackKey || (!s.cfg.RateLimits.Loopback && isLoopback(client)) {
		return nil
	}
	if d := s.byKey.take(key, now); d > 0 {
		s.limited("key")
		return tooMany(d, "API key")
	}
	return nil
}

func (s *Server) limited(limit string) {
	if f := s.cfg.RateLimits.OnLimited; f != nil {
		f(limit)
	}
}

// requester returns who sent the request that wrap is serving with w, for
// the code-guessing limit: its key (none when the request carried none) and
// client address.
func requester(w http.ResponseWriter) voucher.Requester {
	rec, ok := w.(*statusRecorder)
	if !ok {
		return voucher.Requester{}
	}
	who := voucher.Requester{Key: rec.key, Client: rec.client}
	if who.Key == AnonymousKey || who.Key == LoopbackKey {
		who.Key = ""
	}
	return who
}
