// Package live owns the live sale view's data: per-voucher
// activity counters fed by the service's observer, and one snapshot feed per
// watched voucher that reads the voucher's counts once per tick and fans the
// snapshot out to every watcher, so a thousand open dashboards cost the
// database what one does.
//
// Rates and rejection counts are per instance: they count the reservation
// calls this process answered. Behind a load balancer each instance sees its
// share of the traffic; the counts read from the store (remaining, reserved,
// confirmed, released) are global.
package live

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// ErrClosed is returned once the hub has been closed.
var ErrClosed = errors.New("live: hub closed")

// ScopeInstance is the value of Snapshot.Scope: rates and rejections count
// only the requests this instance answered.
const ScopeInstance = "instance"

// Config configures a Hub. Zero values mean defaults.
type Config struct {
	// Voucher reads a voucher with its live Reserved and Confirmed counts
	// (required). (*voucher.Service).Voucher fits. It is called once per
	// tick per watched voucher, whatever the number of watchers.
	Voucher func(ctx context.Context, code string) (voucher.Voucher, error)
	// Released counts the voucher's RELEASED redemptions (optional). It is
	// called right after Voucher in the same tick; nil leaves Released out
	// of snapshots (null on the wire).
	Released func(ctx context.Context, code string) (int64, error)
	// Interval is the time between snapshots (default 1s).
	Interval time.Duration
	// ReadTimeout bounds one tick's reads (default 5s).
	ReadTimeout time.Duration
	// MaxWatchers bounds the watchers open at once across all vouchers
	// (default 1000); more are refused with UNAVAILABLE.
	MaxWatchers int
	// Clock returns the current time (default time.Now).
	Clock func() time.Time
	// Logger receives read failures (default: discard).
	Logger *slog.Logger
}

// Snapshot is one update of the live view of a voucher.
type Snapshot struct {
	// Code is the voucher code.
	Code string `json:"code"`
	// At is when the counts were read.
	At time.Time `json:"at"`
	// TotalLimit, Remaining, Reserved and Confirmed are the voucher's counts
	// as GET /vouchers/{code} reports them.
	TotalLimit int32 `json:"totalLimit"`
	Remaining  int32 `json:"remaining"`
	Reserved   int32 `json:"reserved"`
	Confirmed  int32 `json:"confirmed"`
	// Released counts RELEASED redemptions; nil when the hub has no way to
	// count them.
	Released *int64 `json:"released"`
	// BudgetAmount and BudgetRemaining are the money budget and what is
	// left of it (as GET /vouchers/{code} reports them), for a voucher with
	// a budget; absent otherwise.
	BudgetAmount    int64  `json:"budgetAmount,omitempty"`
	BudgetRemaining *int64 `json:"budgetRemaining,omitempty"`
	// WindowLimit and WindowRemaining are the quota per occurrence of the
	// voucher's windows and what is left of the occurrence covering At
	// (0 outside every window), for a voucher with a quota; absent
	// otherwise.
	WindowLimit     int32  `json:"windowLimit,omitempty"`
	WindowRemaining *int32 `json:"windowRemaining,omitempty"`
	// ReservationsPerSecond is the rate of reservations this instance
	// granted (replays excluded) since the previous snapshot.
	ReservationsPerSecond float64 `json:"reservationsPerSecond"`
	// ReplaysPerSecond is the rate of answered retries of known orders.
	ReplaysPerSecond float64 `json:"replaysPerSecond"`
	// RejectionsPerSecond is the rate of reservation calls this instance
	// answered with an error, any code.
	RejectionsPerSecond float64 `json:"rejectionsPerSecond"`
	// Rejections counts this instance's rejected reservation calls by error
	// code since the watcher's first snapshot (codes with none are left out).
	Rejections map[string]int64 `json:"rejections"`
	// Scope is ScopeInstance: the rates and Rejections above count only
	// what this instance answered.
	Scope string `json:"scope"`
}

// Update is what a watcher receives each tick: a snapshot, or the error of
// that tick's read (the previous snapshot is then stale).
type Update struct {
	Snapshot Snapshot
	Err      error
}

// trackedCodes are the error codes counted one by one; anything else is
// counted under otherCode. A fixed table keeps Reserved free of allocation.
var trackedCodes = [...]voucher.ErrorCode{
	voucher.CodeInvalidRequest, voucher.CodeVoucherNotFound, voucher.CodeOutOfStock,
	voucher.CodeHeldOut, voucher.CodeAlreadyUsed, voucher.CodeNotEligible, voucher.CodeOrderConflict,
	voucher.CodeOrderReleased, voucher.CodeUnavailable, voucher.CodeInternal,
}

const otherCode = "OTHER"

const nCodes = len(trackedCodes) + 1

func codeIndex(c voucher.ErrorCode) int {
	for i, t := range trackedCodes {
		if t == c {
			return i
		}
	}
	return nCodes - 1
}

func codeName(i int) string {
	if i < len(trackedCodes) {
		return string(trackedCodes[i])
	}
	return otherCode
}

