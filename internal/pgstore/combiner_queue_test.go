package pgstore

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

// fakeWriter records the batches a combiner writes and holds each write
// until the test lets it go; it answers every reservation with success.
type fakeWriter struct {
	mu      sync.Mutex
	batches [][]string
	gate    chan struct{} // one receive per write
}

func (w *fakeWriter) write(code string, batch []*pending) {
	ids := make([]string, len(batch))
	for i, p := range batch {
		ids[i] = fmt.Sprintf("%s/%s/%s", code, p.req.OrderID, p.ttl)
		p.res = voucher.Reservation{Redemption: voucher.Redemption{OrderID: p.req.OrderID}}
	}
	w.mu.Lock()
	w.batches = append(w.batches, ids)
	w.mu.Unlock()
	<-w.gate
}

func (w *fakeWriter) written() [][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]string(nil), w.batches...)
}

// active is the number of voucher codes with a goroutine.
func (c *combiner) active() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queues)
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// Batches are bounded by MaxBatch, keep arrival order, hold one TTL each, and
// are per voucher code.
func TestCombinerQueueBatches(t *testing.T) {
	t.Parallel()
	w := &fakeWriter{gate: make(chan struct{})}
	c := newCombiner(CombinerConfig{MaxBatch: 3}, w.write)
	var wg sync.WaitGroup
	reserve := func(code, order string, ttl time.Duration) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.reserve(context.Background(), voucher.ReserveRequest{Code: code, OrderID: order}, time.Now(), ttl)
			if err != nil || res.OrderID != order {
				t.Errorf("%s: got %v, %v", order, res, err)
			}
		}()
	}

	reserve("A", "a0", time.Minute)
	waitUntil(t, func() bool { return len(w.written()) == 1 })
	reserve("B", "b0", time.Minute) // another voucher is not held up by A
	waitUntil(t, func() bool { return len(w.written()) == 2 })
	for i, ttl := range []time.Duration{time.Minute, time.Minute, time.Hour, time.Minute, time.Minute, time.Minute} {
		reserve("A", fmt.Sprintf("a%d", i+1), ttl)
		waitUntil(t, func() bool { return c.waiting("A") == i+1 })
	}
	for range 5 {
		w.gate <- struct{}{}
	}
	wg.Wait()
	require.Equal(t, [][]string{
		{"A/a0/1m0s"},
		{"B/b0/1m0s"},
		{"A/a1/1m0s", "A/a2/1m0s", "A/a4/1m0s"},
		{"A/a3/1h0m0s"},
		{"A/a5/1m0s", "A/a6/1m0s"},
	}, w.written())
	waitUntil(t, func() bool { return c.active() == 0 }) // the goroutines exit when their queue is empty
}

// MaxWait never delays the first reservation; it lets a batch behind a write
// wait for more, and a full batch goes at once.
func TestCombinerQueueMaxWait(t *testing.T) {
	t.Parallel()
	w := &fakeWriter{gate: make(chan struct{}, 100)}
	c := newCombiner(CombinerConfig{MaxBatch: 2, MaxWait: time.Hour}, w.write)
	w.gate <- struct{}{}
	start := time.Now()
	_, err := c.reserve(context.Background(), voucher.ReserveRequest{Code: "A", OrderID: "lone"}, time.Now(), time.Minute)
	require.NoError(t, err)
	require.Less(t, time.Since(start), time.Minute, "a lone reservation is not delayed")
	// The lone write's goroutine may still look for a next batch; one that
	// arrives meanwhile waits to fill, so let it end first.
	waitUntil(t, func() bool { return c.active() == 0 })

	// Behind a write, a batch of 2 fills and goes without waiting an hour.
	w.gate = make(chan struct{}, 100)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.reserve(context.Background(), voucher.ReserveRequest{Code: "A", OrderID: fmt.Sprint(i)}, time.Now(), time.Minute); err != nil {
				t.Error(err)
			}
		}()
		if i == 0 {
			waitUntil(t, func() bool { return len(w.written()) == 2 })
		} else {
			waitUntil(t, func() bool { return c.waiting("A") == i })
		}
	}
	w.gate <- struct{}{}
	w.gate <- struct{}{}
	wg.Wait()
	require.Len(t, w.written(), 3)
	require.Len(t, w.written()[2], 2)
}

