package redisgate

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/voucherd/voucherd/internal/voucher"
)

// DefaultSoldOutMaxOrders is the default of Config.SoldOutMaxOrders: enough
// for most flash sales, small enough that every instance's copy costs
// Redis a few milliseconds in all and this process about 1.3MB.
const DefaultSoldOutMaxOrders = 10_000

// copyMaxAge bounds how long a copy of a voucher's orders is reused while
// its version stays the same. The version makes reuse exact as long as every
// writer bumps it; the bound covers writers that do not (gates from before
// the version key, during a rolling upgrade) and frees copies nobody asks for.
const copyMaxAge = time.Minute

// skipRecheck is how long a voucher whose orders are too many to copy is left
// out of the sold-out cache before their number is checked again. Orders are
// only ever added while a voucher is sold out (a release marks, and only a
// failed write forgets), so the answer seldom changes.
const skipRecheck = time.Minute

// soldOutCache remembers, in this process, the codes Redis answered sold out
// for, so that the rush after the last use is answered without a round trip.
//
// An entry carries a copy of the voucher's orders hash, so that a retry of an
// orderId that holds or held a use is answered as reserve.lua would answer it
// (replay, released, conflict) and only unknown orderIds are refused. The
// copy is read in the background, one read per code at a time, after Redis
// answered sold out (or a take left no use); until it arrives, requests go to
// Redis as if there were no cache. A copy is read in chunks (HSCAN), so no
// command of it grows with the voucher, but a big one costs Redis time and
// this process memory, so the copy is not read again every TTL: reserve.lua
// returns the voucher's version with a sold-out answer, and an expired entry
// whose version is unchanged is renewed without a read (for up to
// copyMaxAge). Vouchers with more orders than Config.SoldOutMaxOrders are
// not cached.
//
// Changes made by other instances are only seen when the entry expires, up
// to the TTL later:
//   - a use given back elsewhere is refused here: an undersell, which the
//     contract allows;
//   - an orderId that took such a use elsewhere is answered sold out instead
//     of replay;
//   - an orderId released elsewhere is answered replay instead of released:
//     in sync mode the service replays through PostgreSQL, which knows the
//     release. In Kafka mode (a pending request) the service would answer
//     the hold's 201 from the gate alone, so there a replay always asks Redis;
//   - an orderId forgotten elsewhere (a failed write in sync mode) is
//     answered replay instead of taking a use: the service then writes it
//     through PostgreSQL, which checks the stock itself.
//
// For a campaign's budget (whose code is the campaign id) the entry is the
// budget's: sold out for every code of the campaign. An unknown orderId
// whose campaign code a held or pending hold of the copy holds is answered
// GateCodeUsed, as reserve.lua checks the code before the stock; any other
// code is sold out. A code freed elsewhere after the copy is answered
// GateCodeUsed until the entry expires, like any use given back elsewhere
// (while the budget is sold out, the code could not take a use anyway
// unless that release also gave the use back).
//
// During a rolling upgrade from a gate without versions, its writes do not
// bump the version, and the window above grows to copyMaxAge for vouchers it
// changes. The cache never oversells: a hit never takes a use. Everything this
// process changes clears the entry (see clear).
//
// A voucher whose money budget is spent (nothing left: every discount is
// refused, clip included) while uses remain is cached the same way, its
// entry marked budget: an unknown orderId is answered GateBudgetExceeded
// with nothing left, as reserve.lua answers it once the code and the
// customer's quota pass (a full quota is answered budget instead of quota
// held: both refuse and take nothing, as with a sold-out voucher).
type soldOutCache struct {
	ttl       time.Duration // <= 0 disables the cache
	maxOrders int           // larger orders hashes are not copied, and not cached
	now       func() time.Time
	hits      atomic.Uint64
	copies    atomic.Uint64               // copies read from Redis, for tests
	epochs    [epochStripes]atomic.Uint64 // bumped by clears, by code; see store
	m         sync.Map                    // code -> *soldOutEntry
	fetching  sync.Map                    // code -> struct{}: a copy is being read
}

