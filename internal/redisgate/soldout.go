package redisgate

import (
	"sync"
	"sync/atomic"
	"time"
)

// soldOutCache remembers, in this process, the codes Redis answered sold out
// for, so that the rush after the last use is answered without a round trip.
//
// Another instance's release is only seen when the entry expires, so the
// cache may refuse a use that was just given back for up to the TTL: an
// undersell, which the contract allows; it never oversells, because a hit
// only ever refuses.
type soldOutCache struct {
	ttl   time.Duration // <= 0 disables the cache
	now   func() time.Time
	hits  atomic.Uint64
	epoch atomic.Uint64 // bumped by every clear; see mark
	m     sync.Map      // code -> *soldOutEntry
}

type soldOutEntry struct {
	until time.Time
}

// hit reports whether code is known sold out now, counting the hit.
func (c *soldOutCache) hit(code string) bool {
	if c.ttl <= 0 {
		return false
	}
	v, ok := c.m.Load(code)
	if !ok {
		return false
	}
	e := v.(*soldOutEntry)
	if !c.now().Before(e.until) {
		c.m.CompareAndDelete(code, e)
		return false
	}
	c.hits.Add(1)
	return true
}

// begin returns the epoch to pass to mark: read it before asking Redis.
func (c *soldOutCache) begin() uint64 { return c.epoch.Load() }

// mark remembers code as sold out for the TTL, unless a clear happened since
// begin returned epoch: then Redis's answer may predate a use given back in
// this process, and remembering it would refuse that use for a whole TTL.
func (c *soldOutCache) mark(code string, epoch uint64) {
	if c.ttl <= 0 || c.epoch.Load() != epoch {
		return
	}
	e := &soldOutEntry{until: c.now().Add(c.ttl)}
	c.m.Store(code, e)
	// A clear between the check above and Store bumped the epoch after we
	// read it; undo our entry (its Delete may have run before our Store).
	if c.epoch.Load() != epoch {
		c.m.CompareAndDelete(code, e)
	}
}

// clear forgets code: a use was given back or the limit changed.
func (c *soldOutCache) clear(code string) {
	c.epoch.Add(1)
	c.m.Delete(code)
}
