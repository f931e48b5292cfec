package redisgate

import (
	"sync"
	"sync/atomic"
)

// keys names the Redis keys of one voucher. Every key carries the code as a
// hash tag ({CODE}), so all of them live in one Redis Cluster slot and one
// Lua script may touch them together.
type keys struct {
	remaining string // string int: uses left; its presence means "loaded"
	users     string // hash customerId -> held count
	orders    string // hash orderId -> encoded hold
	lock      string // string: warm-up lock token
	// codes is, for a campaign's budget (whose code is the campaign id), the
	// hash campaign code -> orderId of the order holding it (held or
	// pending). It grows only with use: a code is absent until an order
	// takes it, and its field goes when that order gives its use back.
	codes string
	// freed is, for a campaign's budget, the hash campaign code -> orderId
	// of the replaced order that held it last, written when a
	// replacement's commit freed the code (commit.lua): that order's own
	// event may still be on its way to PostgreSQL, ahead of the events of
	// the code's next holders.
	freed string
	// version is a counter that every script changing the orders hash
	// increments (load included), so a process can tell that its copy of
	// the orders (see soldOutCache) is still exact without reading them. It
	// only grows while it exists: Forget leaves it, and it expires with the
	// voucher's other keys.
	version string
	// held is the number of orders holding a use (H, P or C in orders),
	// kept by every script that changes whether an order holds one
	// (lib/held.lua), so that clamp.lua and counts.lua read it without
	// reading the orders. Absent for a voucher loaded before it existed
	// until heldinit.lua has counted it.
	held string
	// heldScan is, while heldinit.lua counts held in chunks, the set of the
	// orderIds already counted, with the marker heldScanning; absent
	// otherwise.
	heldScan string
	// void is the hash orderId -> token of the reservation attempt of that
	// orderId the service voided after its call got no answer (void.lua),
	// so that the attempt's script takes nothing should it arrive later.
	// It has its own expiry and outlives Forget: a late script may reach a
	// voucher loaded again.
	void string
	// loading holds, while loadstep.lua writes the voucher in steps, the
	// token of the loader writing it; loadUsers, loadOrders and loadCodes
	// are the hashes it writes, moved into place in its last step.
	loading, loadUsers, loadOrders, loadCodes string
	// budget is the hash of a voucher's money budget (scripts/lib/budget.lua):
	// cap and held, the discounts of the orders holding a use. Absent for a
	// voucher without a budget.
	budget string
}

// keysFor builds the keys of code under prefix. The prefix comes first and
// may not contain braces (New checks), so the first {...} of every key is the
// code's hash tag.
func keysFor(prefix, code string) keys {
	base := prefix + "voucher:{" + code + "}:"
	return keys{
		remaining:  base + "remaining",
		users:      base + "users",
		orders:     base + "orders",
		lock:       base + "lock",
		version:    base + "version",
		codes:      base + "codes",
		freed:      base + "freed",
		held:       base + "held",
		heldScan:   base + "heldscan",
		void:       base + "void",
		loading:    base + "loading",
		loadUsers:  base + "loadusers",
		loadOrders: base + "loadorders",
		loadCodes:  base + "loadcodes",
		budget:     base + "budget",
	}
}

// RemainingKey returns the key holding code's uses left under prefix (the
// gate's Config.KeyPrefix): a string integer, absent while the voucher is
// not loaded. Tools that read the gate's state (the benchmark's
// verification) name it with this rather than spelling the layout again.
func RemainingKey(prefix, code string) string { return keysFor(prefix, code).remaining }

// CodesKey returns the key of a campaign budget's codes-in-use hash under
// prefix: campaign code -> orderId of the order holding it. code is the
// campaign id, the budget's code.
func CodesKey(prefix, code string) string { return keysFor(prefix, code).codes }

// BudgetKey returns the key of the hash of a voucher's money budget and
// occurrence counters (scripts/lib/budget.lua), for tools and tests.
func BudgetKey(prefix, code string) string { return keysFor(prefix, code).budget }

// all lists the keys Forget deletes: all of a voucher's but the version,
// which must keep growing so that a copy made before the Forget never
// matches the state after the next load.
func (k keys) all() []string {
	return []string{k.remaining, k.users, k.orders, k.lock, k.codes, k.freed, k.budget}
}

// counts lists the keys derived from the orders (the held count and a count
// under way), which Forget deletes with all.
func (k keys) counts() []string { return []string{k.held, k.heldScan} }

// staging lists the keys of a load in steps (loadstep.lua), which Forget
// deletes with all.
func (k keys) staging() []string {
	return []string{k.loading, k.loadUsers, k.loadOrders, k.loadCodes}
}

// loadStep is the KEYS layout of loadstep.lua.
func (k keys) loadStep() []string {
	return append(k.script(), k.freed, k.loading, k.loadUsers, k.loadOrders, k.loadCodes, k.budget)
}

// budgeted is script's layout followed by the budget hash: the KEYS of the
// scripts that take or give back a use (reserve, release, replace,
// unreplace, adopt), which move the budget with it.
func (k keys) budgeted() []string { return append(k.script(), k.budget) }

// takeBudgeted is take's layout followed by the budget hash: the KEYS of
// reserve.lua and replace.lua.
func (k keys) takeBudgeted() []string { return append(k.take(), k.budget) }

// script is the common KEYS layout of the scripts that decide or change
// holds: remaining, users, orders, version, codes, held, heldscan.
func (k keys) script() []string {
	return []string{k.remaining, k.users, k.orders, k.version, k.codes, k.held, k.heldScan}
}

// maxCachedKeys bounds keyCache; past it the cache starts over.
const maxCachedKeys = 100_000

// take is script's layout, then the voided attempts: the first eight KEYS
// of reserve.lua and replace.lua (takeBudgeted adds the ninth).
func (k keys) take() []string { return append(k.script(), k.void) }

// keyCache keeps, per code, the KEYS of reserve.lua, so that a reservation
// does not build five strings and a slice. The slices are shared by every
// caller and never written.
type keyCache struct {
	m sync.Map // code -> []string
	n atomic.Int64
}

// reserve returns the KEYS of reserve.lua for code under prefix (the gate's
// one prefix).
func (c *keyCache) reserve(prefix, code string) []string {
	if v, ok := c.m.Load(code); ok {
		return v.([]string)
	}
	k := keysFor(prefix, code)
	ks := k.takeBudgeted()
	if c.n.Add(1) > maxCachedKeys {
		c.m.Clear()
		c.n.Store(0)
	}
	c.m.Store(code, ks)
	return ks
}