// A reservation whose caller left before its batch was taken is dropped.
func TestCombinerQueueDropsLeftCallers(t *testing.T) {
	t.Parallel()
	w := &fakeWriter{gate: make(chan struct{})}
	close(w.gate)
	c := newCombiner(CombinerConfig{}, w.write)
	hold := make(chan struct{})
	c.beforeWrite = func(string, []*pending) { <-hold }

	first := make(chan error, 1)
	go func() {
		_, err := c.reserve(context.Background(), voucher.ReserveRequest{Code: "A", OrderID: "first"}, time.Now(), time.Minute)
		first <- err
	}()
	waitUntil(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.queues["A"] != nil && len(c.queues["A"].waiting) == 0
	})
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() {
		_, err := c.reserve(ctx, voucher.ReserveRequest{Code: "A", OrderID: "left"}, time.Now(), time.Minute)
		left <- err
	}()
	waitUntil(t, func() bool { return c.waiting("A") == 1 })
	cancel()
	require.True(t, voucher.IsCode(<-left, voucher.CodeUnavailable))
	close(hold)
	require.NoError(t, <-first)
	waitUntil(t, func() bool { return c.active() == 0 })
	require.Equal(t, [][]string{{"A/first/1m0s"}}, w.written())

	_, err := c.reserve(ctx, voucher.ReserveRequest{Code: "A", OrderID: "late"}, time.Now(), time.Minute)
	require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), "a caller that already left is not queued")
}

// With Writers 2, a reservation that finds one write of its voucher in
// flight is sent at once by a second writer; the next ones wait for
// either, and both writers exit once the queue is empty.
func TestCombinerQueueTwoWriters(t *testing.T) {
	t.Parallel()
	w := &fakeWriter{gate: make(chan struct{})}
	c := newCombiner(CombinerConfig{Writers: 2}, w.write)
	var wg sync.WaitGroup
	reserve := func(order string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.reserve(context.Background(), voucher.ReserveRequest{Code: "A", OrderID: order}, time.Now(), time.Minute)
			if err != nil || res.OrderID != order {
				t.Errorf("%s: got %v, %v", order, res, err)
			}
		}()
	}
	reserve("a0")
	waitUntil(t, func() bool { return len(w.written()) == 1 })
	reserve("a1")
	waitUntil(t, func() bool { return len(w.written()) == 2 })
	for i := 2; i < 5; i++ {
		reserve(fmt.Sprintf("a%d", i))
		waitUntil(t, func() bool { return c.waiting("A") == i-1 })
	}
	for range 3 {
		w.gate <- struct{}{}
	}
	wg.Wait()
	written := w.written()
	require.Len(t, written, 3)
	require.Equal(t, [][]string{{"A/a0/1m0s"}, {"A/a1/1m0s"}, {"A/a2/1m0s", "A/a3/1m0s", "A/a4/1m0s"}}, written)
	waitUntil(t, func() bool { return c.active() == 0 })
}

