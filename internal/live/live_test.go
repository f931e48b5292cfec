package live

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// fakeStore answers Voucher and Released from fields and counts the reads.
type fakeStore struct {
	mu        sync.Mutex
	v         voucher.Voucher
	released  int64
	err       error
	reads     atomic.Int64
	releasedN atomic.Int64
}

func (s *fakeStore) voucher(ctx context.Context, code string) (voucher.Voucher, error) {
	s.reads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return voucher.Voucher{}, s.err
	}
	if code != s.v.Code {
		return voucher.Voucher{}, voucher.Errorf(voucher.CodeVoucherNotFound, "voucher %s not found", code)
	}
	return s.v, nil
}

func (s *fakeStore) releasedCount(ctx context.Context, code string) (int64, error) {
	s.releasedN.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.released, nil
}

func (s *fakeStore) set(fn func(s *fakeStore)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s)
}

func newFake() *fakeStore {
	return &fakeStore{v: voucher.Voucher{Code: "SALE", TotalLimit: 100, UsedCount: 7, Reserved: 5, Confirmed: 2}, released: 3}
}

func newHub(t *testing.T, st *fakeStore, tweak func(*Config)) *Hub {
	t.Helper()
	cfg := Config{Voucher: st.voucher, Released: st.releasedCount, Interval: 20 * time.Millisecond}
	if tweak != nil {
		tweak(&cfg)
	}
	h, err := NewHub(cfg)
	require.NoError(t, err)
	t.Cleanup(h.Close)
	return h
}

func next(t *testing.T, w *Watch) Update {
	t.Helper()
	select {
	case u, ok := <-w.C():
		require.True(t, ok, "watch channel closed")
		return u
	case <-time.After(5 * time.Second):
		t.Fatal("no update within 5s")
		return Update{}
	}
}

func TestNewHubValidates(t *testing.T) {
	t.Parallel()
	_, err := NewHub(Config{})
	require.Error(t, err)
	_, err = NewHub(Config{Voucher: newFake().voucher, Interval: -time.Second})
	require.Error(t, err)
	h, err := NewHub(Config{Voucher: newFake().voucher})
	require.NoError(t, err)
	defer h.Close()
	require.Equal(t, time.Second, h.Interval())
}

func TestSnapshotCarriesCounts(t *testing.T) {
	t.Parallel()
	st := newFake()
	h := newHub(t, st, nil)
	w, err := h.Watch("SALE")
	require.NoError(t, err)
	defer w.Close()
	u := next(t, w)
	require.NoError(t, u.Err)
	s := u.Snapshot
	require.Equal(t, "SALE", s.Code)
	require.Equal(t, int32(100), s.TotalLimit)
	require.Equal(t, int32(93), s.Remaining)
	require.Equal(t, int32(5), s.Reserved)
	require.Equal(t, int32(2), s.Confirmed)
	require.NotNil(t, s.Released)
	require.Equal(t, int64(3), *s.Released)
	require.Equal(t, ScopeInstance, s.Scope)
	require.NotNil(t, s.Rejections)

	st.set(func(s *fakeStore) { s.v.UsedCount, s.v.Reserved = 9, 7 })
	require.Eventually(t, func() bool {
		u := next(t, w)
		return u.Err == nil && u.Snapshot.Remaining == 91 && u.Snapshot.Reserved == 7
	}, 5*time.Second, time.Millisecond)
}

func TestReleasedIsNullWithoutCounter(t *testing.T) {
	t.Parallel()
	h := newHub(t, newFake(), func(c *Config) { c.Released = nil })
	w, err := h.Watch("SALE")
	require.NoError(t, err)
	defer w.Close()
	u := next(t, w)
	require.NoError(t, u.Err)
	require.Nil(t, u.Snapshot.Released)
}

// However many watchers a voucher has, each tick reads it once.
func TestWatchersShareOneReadPerTick(t *testing.T) {
	t.Parallel()
	st := newFake()
	h := newHub(t, st, func(c *Config) { c.Interval = 50 * time.Millisecond })
	const n = 50
	watches := make([]*Watch, n)
	for i := range watches {
		w, err := h.Watch("SALE")
		require.NoError(t, err)
		defer w.Close()
		watches[i] = w
	}
	require.Equal(t, n, h.Watchers("SALE"))
	before := st.reads.Load()
	start := time.Now()
	got := 0
	for got < 4 {
		u := next(t, watches[0])
		require.NoError(t, u.Err)
		got++
	}
	for _, w := range watches[1:] {
		require.NoError(t, next(t, w).Err)
	}
	ticks := time.Since(start)/(50*time.Millisecond) + 2
	reads := st.reads.Load() - before
	t.Logf("%d reads for %d watchers over %v", reads, n, time.Since(start))
	require.LessOrEqual(t, reads, int64(ticks))
	require.LessOrEqual(t, st.releasedN.Load(), st.reads.Load(), "Released is read once with each Voucher read")
}