// counters are one watched voucher's activity since its feed started.
type counters struct {
	reserved atomic.Int64
	replays  atomic.Int64
	rejected [nCodes]atomic.Int64
}

// totals is a plain copy of counters.
type totals struct {
	reserved, replays int64
	rejected          [nCodes]int64
}

func (c *counters) load() totals {
	var t totals
	t.reserved = c.reserved.Load()
	t.replays = c.replays.Load()
	for i := range c.rejected {
		t.rejected[i] = c.rejected[i].Load()
	}
	return t
}

func (t totals) rejectedSum() int64 {
	var n int64
	for _, v := range t.rejected {
		n += v
	}
	return n
}

// Hub counts reservation outcomes per watched voucher and runs one snapshot
// feed per watched voucher. It is safe for concurrent use.
type Hub struct {
	cfg Config
	log *slog.Logger

	// counters maps a watched voucher's code to its *counters. Only watched
	// vouchers have an entry, so neither random codes nor old sales grow it,
	// and Reserved for an unwatched voucher is one failed lookup.
	counters sync.Map

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	feeds    map[string]*feed
	watchers int
	closed   bool
}

// feed is the ticker of one watched voucher. Its fields are guarded by
// Hub.mu, except ctr which is only read.
type feed struct {
	code     string
	ctr      *counters
	watchers map[*Watch]struct{}
	last     *frame
	stop     chan struct{}
}

// frame is one tick's result, shared by all watchers of the feed; each
// watcher derives its own Rejections from it.
type frame struct {
	snap   Snapshot
	totals totals
	err    error
}

// NewHub validates cfg and returns a Hub. Close it to stop its feeds.
func NewHub(cfg Config) (*Hub, error) {
	if cfg.Voucher == nil {
		return nil, errors.New("live: Config.Voucher is required")
	}
	if cfg.Interval < 0 || cfg.ReadTimeout < 0 || cfg.MaxWatchers < 0 {
		return nil, errors.New("live: Interval, ReadTimeout and MaxWatchers must not be negative")
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 5 * time.Second
	}
	if cfg.MaxWatchers == 0 {
		cfg.MaxWatchers = 1000
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Hub{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel, feeds: map[string]*feed{}}, nil
}

// Interval is the time between snapshots.
func (h *Hub) Interval() time.Duration { return h.cfg.Interval }

// Reserved counts one reserve call for the voucher's watchers. It has the
// signature of voucher.Observer's method so that cmd can compose the hub
// with the metrics observer. For a voucher nobody watches it does nothing;
// it never allocates.
func (h *Hub) Reserved(voucherCode string, _ voucher.Mode, code voucher.ErrorCode, replay bool, _ time.Duration) {
	v, ok := h.counters.Load(voucherCode)
	if !ok {
		return
	}
	c := v.(*counters)
	switch {
	case code != "":
		c.rejected[codeIndex(code)].Add(1)
	case replay:
		c.replays.Add(1)
	default:
		c.reserved.Add(1)
	}
}

// Voucher reads a voucher as the feeds do (Config.Voucher, bounded by
// Config.ReadTimeout), for callers that must know whether a code exists
// before they offer to watch it.
func (h *Hub) Voucher(ctx context.Context, code string) (voucher.Voucher, error) {
	if !voucher.ValidCode(code) {
		return voucher.Voucher{}, voucher.Errorf(voucher.CodeVoucherNotFound, "voucher %q not found", code)
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.ReadTimeout)
	defer cancel()
	return h.cfg.Voucher(ctx, code)
}

// Watchers returns the number of open watchers of a voucher.
func (h *Hub) Watchers(code string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if f, ok := h.feeds[code]; ok {
		return len(f.watchers)
	}
	return 0
}

// Watch starts watching a voucher. The first update comes at once when the
// voucher's feed already runs, or after one read when this is its first
// watcher; then one per tick. Close the Watch when done: the feed stops
// with its last watcher.
func (h *Hub) Watch(code string) (*Watch, error) {
	if !voucher.ValidCode(code) {
		return nil, voucher.Errorf(voucher.CodeVoucherNotFound, "voucher %q not found", code)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, voucher.Unavailable(ErrClosed, "the server is shutting down")
	}
	if h.watchers >= h.cfg.MaxWatchers {
		return nil, &voucher.Error{Code: voucher.CodeUnavailable, RetryAfter: 5 * time.Second,
			Message: "too many live views are open on this instance; retry later"}
	}
	f, ok := h.feeds[code]
	if !ok {
		f = &feed{code: code, ctr: new(counters), watchers: map[*Watch]struct{}{}, stop: make(chan struct{})}
		h.feeds[code] = f
		h.counters.Store(code, f.ctr)
		h.wg.Add(1)
		go h.run(f)
	}
	w := &Watch{hub: h, feed: f, c: make(chan Update, 1)}
	f.watchers[w] = struct{}{}
	h.watchers++
	if f.last != nil {
		w.offer(f.last)
	}
	return w, nil
}

// Close stops every feed and closes every watcher's channel. Call it when
// the server shuts down (http.Server.RegisterOnShutdown): open streams
// would otherwise keep the shutdown waiting.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	h.cancel()
	for code, f := range h.feeds {
		close(f.stop)
		for w := range f.watchers {
			close(w.c)
		}
		f.watchers = nil
		delete(h.feeds, code)
		h.counters.Delete(code)
	}
	h.watchers = 0
	h.mu.Unlock()
	h.wg.Wait()
}