// Callers that come back with their next reservation as soon as they are
// answered (a closed loop) are written in one batch per round: the first
// one back does not go alone. Without regrouping they split into two
// batches per round.
func TestCombinerQueueRegroups(t *testing.T) {
	t.Parallel()
	const clients, rounds = 16, 20
	run := func(regroup time.Duration) (batches int) {
		var mu sync.Mutex
		write := func(_ string, batch []*pending) {
			mu.Lock()
			batches++
			mu.Unlock()
			for _, p := range batch {
				p.res = voucher.Reservation{Redemption: voucher.Redemption{OrderID: p.req.OrderID}}
			}
			time.Sleep(5 * time.Millisecond) // the commit's flush
		}
		c := newCombiner(CombinerConfig{Regroup: regroup}, write)
		var wg sync.WaitGroup
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range rounds {
					order := fmt.Sprintf("%d-%d", i, r)
					if _, err := c.reserve(context.Background(), voucher.ReserveRequest{Code: "A", OrderID: order}, time.Now(), time.Minute); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		waitUntil(t, func() bool { return c.active() == 0 })
		return batches
	}
	// The first round's callers may arrive spread out; every later round
	// is one batch (a loaded machine may split a few).
	require.LessOrEqual(t, run(time.Second), rounds+rounds/4)
	require.Greater(t, run(-1), rounds+rounds/4, "without regrouping the callers split")
}

// The callers a writer saw together are split into two cohorts of half
// each once they are 2*minCohort or more, and stay split until they fall
// below 3*minCohort/2; the count decays by an eighth a batch when fewer
// come back.
func TestCombinerSplitsCohorts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		regroup time.Duration
		off     bool  // CombinerConfig.SingleCohort
		seen    []int // batch plus queue behind it, batch after batch
		cohort  int   // the cohort after the last
	}{
		{"few callers, one cohort", time.Second, false, []int{16, 16, 16}, 0},
		{"just below the split", time.Second, false, []int{2*minCohort - 1}, 0},
		{"64 callers, two halves", time.Second, false, []int{64}, 32},
		{"odd count rounds up", time.Second, false, []int{65}, 33},
		{"many callers, bounded by maxBatch", time.Second, false, []int{300}, DefaultMaxBatch},
		{"a short count is smoothed", time.Second, false, []int{64, 50}, 28},
		{"split cohorts stay split", time.Second, false, []int{64, 10, 10}, 25},
		{"callers gone, cohorts end", time.Second, false, []int{64, 10, 10, 10}, 0},
		{"no split on the way down", time.Second, false, []int{50, 50}, 0},
		{"no regrouping, no cohorts", -1, false, []int{64, 64}, 0},
		{"single cohort", time.Second, true, []int{64, 64}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCombiner(CombinerConfig{Regroup: tt.regroup, SingleCohort: tt.off}, nil)
			q := &queue{}
			for _, n := range tt.seen {
				c.splitCohorts(q, n)
			}
			require.Equal(t, tt.cohort, q.cohort)
			if tt.cohort > 0 {
				require.Equal(t, tt.cohort, c.batchLimit(q))
			} else {
				require.Equal(t, DefaultMaxBatch, c.batchLimit(q))
			}
		})
	}
}

// 64 closed-loop callers of one voucher are written in two cohorts of 32
// once the writer has seen them together, not in one batch of 64: one
// cohort is written while the other comes back. The test holds each write
// until every caller not in it is queued again, so that the writer sees
// all 64 at the end of every write, whatever the machine's load.
func TestCombinerQueueTwoCohorts(t *testing.T) {
	t.Parallel()
	const callers, batches = DefaultMaxBatch, 20
	w := &fakeWriter{gate: make(chan struct{})}
	c := newCombiner(CombinerConfig{Regroup: time.Second}, w.write)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for r := 0; !stop.Load(); r++ {
				order := fmt.Sprintf("%d-%d", i, r)
				if _, err := c.reserve(context.Background(), voucher.ReserveRequest{Code: "A", OrderID: order}, time.Now(), time.Minute); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for b := range batches {
		waitUntil(t, func() bool { return len(w.written()) == b+1 })
		n := len(w.written()[b])
		waitUntil(t, func() bool { return c.waiting("A") == callers-n })
		w.gate <- struct{}{}
	}
	stop.Store(true)
	close(w.gate)
	wg.Wait()
	waitUntil(t, func() bool { return c.active() == 0 })
	// The first batch holds whoever had queued when it was taken (up to
	// 64), and the second whoever was back within the regrouping wait; from
	// the first batch's end on the writer has seen all 64 together.
	written := w.written()
	require.LessOrEqual(t, len(written[1]), callers/2)
	for b := 2; b < batches; b++ {
		require.Len(t, written[b], callers/2, "batch %d", b)
	}
}