// epochStripes is the number of clear counters. Codes share them by hash: a
// clear of one code only spoils the pending stores of codes on its stripe,
// not the copies of every sold-out voucher being read at that moment.
const epochStripes = 64

// epoch returns the clear counter of code (FNV-1a of the code).
func (c *soldOutCache) epoch(code string) *atomic.Uint64 {
	h := uint32(2166136261)
	for i := 0; i < len(code); i++ {
		h ^= uint32(code[i])
		h *= 16777619
	}
	return &c.epochs[h%epochStripes]
}

// soldOutEntry is one cached code. It is never written once stored.
type soldOutEntry struct {
	// until is when the entry stops answering. An expired entry stays
	// for renew until copied+copyMaxAge.
	until time.Time
	// copied is when orders were read from Redis.
	copied time.Time
	// version is the voucher's version when orders were read; "" (a voucher
	// loaded by a gate without versions) never matches.
	version string
	// orders maps every orderId Redis knew when the code was sold out to its
	// encoded hold.
	orders map[string]string
	// codes holds the campaign codes of the held and pending holds of
	// orders (a campaign's budget; empty for a voucher).
	codes map[string]struct{}
	// skip marks a code whose orders are too many to copy: it is not cached
	// (and not read again) until until.
	skip bool
	// budget marks an entry for a spent money budget whose uses remain.
	budget bool
}

// get returns the live entry of code, nil when there is none (or it is a skip
// entry). It does not count a hit: the caller may still need Redis.
func (c *soldOutCache) get(code string) *soldOutEntry {
	if c.ttl <= 0 {
		return nil
	}
	v, ok := c.m.Load(code)
	if !ok {
		return nil
	}
	e := v.(*soldOutEntry)
	if e.skip || !c.now().Before(e.until) {
		return nil
	}
	return e
}

// decide answers a reservation from the copy as reserve.lua would: an
// unknown orderId is sold out, or code used when its campaign code (code,
// "" for a voucher) is held in the copy; a known one is a conflict (other
// customer or campaign code), released, or a replay with its hold. ok is
// false when Redis must answer:
// a pending hold (its commit, here or elsewhere, would not be seen, and the
// service waits for it by asking again), a replay asked for a pending request
// (Kafka mode, where the replay is answered from the gate alone and a release
// elsewhere must be seen), or a value this package cannot read.
func (e *soldOutEntry) decide(orderID, customerID, code string, pendingRequest bool) (d voucher.GateDecision, ok bool) {
	stored, known := e.orders[orderID]
	if !known {
		return e.decideUnknown(code), true
	}
	h, err := decodeHold(orderID, stored)
	if err != nil || h.Pending {
		return voucher.GateDecision{}, false
	}
	d.Hold = h
	switch {
	case h.CustomerID != customerID || h.Code != code:
		d.Outcome = voucher.GateConflict
	case h.Released:
		d.Outcome = voucher.GateReleased
	case pendingRequest:
		return voucher.GateDecision{}, false
	default:
		d.Outcome = voucher.GateReplay
	}
	return d, true
}

// decideUnknown answers for an orderId the copy does not know, with
// campaign code code ("" for a voucher).
func (e *soldOutEntry) decideUnknown(code string) voucher.GateDecision {
	if _, used := e.codes[code]; used && code != "" {
		return voucher.GateDecision{Outcome: voucher.GateCodeUsed}
	}
	if e.budget {
		return voucher.GateDecision{Outcome: voucher.GateBudgetExceeded}
	}
	return voucher.GateDecision{Outcome: voucher.GateSoldOut}
}

