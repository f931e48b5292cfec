package voucher

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Held out or sold out.
//
// When no use is free, a voucher whose held uses are all CONFIRMED is sold
// out (OUT_OF_STOCK) for good, unless an order is refunded; one with RESERVED
// holds is only held out (HELD_OUT): the holds that are not paid in time
// expire and give their uses back. HELD_OUT carries the time until the
// earliest hold expires, as Retry-After.
//
// The standard path decides it inside the store's reserve function, in the
// same round trip. The flash paths learn that no use is free from the gate,
// usually from its in-process sold-out cache, without any call: asking the
// store per rejected request would put the whole flash sale's rejections on
// PostgreSQL. So each instance reads Store.Holds at most once per voucher
// per HeldOutCacheTTL (concurrent misses share the read) and answers from
// that: an answer is at most that old.
//
// While the store cannot be read, the answer is the same in both flash
// modes: from the last read if it was made a moment before (nothing in the
// store can change meanwhile), else HELD_OUT with the reservation TTL as
// Retry-After, since no hold is known to be CONFIRMED.

// DefaultHeldOutCacheTTL is the default of ServiceConfig.HeldOutCacheTTL.
const DefaultHeldOutCacheTTL = time.Second

// heldOutCache remembers Store.Holds per voucher.
type heldOutCache struct {
	mu sync.Mutex
	m  map[string]*heldOutEntry
}

type heldOutEntry struct {
	// done is closed once sum and err are set; until then the entry is a
	// read in flight that others wait for.
	done    chan struct{}
	sum     HoldSummary
	err     error
	fetched time.Time
	// answer is the last error made from sum. Answers are shared by every
	// request they fit and never changed once stored, so the HTTP layer
	// may keep their encoding.
	answer atomic.Pointer[Error]
}

// stockAnswer is the code and Retry-After (whole seconds, rounded up) of
// the answer for a voucher with no free use, given what holds its uses.
func stockAnswer(sum HoldSummary, now time.Time, ttl time.Duration) (ErrorCode, time.Duration) {
	var d time.Duration
	switch {
	case !sum.EarliestExpiry.IsZero():
		d = sum.EarliestExpiry.Sub(now)
	case sum.UsedCount < sum.TotalLimit:
		// The gate holds uses the store does not record yet: reservations on
		// their way to it (Kafka mode, or a write in flight). They are
		// RESERVED and fresh, so they expire about a TTL from now.
		d = ttl
	default:
		return CodeOutOfStock, 0
	}
	d = max(d, time.Second)
	return CodeHeldOut, (d + time.Second - 1) / time.Second * time.Second
}

// stockError is the answer for a voucher with no free use, given what holds
// its uses.
func stockError(code string, sum HoldSummary, now time.Time, ttl time.Duration) *Error {
	c, retry := stockAnswer(sum, now, ttl)
	if c == CodeHeldOut {
		return HeldOut(code, retry)
	}
	return Reject(CodeOutOfStock, "", Facts{Voucher: code})
}

// soldOut answers a reservation received at now that the gate found no
// free use for: HELD_OUT or OUT_OF_STOCK. While the answer stays the same
// (the cached holds and the Retry-After second), every request gets the
// same *Error.
func (p *flashPath) soldOut(ctx context.Context, code string, now time.Time) error {
	e, sum, err := p.holds(ctx, code, now)
	if err != nil {
		// The gate's answer stands; only its nuance is missing. With no
		// read of the holds, none is known to be CONFIRMED (and none can
		// become so while the store cannot be read): every use may still
		// come free, within a TTL.
		return stockError(code, HoldSummary{TotalLimit: 1}, now, p.cfg.ReservationTTL)
	}
	if e == nil || e.fetched.After(now) {
		// The holds were read during this request: count from after the read.
		now = p.cfg.Clock()
	}
	if e == nil {
		return stockError(code, sum, now, p.cfg.ReservationTTL)
	}
	c, retry := stockAnswer(sum, now, p.cfg.ReservationTTL)
	if last := e.answer.Load(); last != nil && last.Code == c && last.RetryAfter == retry {
		return last
	}
	answer := stockError(code, sum, now, p.cfg.ReservationTTL)
	e.answer.Store(answer)
	return answer
}

// holds returns Store.Holds of code, cached for HeldOutCacheTTL, and the
// cache entry it came from (nil when the cache is off); now is the time of
// the request.
func (p *flashPath) holds(ctx context.Context, code string, now time.Time) (*heldOutEntry, HoldSummary, error) {
	if p.cfg.HeldOutCacheTTL < 0 {
		sum, err := p.readHolds(ctx, code)
		return nil, sum, err
	}
	c := &p.heldOut
	for waited := false; ; waited = true {
		if waited {
			now = p.cfg.Clock()
		}
		c.mu.Lock()
		e := c.m[code]
		switch {
		case e == nil:
		case !isClosed(e.done):
			c.mu.Unlock()
			select {
			case <-e.done:
				continue
			case <-ctx.Done():
				return nil, HoldSummary{}, Unavailable(ctx.Err(), "waiting for the holds of voucher %s", code)
			}
		case now.Sub(e.fetched) < p.cfg.HeldOutCacheTTL:
			c.mu.Unlock()
			return e, e.sum, e.err
		}
		if c.m == nil || len(c.m) > maxCachedVouchers {
			c.m = map[string]*heldOutEntry{}
		}
		prev := e
		e = &heldOutEntry{done: make(chan struct{})}
		c.m[code] = e
		c.mu.Unlock()

		e.sum, e.err = p.readHolds(ctx, code)
		if e.err != nil && prev != nil && prev.err == nil && now.Sub(prev.fetched) < 2*p.cfg.HeldOutCacheTTL {
			// The last read, a moment ago, stands while the store cannot be
			// read: no hold can be confirmed, released or expired in the
			// store meanwhile, so what held every use then holds it now.
			e.sum, e.err = prev.sum, nil
		}
		if e.err != nil {
			// Remembered for the TTL too: a database that is down is not
			// asked once per rejected request.
			p.log.WarnContext(ctx, "could not read the holds of a sold-out flash voucher; answering HELD_OUT",
				"code", code, "err", e.err)
		}
		e.fetched = p.cfg.Clock()
		close(e.done)
		return e, e.sum, e.err
	}
}

// readHolds reads Store.Holds detached from the caller's cancellation,
// since other requests may be waiting for the same read.
func (p *flashPath) readHolds(ctx context.Context, code string) (HoldSummary, error) {
	rctx, cancel := p.writeContext(ctx)
	defer cancel()
	return p.store.Holds(rctx, code)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