// A watcher joining a running feed gets the last snapshot at once, without a
// read of its own.
func TestLateWatcherGetsLastSnapshotAtOnce(t *testing.T) {
	t.Parallel()
	st := newFake()
	h := newHub(t, st, func(c *Config) { c.Interval = time.Hour })
	first, err := h.Watch("SALE")
	require.NoError(t, err)
	defer first.Close()
	require.NoError(t, next(t, first).Err)
	require.Equal(t, int64(1), st.reads.Load())
	late, err := h.Watch("SALE")
	require.NoError(t, err)
	defer late.Close()
	select {
	case u := <-late.C():
		require.NoError(t, u.Err)
		require.Equal(t, int32(93), u.Snapshot.Remaining)
	default:
		t.Fatal("the late watcher did not get the last snapshot at once")
	}
	require.Equal(t, int64(1), st.reads.Load())
}

// The feed stops with its last watcher: no more reads, and reservations of
// the voucher are no longer counted.
func TestFeedStopsWithLastWatcher(t *testing.T) {
	t.Parallel()
	st := newFake()
	h := newHub(t, st, nil)
	a, err := h.Watch("SALE")
	require.NoError(t, err)
	b, err := h.Watch("SALE")
	require.NoError(t, err)
	require.NoError(t, next(t, a).Err)
	a.Close()
	a.Close() // twice is fine
	require.Equal(t, 1, h.Watchers("SALE"))
	_, tracked := h.counters.Load("SALE")
	require.True(t, tracked)
	b.Close()
	require.Equal(t, 0, h.Watchers("SALE"))
	_, tracked = h.counters.Load("SALE")
	require.False(t, tracked)
	time.Sleep(50 * time.Millisecond) // a read in flight may still finish
	reads := st.reads.Load()
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, reads, st.reads.Load(), "the feed kept reading without watchers")
	h.Reserved("SALE", voucher.ModeStandard, "", false, 0) // not counted, no panic
}

func TestReadErrorsReachWatchers(t *testing.T) {
	t.Parallel()
	st := newFake()
	h := newHub(t, st, nil)
	w, err := h.Watch("NOPE")
	require.NoError(t, err)
	u := next(t, w)
	require.True(t, voucher.IsCode(u.Err, voucher.CodeVoucherNotFound), "%v", u.Err)
	w.Close()

	_, err = h.Watch("not a code!")
	require.True(t, voucher.IsCode(err, voucher.CodeVoucherNotFound), "%v", err)

	ok, err := h.Watch("SALE")
	require.NoError(t, err)
	defer ok.Close()
	require.NoError(t, next(t, ok).Err)
	st.set(func(s *fakeStore) { s.err = voucher.Unavailable(nil, "database down") })
	require.Eventually(t, func() bool { return voucher.IsCode(next(t, ok).Err, voucher.CodeUnavailable) }, 5*time.Second, time.Millisecond)
	st.set(func(s *fakeStore) { s.err = nil })
	require.Eventually(t, func() bool { return next(t, ok).Err == nil }, 5*time.Second, time.Millisecond)
}

func TestMaxWatchers(t *testing.T) {
	t.Parallel()
	h := newHub(t, newFake(), func(c *Config) { c.MaxWatchers = 2 })
	a, err := h.Watch("SALE")
	require.NoError(t, err)
	b, err := h.Watch("OTHER")
	require.NoError(t, err)
	defer b.Close()
	_, err = h.Watch("SALE")
	require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), "%v", err)
	a.Close()
	c, err := h.Watch("SALE")
	require.NoError(t, err)
	c.Close()
}

func TestCloseEndsWatches(t *testing.T) {
	t.Parallel()
	h := newHub(t, newFake(), nil)
	w, err := h.Watch("SALE")
	require.NoError(t, err)
	h.Close()
	h.Close()
	for range w.C() {
		// drain the update sent before Close, if any
	}
	w.Close()
	_, err = h.Watch("SALE")
	require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), "%v", err)
}

