package voucher

import (
	"context"
	"sync"
	"time"
)

// pacer keeps a walk to a share of its time: wait, before each chunk but
// the first, pauses for as long as the work since the last pause took
// times (1 - share) / share, and longer while the chunks run slower than
// their kind usually does (speeds): a chunk whose time per item is k times
// the fastest of its kind lately pauses k times as long (k at most
// maxSlowdown), so that the walk's share falls to about share / k while
// the stores it reads are busy serving reservations. A share of 0, or 1
// and above, never pauses.
type pacer struct {
	// ratio is (1 - share) / share; 0 never pauses.
	ratio float64
	// speeds are the chunks' fastest times per item lately; nil: the
	// pause is the share's alone.
	speeds *chunkSpeeds
	// since is when the work of the current chunk began (zero before the
	// first chunk).
	since time.Time
	// owed is the pause the work done so far asks for.
	owed time.Duration
}

// walkKind names a kind of chunk of a reconciliation walk, whose items
// cost alike.
type walkKind int

const (
	// gateWalk: a chunk of the gate's orders and their rows (an item is
	// an order of the chunk, released or not).
	gateWalk walkKind = iota
	// gateScan: a chunk of the gate's orders none of which holds a use,
	// so no row is read.
	gateScan
	// storeWalk: a page of the store's held rows and the gate's look-up.
	storeWalk
	walkKinds
)

// maxSlowdown bounds how much longer than the share asks a pacer pauses
// after a slow chunk, so that a walk still ends while its stores are busy.
const maxSlowdown = 8

// speedWindow is how long chunkSpeeds keeps a fastest time: a fastest
// time is forgotten after one to two windows.
const speedWindow = 5 * time.Minute

func newPacer(share float64, speeds *chunkSpeeds) pacer {
	if share <= 0 || share >= 1 {
		return pacer{}
	}
	return pacer{ratio: (1 - share) / share, speeds: speeds}
}

// wait pauses for what the chunks since the last pause owe, then starts
// timing the next chunk. It returns ctx's error when ctx ends meanwhile.
func (p *pacer) wait(ctx context.Context) error {
	if p.ratio > 0 && p.owed > 0 {
		t := time.NewTimer(p.owed)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		p.owed = 0
	}
	p.since = time.Now()
	return nil
}

// worked ends the timing of a chunk of kind begun by wait, which read
// items items.
func (p *pacer) worked(kind walkKind, items int) {
	if p.ratio > 0 && !p.since.IsZero() {
		now := time.Now()
		p.owed += p.pause(kind, items, now.Sub(p.since), now)
	}
}

// pause is the pause a chunk of kind that read items items in took asks
// for at now.
func (p *pacer) pause(kind walkKind, items int, took time.Duration, now time.Time) time.Duration {
	slowdown := 1.0
	if p.speeds != nil {
		slowdown = p.speeds.slowdown(kind, took/time.Duration(max(items, 1)), now)
	}
	return time.Duration(float64(took) * p.ratio * slowdown)
}

// chunkSpeeds keeps, per walkKind, the fastest time per item of the
// chunks of the last one to two speedWindows, across the passes of every
// voucher of a Service. Safe for concurrent use.
type chunkSpeeds struct {
	mu sync.Mutex
	// windowStart is when the current window began; guarded by mu.
	windowStart time.Time
	// current and previous are the fastest times per item of the current
	// and the previous window (0: none yet); guarded by mu.
	current, previous [walkKinds]time.Duration
}

// slowdown records perItem, the time per item of a chunk of kind at now,
// and returns how many times slower it was than the fastest of its kind
// lately, between 1 and maxSlowdown.
func (c *chunkSpeeds) slowdown(kind walkKind, perItem time.Duration, now time.Time) float64 {
	if perItem <= 0 {
		return 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.windowStart) >= speedWindow {
		if now.Sub(c.windowStart) >= 2*speedWindow {
			c.current = [walkKinds]time.Duration{}
		}
		c.previous, c.current = c.current, [walkKinds]time.Duration{}
		c.windowStart = now
	}
	if c.current[kind] == 0 || perItem < c.current[kind] {
		c.current[kind] = perItem
	}
	fastest := c.current[kind]
	if p := c.previous[kind]; p > 0 && p < fastest {
		fastest = p
	}
	return min(float64(perItem)/float64(fastest), maxSlowdown)
}