// heldCodes returns the campaign codes the held and pending holds of orders
// hold, with those that the orders replaced by pending holds keep
// (replace.lua, keptCode in scripts/lib/codes.lua); nil when none does (a
// voucher). A value decodeHold cannot read is left out: decide asks Redis
// for its own orderId, and a code it might hold is at worst answered sold
// out, which is what the budget is.
func heldCodes(orders map[string]string) map[string]struct{} {
	var codes map[string]struct{}
	add := func(code string) {
		if codes == nil {
			codes = make(map[string]struct{})
		}
		codes[code] = struct{}{}
	}
	for id, v := range orders {
		h, err := decodeHold(id, v)
		if err != nil || h.Released {
			continue
		}
		if h.Code != "" {
			add(h.Code)
		}
		if !h.Pending || h.Replaces == "" {
			continue
		}
		if old, err := decodeHold(h.Replaces, orders[h.Replaces]); err == nil && old.Released && old.Code != "" {
			add(old.Code)
		}
	}
	return codes
}

// begin returns the epoch to pass to renew, startFetch and the stores: read
// it before asking Redis.
func (c *soldOutCache) begin(code string) uint64 { return c.epoch(code).Load() }

// renew handles a sold-out answer whose version the caller knows, and reports
// whether nothing is left to do: the entry of code still holds a copy of that
// version (and not older than copyMaxAge), and answers again for the TTL; or
// code is skipped.
func (c *soldOutCache) renew(code string, epoch uint64, version string) bool {
	if c.ttl <= 0 {
		return true
	}
	v, ok := c.m.Load(code)
	if !ok {
		return false
	}
	e := v.(*soldOutEntry)
	now := c.now()
	if e.skip {
		return now.Before(e.until)
	}
	if version == "" || e.version != version || !now.Before(e.copied.Add(copyMaxAge)) {
		return false
	}
	c.store(code, epoch, &soldOutEntry{until: now.Add(c.ttl), copied: e.copied, version: e.version, orders: e.orders, codes: e.codes,
		budget: e.budget})
	return true
}

// startFetch reports whether the caller should read the copy of code, which
// Redis just answered sold out for, and then store what it found, and call
// endFetch in any case. It is false when the cache is off, a clear happened
// since begin returned epoch, code has a live entry (skip ones included) or
// another read of code is running.
func (c *soldOutCache) startFetch(code string, epoch uint64) bool {
	if c.ttl <= 0 || c.epoch(code).Load() != epoch {
		return false
	}
	if v, ok := c.m.Load(code); ok && c.now().Before(v.(*soldOutEntry).until) {
		return false
	}
	_, running := c.fetching.LoadOrStore(code, struct{}{})
	return !running
}

// endFetch ends the read startFetch allowed.
func (c *soldOutCache) endFetch(code string) { c.fetching.Delete(code) }

// set caches code as sold out with a copy of its orders read at since (a
// time before the read began), for the TTL from since.
func (c *soldOutCache) set(code string, epoch uint64, since time.Time, version string, orders map[string]string, budget bool) {
	c.store(code, epoch, &soldOutEntry{until: since.Add(c.ttl), copied: since, version: version, orders: orders, codes: heldCodes(orders),
		budget: budget})
}

// skipCode leaves code out of the cache for skipRecheck: its orders are too
// many to copy.
func (c *soldOutCache) skipCode(code string, epoch uint64) {
	c.store(code, epoch, &soldOutEntry{until: c.now().Add(max(skipRecheck, c.ttl)), skip: true})
}

// store puts e in the cache, unless a clear happened since begin returned
// epoch: then what Redis said may predate a use given back in this process,
// and remembering it would refuse that use for a whole TTL. It also drops
// entries nothing can use any more; stores are rare (one per code and TTL at
// most), so walking the map here costs little.
func (c *soldOutCache) store(code string, epoch uint64, e *soldOutEntry) {
	ep := c.epoch(code)
	if c.ttl <= 0 || ep.Load() != epoch {
		return
	}
	c.m.Store(code, e)
	// A clear between the check above and Store bumped the epoch after we
	// read it; undo our entry (its Delete may have run before our Store).
	if ep.Load() != epoch {
		c.m.CompareAndDelete(code, e)
		return
	}
	now := c.now()
	c.m.Range(func(k, v any) bool {
		old := v.(*soldOutEntry)
		if !now.Before(old.until) && (old.skip || !now.Before(old.copied.Add(copyMaxAge))) {
			c.m.CompareAndDelete(k, old)
		}
		return true
	})
}