// read is the tick's work; with a fake clock its rates are exact.
func TestRatesAndRejections(t *testing.T) {
	t.Parallel()
	st := newFake()
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	h := newHub(t, st, func(c *Config) { c.Clock = clock; c.Interval = time.Second })
	f := &feed{code: "SALE", ctr: new(counters)}
	h.counters.Store("SALE", f.ctr)
	prev := sample{at: clock()}

	// The first read comes right after the feed started: no rate yet.
	h.Reserved("SALE", voucher.ModeStandard, "", false, 0)
	now.Add(int64(10 * time.Millisecond))
	fr := h.read(f, &prev)
	require.NoError(t, fr.err)
	require.Zero(t, fr.snap.ReservationsPerSecond)

	for i := 0; i < 20; i++ {
		h.Reserved("SALE", voucher.ModeFlashSync, "", false, time.Millisecond)
	}
	for i := 0; i < 4; i++ {
		h.Reserved("SALE", voucher.ModeFlashSync, voucher.CodeOutOfStock, false, time.Millisecond)
	}
	h.Reserved("SALE", voucher.ModeFlashSync, voucher.CodeAlreadyUsed, false, time.Millisecond)
	h.Reserved("SALE", voucher.ModeFlashSync, "SOMETHING_NEW", false, time.Millisecond)
	h.Reserved("SALE", voucher.ModeFlashSync, "", true, time.Millisecond)
	h.Reserved("ELSE", voucher.ModeFlashSync, "", false, time.Millisecond) // not watched
	now.Add(int64(2 * time.Second))
	fr = h.read(f, &prev)
	require.NoError(t, fr.err)
	// 21 reservations over 2.01s, 6 rejections, 1 replay.
	require.Equal(t, 10.4, fr.snap.ReservationsPerSecond)
	require.Equal(t, 3.0, fr.snap.RejectionsPerSecond)
	require.Equal(t, 0.5, fr.snap.ReplaysPerSecond)

	// A watcher counts rejections from its first snapshot on.
	w := &Watch{c: make(chan Update, 1)}
	w.offer(fr)
	require.Empty(t, (<-w.c).Snapshot.Rejections)
	h.Reserved("SALE", voucher.ModeFlashSync, voucher.CodeOutOfStock, false, time.Millisecond)
	h.Reserved("SALE", voucher.ModeFlashSync, voucher.CodeOutOfStock, false, time.Millisecond)
	h.Reserved("SALE", voucher.ModeFlashSync, "SOMETHING_NEW", false, time.Millisecond)
	now.Add(int64(time.Second))
	fr = h.read(f, &prev)
	w.offer(fr)
	w.offer(fr) // an unread update is replaced, never queued
	u := <-w.c
	require.Equal(t, map[string]int64{"OUT_OF_STOCK": 2, "OTHER": 1}, u.Snapshot.Rejections)
	require.Equal(t, 3.0, u.Snapshot.RejectionsPerSecond)
	require.Zero(t, u.Snapshot.ReservationsPerSecond)
	require.Len(t, w.c, 0)
}

// Reserved is on the hot path of every reservation: no allocation, watched
// or not.
func TestReservedDoesNotAllocate(t *testing.T) {
	h := newHub(t, newFake(), func(c *Config) { c.Interval = time.Hour })
	w, err := h.Watch("SALE")
	require.NoError(t, err)
	defer w.Close()
	code := string([]byte("SALE")) // not the literal the map was keyed with
	other := string([]byte("ELSE"))
	allocs := testing.AllocsPerRun(1000, func() {
		h.Reserved(code, voucher.ModeFlashSync, "", false, time.Millisecond)
		h.Reserved(code, voucher.ModeFlashSync, voucher.CodeOutOfStock, false, time.Millisecond)
		h.Reserved(other, voucher.ModeFlashSync, "", false, time.Millisecond)
	})
	require.Zero(t, allocs)
}

// Watchers come and go while reservations are counted (run with -race).
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	st := newFake()
	h := newHub(t, st, func(c *Config) { c.Interval = 5 * time.Millisecond })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				h.Reserved("SALE", voucher.ModeStandard, "", false, 0)
				h.Reserved("SALE", voucher.ModeStandard, voucher.CodeOutOfStock, false, 0)
			}
		}()
	}
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				w, err := h.Watch([]string{"SALE", "OTHER"}[i%2])
				if err != nil {
					panic(fmt.Sprint(err))
				}
				select {
				case <-w.C():
				case <-time.After(5 * time.Second):
					panic("no update")
				}
				w.Close()
			}
		}(i)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	require.Equal(t, 0, h.Watchers("SALE"))
	require.Equal(t, 0, h.Watchers("OTHER"))
}