// run is the feed's ticker: one read per tick, fanned out to the watchers.
func (h *Hub) run(f *feed) {
	defer h.wg.Done()
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	prev := sample{at: h.cfg.Clock()}
	for {
		fr := h.read(f, &prev)
		h.mu.Lock()
		select {
		case <-f.stop:
			// The last watcher left (or the hub closed) during the read.
			h.mu.Unlock()
			return
		default:
		}
		f.last = fr
		for w := range f.watchers {
			w.offer(fr)
		}
		h.mu.Unlock()
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
	}
}

// sample is the counters at the start of the current rate window.
type sample struct {
	at     time.Time
	totals totals
}

// read reads the voucher's counts once and computes the rates since prev.
func (h *Hub) read(f *feed, prev *sample) *frame {
	ctx, cancel := context.WithTimeout(h.ctx, h.cfg.ReadTimeout)
	defer cancel()
	v, err := h.cfg.Voucher(ctx, f.code)
	var released *int64
	if err == nil && h.cfg.Released != nil {
		var n int64
		if n, err = h.cfg.Released(ctx, f.code); err == nil {
			released = &n
		}
	}
	now := h.cfg.Clock()
	cur := f.ctr.load()
	fr := &frame{totals: cur}
	if err != nil {
		if h.ctx.Err() == nil && !voucher.IsCode(err, voucher.CodeVoucherNotFound) {
			h.log.Warn("live view: reading voucher counts failed", "code", f.code, "err", err)
		}
		fr.err = err
		return fr
	}
	fr.snap = Snapshot{
		Code: v.Code, At: now.UTC(), TotalLimit: v.TotalLimit, Remaining: v.Remaining(),
		Reserved: v.Reserved, Confirmed: v.Confirmed, Released: released, Scope: ScopeInstance,
	}
	if v.Budget.Amount > 0 {
		left := v.Budget.Remaining()
		fr.snap.BudgetAmount, fr.snap.BudgetRemaining = v.Budget.Amount, &left
	}
	if v.WindowLimit > 0 {
		var left int32
		if _, used, ok := v.CurrentWindow(now); ok {
			left = max(v.WindowLimit-used, 0)
		}
		fr.snap.WindowLimit, fr.snap.WindowRemaining = v.WindowLimit, &left
	}
	// A window much shorter than a tick (the feed's first read) would turn
	// one request into a spike; report 0 and let the next window be longer.
	if elapsed := now.Sub(prev.at); elapsed >= h.cfg.Interval/2 {
		secs := elapsed.Seconds()
		fr.snap.ReservationsPerSecond = rate(cur.reserved-prev.totals.reserved, secs)
		fr.snap.ReplaysPerSecond = rate(cur.replays-prev.totals.replays, secs)
		fr.snap.RejectionsPerSecond = rate(cur.rejectedSum()-prev.totals.rejectedSum(), secs)
		*prev = sample{at: now, totals: cur}
	}
	return fr
}

// rate is n per secs, rounded to one decimal.
func rate(n int64, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return math.Round(float64(n)/secs*10) / 10
}

// Watch is one watcher of a voucher's feed.
type Watch struct {
	hub  *Hub
	feed *feed
	// c holds at most the latest update: a slow watcher skips snapshots
	// rather than slowing the feed. Guarded by Hub.mu for sends and close.
	c    chan Update
	base *totals // counters at this watcher's first snapshot
	done bool
}

// C delivers the updates. It is closed when the hub closes.
func (w *Watch) C() <-chan Update { return w.c }

// offer replaces any unread update with fr's. Called with Hub.mu held.
func (w *Watch) offer(fr *frame) {
	u := Update{Err: fr.err}
	if fr.err == nil {
		if w.base == nil {
			b := fr.totals
			w.base = &b
		}
		u.Snapshot = fr.snap
		u.Snapshot.Rejections = map[string]int64{}
		for i, n := range fr.totals.rejected {
			if d := n - w.base.rejected[i]; d > 0 {
				u.Snapshot.Rejections[codeName(i)] = d
			}
		}
	}
	select {
	case <-w.c:
	default:
	}
	w.c <- u
}

// Close stops watching; the feed stops with its last watcher. Safe to call
// more than once.
func (w *Watch) Close() {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.done || h.closed {
		w.done = true
		return
	}
	w.done = true
	f := w.feed
	delete(f.watchers, w)
	h.watchers--
	if len(f.watchers) == 0 {
		close(f.stop)
		delete(h.feeds, f.code)
		h.counters.Delete(f.code)
	}
}