// clear forgets code: a use was given back, the limit changed, an order was
// adopted or the voucher was loaded or forgotten.
func (c *soldOutCache) clear(code string) {
	c.epoch(code).Add(1)
	c.m.Delete(code)
}

// markSoldOut handles a sold-out answer from Redis (or a take that left no
// use) with the voucher's version: it renews the entry of code when its copy
// is of that version, and otherwise starts reading a copy in the background,
// unless one is on its way. The reservation does not wait: requests go to
// Redis until the copy arrives.
func (g *Gate) markSoldOut(code string, epoch uint64, version string) {
	g.markRefusing(code, epoch, version, false)
}

// markRefusing is markSoldOut, or with budget the same for a spent money
// budget (GateBudgetExceeded with nothing left).
func (g *Gate) markRefusing(code string, epoch uint64, version string, budget bool) {
	if g.soldOut.renew(code, epoch, version) || !g.soldOut.startFetch(code, epoch) {
		return
	}
	started := g.goBackground(func() {
		defer g.soldOut.endFetch(code)
		g.fetchSoldOut(code, epoch, budget)
	})
	if !started {
		g.soldOut.endFetch(code)
	}
}

// fetchSoldOut reads a copy of code's orders and caches it if the voucher is
// still sold out (with budget: sold out, or its money budget still spent)
// and its orders fit SoldOutMaxOrders. The copy is read with HSCAN,
// Config.ScanCount entries a call (no command grows with the voucher),
// between two reads of the version: equal versions prove that no script
// changed the orders meanwhile, so the chunks make one exact copy (an entry
// HSCAN returns twice is the same entry). A failure caches nothing: the next
// sold-out answer tries again.
func (g *Gate) fetchSoldOut(code string, epoch uint64, budget bool) {
	client, err := g.conn()
	if err != nil {
		return
	}
	since := g.cfg.Clock()
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withBulkTimeout(g.bg)
	defer cancel()
	res := client.DoMulti(ctx,
		client.B().Hlen().Key(k.orders).Build(),
		client.B().Get().Key(k.version).Build(),
	)
	n, err1 := res[0].AsInt64()
	before, err2 := optString(res[1])
	if errors.Join(err1, err2) != nil {
		return
	}
	if n > int64(g.soldOut.maxOrders) {
		g.soldOut.skipCode(code, epoch)
		return
	}
	orders := make(map[string]string, n)
	if err := g.scanHash(ctx, client, k.orders, func(id, v string) error {
		orders[id] = v
		return nil
	}); err != nil {
		return
	}
	res = client.DoMulti(ctx,
		client.B().Get().Key(k.remaining).Build(),
		client.B().Hmget().Key(k.budget).Field("cap", "held").Build(),
		client.B().Get().Key(k.version).Build(),
	)
	remaining, err3 := res[0].AsInt64()
	spent, err4 := budgetSpent(res[1])
	after, err5 := optString(res[2])
	if err := errors.Join(err3, err4, err5); err != nil {
		return // includes a voucher no longer loaded (remaining is nil)
	}
	if before != after || remaining > 0 && !(budget && spent) {
		return
	}
	g.soldOut.copies.Add(1)
	g.soldOut.set(code, epoch, since, before, orders, remaining > 0)
}

// optString is the string of a GET reply, "" when the key is absent.
func optString(r rueidis.RedisResult) (string, error) {
	s, err := r.ToString()
	if rueidis.IsRedisNil(err) {
		return "", nil
	}
	return s, err
}
