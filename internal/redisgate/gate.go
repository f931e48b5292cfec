// Package redisgate is the Redis adapter of voucher.Gate: the atomic
// check-and-take of flash-sale vouchers. It owns the Redis key layout (one
// hash tag per voucher, so a voucher lives in one Cluster slot), the Lua
// scripts in scripts/ that decide each reservation in one step, the warm-up
// lock, and an in-process sold-out cache that answers the rush after the last
// use without calling Redis (see soldOutCache for what it may miss).
//
// PostgreSQL stays the source of truth: a voucher is loaded into Redis from a
// voucher.Snapshot (remaining = totalLimit - held), only when it is absent,
// and every key expires some time after the voucher ends.
//
// Every Redis failure (connection, timeout, error reply) comes back as a
// *voucher.Error with voucher.CodeUnavailable. A timeout of a writing call
// does not prove that nothing was written: Redis may have run the script and
// lost the reply. Such holds are found by reconciliation (Inspect).
//
// A Gate starts without Redis: New returns one whose calls fail with
// CodeUnavailable until a background loop manages to connect, so that the
// service can start, serve standard vouchers and answer flash ones with 503.
package redisgate

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Defaults of Config.
const (
	DefaultSoldOutTTL = time.Second
	DefaultKeyGrace   = 24 * time.Hour
	DefaultTimeout    = 500 * time.Millisecond
)

// minKeyTTL is the shortest life a load gives a voucher's keys, so that a
// voucher loaded just before (or after) its end plus grace is not deleted by
// Redis the moment it is written and then loaded again on every request.
const minKeyTTL = time.Minute

// bulkTimeout is the least time given to calls that read or write every
// order of a voucher.
const bulkTimeout = 5 * time.Second

// Config configures a Gate. Zero values mean the defaults.
type Config struct {
	// Addrs are the Redis addresses, "host:port". One address of a node not
	// in cluster mode means a single node; a cluster is found from any of
	// its nodes. Required.
	Addrs []string
	// Username and Password authenticate with Redis (ACL or requirepass),
	// when set.
	Username string
	Password string
	// TLS, when set, is how the client dials every node (one server or
	// all nodes of a cluster); nil dials plain TCP. Leave ServerName empty
	// on a cluster so that each node is checked against its own host name.
	TLS *tls.Config
	// KeyPrefix is prepended to every key, to share a Redis between
	// deployments or tests. It may not contain '{' or '}' (the code is the
	// hash tag).
	KeyPrefix string
	// SoldOutTTL is how long a sold-out answer is remembered in this process
	// (default 1s; negative disables the cache).
	SoldOutTTL time.Duration
	// SoldOutMaxOrders bounds the orders (held, pending and released) the
	// sold-out cache copies from Redis for a voucher (default 10,000). A
	// voucher with more is not cached: every request goes to Redis. A copy
	// is read with HSCAN, ScanCount entries a call, and it is read again by
	// every instance after every change of the orders: measured on a
	// development machine (read whole), 10,000 orders took about 4ms of
	// Redis time and kept 1.3MB in this process, 100,000 orders 55-100ms
	// and 13MB.
	SoldOutMaxOrders int
	// ScanCount is how many entries of a voucher's hashes one call reads or
	// writes when the gate handles a whole voucher in chunks (Inspect,
	// counting the held count of a voucher loaded without one, Load of a
	// bigger snapshot, the sold-out cache's copy of the orders); default
	// DefaultScanCount. Each call holds Redis for
	// a time proportional to it.
	ScanCount int
	// KeyGrace is how long after a voucher's end its keys stay in Redis
	// (default 24h), so late confirms and releases still find them.
	KeyGrace time.Duration
	// Timeout bounds every Redis call (default 500ms), on top of the
	// caller's context.
	Timeout time.Duration
	// Clock tells the time for the sold-out cache and key expiries (default
	// time.Now).
	Clock func() time.Time
	// OnSoldOutHit, when set, is called for every reservation answered from
	// the sold-out cache (sold out, or a known orderId answered from the
	// cached copy), for metrics. It must be fast and must not block.
	OnSoldOutHit func(code string)
	// FlushDelay, when positive, is how long the client may wait after
	// writing a batch of pipelined commands to a connection before writing
	// the next (rueidis's MaxFlushDelay): the commands of concurrent
	// requests that arrive meanwhile go out in one write and are read by
	// Redis in one read, which saves system calls in this process and in
	// Redis at the price of at most this much latency per call. 0 writes
	// as soon as a command is queued.
	FlushDelay time.Duration
	// Pipelines is how many connections per Redis node carry the pipelined
	// commands (rounded down to a power of two, at most 256); 0 is the
	// client's default (to a single node one per CPU up to 4, to each node
	// of a cluster 1). Fewer connections put more commands in each write.
	Pipelines int
	// CombineTakes makes the takes of one voucher that arrive while one of
	// its reserve.lua calls is in flight share the next call (takeQueues):
	// one script call and one round trip per batch instead of per take.
	// Each take is still made and answered as a call of its own would be,
	// and sent only while its caller waits. Off (the default), each take
	// is a call of its own. docs/core.md ("What a flash take asks of
	// Redis") has the trade-off.
	CombineTakes bool
	// WrapClient, when set, wraps the Redis client once it is created, for
	// instrumentation (tracing). The wrapper must keep the client's
	// behaviour.
	WrapClient func(rueidis.Client) rueidis.Client
}

// Gate implements voucher.Gate on Redis (single node or Cluster) with
// rueidis, whose auto-pipelining batches concurrent calls on one connection
// per node. It is safe for concurrent use.
type Gate struct {
	cfg     Config
	soldOut *soldOutCache
	keys    keyCache  // the reserve script's keys per code
	claims  claimMode // how orderIds are claimed (claim.go)

	client  atomic.Pointer[clientBox]   // nil until connected; see conn
	dialErr atomic.Pointer[dialFailure] // why the client does not exist yet

	bg     context.Context // done when Close begins: ends background work
	stopBg context.CancelFunc
	mu     sync.Mutex // guards closed against starting background work
	closed bool
	// commits combines concurrent commits of one voucher (commits.go).
	commits commitQueues
	wg      sync.WaitGroup // the dial loop and sold-out copy fetches

	// takes combines concurrent takes of one voucher (takes.go) when
	// Config.CombineTakes.
	takes takeQueues
}

var _ voucher.Gate = (*Gate)(nil)

// New validates cfg, tries once to connect to Redis, and returns a Gate. It
// fails on an invalid configuration (including credentials Redis refuses),
// not when Redis is unreachable: then every call returns CodeUnavailable,
// Ping included, until a background loop connects (it tries every second
// until Close; credentials refused by a Redis that was down at New only show
// in the errors of Ping and the other calls).
func New(cfg Config) (*Gate, error) {
	if len(cfg.Addrs) == 0 {
		return nil, errors.New("redisgate: Config.Addrs is required")
	}
	if strings.ContainsAny(cfg.KeyPrefix, "{}") {
		return nil, fmt.Errorf("redisgate: Config.KeyPrefix %q may not contain braces", cfg.KeyPrefix)
	}
	if cfg.SoldOutTTL == 0 {
		cfg.SoldOutTTL = DefaultSoldOutTTL
	}
	if cfg.KeyGrace == 0 {
		cfg.KeyGrace = DefaultKeyGrace
	}
	if cfg.KeyGrace < 0 {
		return nil, fmt.Errorf("redisgate: Config.KeyGrace %s is negative", cfg.KeyGrace)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("redisgate: Config.Timeout %s is negative", cfg.Timeout)
	}
	if cfg.SoldOutMaxOrders == 0 {
		cfg.SoldOutMaxOrders = DefaultSoldOutMaxOrders
	}
	if cfg.SoldOutMaxOrders < 0 {
		return nil, fmt.Errorf("redisgate: Config.SoldOutMaxOrders %d is negative", cfg.SoldOutMaxOrders)
	}
	if cfg.ScanCount == 0 {
		cfg.ScanCount = DefaultScanCount
	}
	if cfg.ScanCount < 0 {
		return nil, fmt.Errorf("redisgate: Config.ScanCount %d is negative", cfg.ScanCount)
	}
	if cfg.FlushDelay < 0 || cfg.Pipelines < 0 || cfg.Pipelines > maxPipelines {
		return nil, fmt.Errorf("redisgate: Config.FlushDelay %s and Pipelines %d must be >= 0 (Pipelines at most %d)", cfg.FlushDelay, cfg.Pipelines, maxPipelines)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	g := &Gate{
		cfg:     cfg,
		soldOut: &soldOutCache{ttl: cfg.SoldOutTTL, maxOrders: cfg.SoldOutMaxOrders, now: cfg.Clock},
	}
	g.bg, g.stopBg = context.WithCancel(context.Background())
	client, err := g.dial()
	switch {
	case err == nil:
		g.client.Store(&clientBox{client})
	case isConfigError(err):
		g.stopBg()
		return nil, fmt.Errorf("redisgate: redis %s: %w", strings.Join(cfg.Addrs, ","), err)
	default:
		g.dialErr.Store(&dialFailure{err: err})
		g.goBackground(g.dialLoop)
	}
	return g, nil
}

// Close stops the background work (connecting, sold-out copies), waits for
// it, and closes the connections. It is safe to call more than once.
func (g *Gate) Close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	g.mu.Unlock()
	g.stopBg()
	g.wg.Wait()
	if b := g.client.Load(); b != nil {
		b.Close()
	}
}

// SoldOutHits is the number of reservations answered from the sold-out cache
// since New.
func (g *Gate) SoldOutHits() uint64 { return g.soldOut.hits.Load() }

// Reserve checks and takes a use for hold.OrderID in one script. hold.Pending
// stores the hold as pending (Kafka mode) until Commit. With
// Config.CombineTakes, concurrent takes of one voucher share a script call,
// each made and answered as a call of its own would be (takeQueues).
//
// A sold-out answer, or a take that leaves no use, puts the code in the
// sold-out cache for SoldOutTTL, once a copy of the voucher's orders is in
// this process (read in the background, or kept from before when the
// voucher's version has not changed). While it is there, reservations are
// answered from the copy without a Redis call, as reserve.lua would answer
// them: GateSoldOut for an unknown orderId; GateReplay, GateReleased or
// GateConflict (with the stored hold) for a known one; a pending hold, and a
// replay of a pending (Kafka mode) request, still ask Redis; GateCodeUsed for
// an unknown orderId with a campaign code a held or pending hold of the copy
// holds. soldOutCache describes what the copy may miss; it never oversells.
//
// A campaign's hold (hold.Code set, code the campaign id) also takes its
// code in the budget's codes hash: GateCodeUsed when another order holds
// it, before the quota and the stock are looked at; an orderId known with
// another code is GateConflict.
func (g *Gate) Reserve(ctx context.Context, code string, perUserLimit int32, hold voucher.Hold) (voucher.GateDecision, error) {
	if err := checkCode(code); err != nil {
		return voucher.GateDecision{}, err
	}
	if err := checkOrderID(hold.OrderID); err != nil {
		return voucher.GateDecision{}, err
	}
	if err := checkCampaignCode(hold.Code); err != nil {
		return voucher.GateDecision{}, err
	}
	if perUserLimit <= 0 {
		return voucher.GateDecision{}, voucher.Errorf(voucher.CodeInvalidRequest, "perUserLimit must be > 0")
	}
	if e := g.soldOut.get(code); e != nil {
		if d, ok := e.decide(hold.OrderID, hold.CustomerID, hold.Code, hold.Pending); ok {
			d.Local = true
			g.soldOut.hits.Add(1)
			if g.cfg.OnSoldOutHit != nil {
				g.cfg.OnSoldOutHit(code)
			}
			return d, nil
		}
	}
	r := newTakeReq(perUserLimit, hold)
	if g.cfg.CombineTakes {
		queued := r // the queue keeps it: on the heap, r stays on the stack
		return g.take(ctx, code, &queued)
	}
	return g.takeAlone(ctx, code, &r)
}

// decideTake turns reserve.lua's reply to the take of orderID into the
// gate's decision, and caches a sold-out answer (or a take that left no
// use) when the code's sold-out entry was not cleared since epoch.
func (g *Gate) decideTake(code string, epoch uint64, orderID string, res []rueidis.RedisMessage) (voucher.GateDecision, error) {
	status, remaining, third, err := reserveReply(res)
	if err != nil {
		return voucher.GateDecision{}, interpretError(err, "reserve", code)
	}
	d := voucher.GateDecision{Remaining: max(remaining, 0)}
	switch status {
	case reserveTaken:
		d.Outcome = voucher.GateTaken
		if d.Discount, err = clippedDiscount(res); err != nil {
			return voucher.GateDecision{}, interpretError(err, "reserve", code)
		}
		if remaining <= 0 {
			// The last use is gone: the next callers need not ask Redis.
			g.markSoldOut(code, epoch, third)
		}
	case reserveReplay, reserveConflict, reserveReleased:
		d.Outcome = knownOrderOutcome(status)
		if d.Hold, err = decodeHold(orderID, third); err != nil {
			return voucher.GateDecision{}, interpretError(err, "reserve", code)
		}
	case reserveNotLoaded:
		d.Outcome = voucher.GateNotLoaded
	case reserveQuotaHeld:
		d.Outcome = voucher.GateQuotaHeld
	case reserveSoldOut:
		d.Outcome = voucher.GateSoldOut
		g.markSoldOut(code, epoch, third)
	case reserveCodeUsed:
		d.Outcome = voucher.GateCodeUsed
	case reserveVoided:
		return voucher.GateDecision{}, errVoidedAttempt("reserve", code)
	case reserveWindowFull:
		// Not cached as sold out: the next occurrence has its own quota.
		d.Outcome = voucher.GateWindowFull
	case reserveBudget:
		d.Outcome = voucher.GateBudgetExceeded
		if d.BudgetLeft, err = strconv.ParseInt(third, 10, 64); err != nil {
			return voucher.GateDecision{}, interpretError(err, "reserve", code)
		}
		if d.BudgetLeft <= 0 && len(res) > 3 {
			// Spent: the next callers need not ask Redis either.
			ver, _ := res[3].ToString()
			g.markRefusing(code, epoch, ver, true)
		}
	default:
		return voucher.GateDecision{}, interpretError(fmt.Errorf("unknown reserve status %d", status), "reserve", code)
	}
	return d, nil
}

// knownOrderOutcome maps the statuses of reserve.lua for a known orderId.
func knownOrderOutcome(status int64) voucher.GateOutcome {
	switch status {
	case reserveReplay:
		return voucher.GateReplay
	case reserveConflict:
		return voucher.GateConflict
	}
	return voucher.GateReleased
}

// reserveReply splits the reply of reserve.lua. third is the stored hold of a
// known orderId, or the version after a take's call (bumped once per call)
// or with a sold-out answer.
func reserveReply(res []rueidis.RedisMessage) (status, remaining int64, third string, err error) {
	if len(res) < 2 {
		return 0, 0, "", fmt.Errorf("%w: reserve has %d elements", errBadReply, len(res))
	}
	if status, err = res[0].AsInt64(); err != nil {
		return 0, 0, "", err
	}
	if remaining, err = res[1].AsInt64(); err != nil {
		return 0, 0, "", err
	}
	if len(res) > 2 {
		if third, err = res[2].ToString(); err != nil {
			return 0, 0, "", err
		}
	}
	return status, remaining, third, nil
}

// Lookup returns what the gate knows of orderID: a held, pending or released
// hold. found is false when the orderId is unknown or the voucher is not
// loaded.
func (g *Gate) Lookup(ctx context.Context, code, orderID string) (voucher.Hold, bool, error) {
	if err := checkCode(code); err != nil {
		return voucher.Hold{}, false, err
	}
	if err := checkOrderID(orderID); err != nil {
		return voucher.Hold{}, false, err
	}
	client, err := g.conn()
	if err != nil {
		return voucher.Hold{}, false, interpretError(err, "lookup", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	s, err := lookupScript.Exec(ctx, client, []string{k.remaining, k.orders}, []string{orderID}).ToString()
	if rueidis.IsRedisNil(err) {
		return voucher.Hold{}, false, nil
	}
	if err != nil {
		return voucher.Hold{}, false, interpretError(err, "lookup", code)
	}
	h, err := decodeHold(orderID, s)
	if err != nil {
		return voucher.Hold{}, false, interpretError(err, "lookup", code)
	}
	return h, true, nil
}

// Commit marks the pending hold of hold.OrderID durable and reports whether
// it did. It does nothing for a hold that is not pending (already committed,
// released, unknown). A replacement's hold frees the campaign code its
// replaced order kept while it was pending (Replace, commit.lua).
func (g *Gate) Commit(ctx context.Context, code string, hold voucher.Hold) (bool, error) {
	if err := checkCode(code); err != nil {
		return false, err
	}
	if err := checkOrderID(hold.OrderID); err != nil {
		return false, err
	}
	return g.commit(ctx, code, hold.OrderID, hold.Owner)
}

// TakeOver implements voucher.Gate with takeover.lua.
func (g *Gate) TakeOver(ctx context.Context, code string, hold voucher.Hold, fencer string) (voucher.GateTakeOver, error) {
	if err := checkCode(code); err != nil {
		return voucher.GateHoldGone, err
	}
	if err := checkOrderID(hold.OrderID); err != nil {
		return voucher.GateHoldGone, err
	}
	client, err := g.conn()
	if err != nil {
		return voucher.GateHoldGone, interpretError(err, "takeover", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	n, err := takeOverScript.Exec(ctx, client, []string{k.orders, k.version}, []string{hold.OrderID, hold.Owner, fencer}).AsInt64()
	if err != nil {
		return voucher.GateHoldGone, interpretError(err, "takeover", code)
	}
	switch n {
	case 1:
		return voucher.GateTakenOver, nil
	case 2:
		return voucher.GateHoldDurable, nil
	}
	return voucher.GateHoldGone, nil
}

// Release gives the use of orderID back if it holds one, and reports whether
// it did. With voucher.ReleaseMark the orderId stays known as released; with
// voucher.ReleaseForget it is forgotten and may take a use again. A voucher
// that is not loaded is left alone: its next load reads PostgreSQL.
func (g *Gate) Release(ctx context.Context, code, orderID string, mode voucher.ReleaseMode) (bool, error) {
	if err := checkCode(code); err != nil {
		return false, err
	}
	if err := checkOrderID(orderID); err != nil {
		return false, err
	}
	var m string
	switch mode {
	case voucher.ReleaseMark:
		m = "mark"
	case voucher.ReleaseForget:
		m = "forget"
	default:
		return false, voucher.Errorf(voucher.CodeInvalidRequest, "unknown release mode %d", mode)
	}
	client, err := g.conn()
	if err != nil {
		return false, interpretError(err, "release", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	n, err := releaseScript.Exec(ctx, client, k.budgeted(), []string{orderID, m}).AsInt64()
	if err != nil {
		return false, interpretError(err, "release", code)
	}
	if n == 1 {
		g.soldOut.clear(code)
	}
	return n == 1, nil
}

// Load writes the snapshot if the voucher is not loaded, and reports whether
// it wrote. A snapshot of at most Config.ScanCount customers and orders is
// written in one script (load.lua), a bigger one in steps of that many
// (loadInSteps); either way the voucher is loaded all at once. Remaining is s.Remaining() (totalLimit - held); held orders are
// stored as held, released ones as released markers. An order of a
// campaign's budget made with one of its codes (its VoucherCode is that
// code, not the budget's) keeps the code in its hold, and the codes of the
// held ones are held again in the budget's codes hash.
func (g *Gate) Load(ctx context.Context, s voucher.Snapshot) (bool, error) {
	code := s.Voucher.Code
	if err := checkCode(code); err != nil {
		return false, err
	}
	if s.Voucher.EndsAt.IsZero() {
		return false, voucher.Errorf(voucher.CodeInvalidRequest, "snapshot of %s has no endsAt", code)
	}
	client, err := g.conn()
	if err != nil {
		return false, interpretError(err, "load", code)
	}
	users := make([]string, 0, 2*len(s.Customers))
	for cust, held := range s.Customers {
		if held <= 0 {
			continue
		}
		users = append(users, cust, strconv.FormatInt(int64(held), 10))
	}
	orders := make([]string, 0, 2*len(s.Orders))
	var held int64
	for _, r := range s.Orders {
		state := byte(stateReleased)
		switch {
		case r.Status == voucher.StatusConfirmed:
			state = stateConfirmed
		case r.Status.Held():
			state = stateHeld
		}
		if state != stateReleased {
			held++
		}
		orders = append(orders, r.OrderID, encodeHold(state, voucher.Hold{
			CustomerID:     r.CustomerID,
			OrderAmount:    r.OrderAmount,
			DiscountAmount: r.DiscountAmount,
			ReservedAt:     r.CreatedAt,
			ExpiresAt:      r.ExpiresAt,
			HeldSince:      heldSinceOf(r),
			Code:           campaignCodeOf(r, code),
			Window:         r.Window,
		}))
	}
	budget := snapshotBudget(s)
	k := keysFor(g.cfg.KeyPrefix, code)
	expireAt := strconv.FormatInt(g.expireAt(s.Voucher.EndsAt), 10)
	remaining := strconv.FormatInt(s.Remaining(), 10)
	var wrote int64
	if (len(users)+len(orders))/2 > g.cfg.ScanCount {
		wrote, err = g.loadInSteps(ctx, client, k, expireAt, remaining, held, budget, users, orders)
	} else {
		args := make([]string, 0, 5+len(users)+len(orders))
		args = append(args, expireAt, remaining, strconv.Itoa(len(users)/2))
		args = append(append(args, users...), orders...)
		args = append(args, budget...)
		ctx, cancel := g.withBulkTimeout(ctx)
		defer cancel()
		wrote, err = loadScript.Exec(ctx, client, append(k.script(), k.freed, k.budget), args).AsInt64()
	}
	if err != nil {
		return false, interpretError(err, "load", code)
	}
	if wrote == 1 {
		g.soldOut.clear(code)
	}
	return wrote == 1, nil
}

// Loaded reports whether the voucher is in the gate.
func (g *Gate) Loaded(ctx context.Context, code string) (bool, error) {
	if err := checkCode(code); err != nil {
		return false, err
	}
	client, err := g.conn()
	if err != nil {
		return false, interpretError(err, "exists", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	n, err := client.Do(ctx, client.B().Exists().Key(k.remaining).Build()).AsInt64()
	if err != nil {
		return false, interpretError(err, "exists", code)
	}
	return n == 1, nil
}

// AdjustLimit adds delta to remaining when the voucher is loaded (a limit
// change), sets its money budget's cap to v.Budget.Amount, and moves the
// expiry of its keys to v.EndsAt + KeyGrace. The
// per-customer limit is not stored in Redis (Reserve takes it from the
// caller), so it needs no update here. It clears the sold-out cache of the
// code in this process. A voucher that is not loaded is left alone.
func (g *Gate) AdjustLimit(ctx context.Context, v voucher.Voucher, delta int64) error {
	if err := checkCode(v.Code); err != nil {
		return err
	}
	expireAt := int64(0)
	if !v.EndsAt.IsZero() {
		expireAt = g.expireAt(v.EndsAt)
	}
	client, err := g.conn()
	if err != nil {
		return interpretError(err, "adjust", v.Code)
	}
	k := keysFor(g.cfg.KeyPrefix, v.Code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	budget := ""
	if v.Budget.Amount > 0 {
		budget = strconv.FormatInt(v.Budget.Amount, 10)
	}
	err = adjustScript.Exec(ctx, client, k.budgeted(),
		[]string{strconv.FormatInt(delta, 10), strconv.FormatInt(expireAt, 10), budget}).Error()
	// Clear even on error: the script may have run, and a cleared cache
	// costs one Redis call at most.
	g.soldOut.clear(v.Code)
	if err != nil {
		return interpretError(err, "adjust", v.Code)
	}
	return nil
}

// Lock takes the warm-up lock of code for ttl (SET NX PX with a random
// token). ok is false when another loader holds it. unlock deletes the lock
// only while it still holds this token, so a loader whose lock expired cannot
// free the next loader's; it is safe to call more than once.
func (g *Gate) Lock(ctx context.Context, code string, ttl time.Duration) (func(), bool, error) {
	if err := checkCode(code); err != nil {
		return nil, false, err
	}
	if ttl < time.Millisecond {
		return nil, false, voucher.Errorf(voucher.CodeInvalidRequest, "lock ttl %s is below 1ms", ttl)
	}
	client, err := g.conn()
	if err != nil {
		return nil, false, interpretError(err, "lock", code)
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, false, voucher.Unavailable(err, "lock token")
	}
	token := hex.EncodeToString(b[:])
	k := keysFor(g.cfg.KeyPrefix, code)
	cctx, cancel := g.withTimeout(ctx)
	defer cancel()
	err = client.Do(cctx, client.B().Set().Key(k.lock).Value(token).Nx().PxMilliseconds(ttl.Milliseconds()).Build()).Error()
	if rueidis.IsRedisNil(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, interpretError(err, "lock", code)
	}
	var once sync.Once
	unlock := func() {
		once.Do(func() {
			// The caller's context may be done by now; unlocking is still
			// worth a try, and the lock expires anyway if it fails.
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.Timeout)
			defer cancel()
			_ = unlockScript.Exec(uctx, client, []string{k.lock}, []string{token}).Error()
		})
	}
	return unlock, true, nil
}

// Ping checks that Redis answers.
func (g *Gate) Ping(ctx context.Context) error {
	client, err := g.conn()
	if err != nil {
		return interpretError(err, "ping", "")
	}
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	if err := client.Do(ctx, client.B().Ping().Build()).Error(); err != nil {
		return interpretError(err, "ping", "")
	}
	return nil
}

// withTimeout bounds one Redis call by Config.Timeout.
func (g *Gate) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, g.cfg.Timeout)
}

// withBulkTimeout bounds a call that moves many orders at once (Load in one
// script, the sold-out cache's copy): longer than one reservation.
func (g *Gate) withBulkTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(10*g.cfg.Timeout, bulkTimeout))
}

// expireAt is the unix-millisecond expiry of a voucher's keys: its end plus
// KeyGrace, and at least minKeyTTL from now.
func (g *Gate) expireAt(endsAt time.Time) int64 {
	at := endsAt.Add(g.cfg.KeyGrace)
	if floor := g.cfg.Clock().Add(minKeyTTL); at.Before(floor) {
		at = floor
	}
	return at.UnixMilli()
}

// interpretError turns every Redis or reply failure into the one domain
// error of this adapter: the gate is unavailable, and the caller falls back
// or answers 503. The cause is kept for logs and errors.Is (context
// deadlines included).
func interpretError(err error, op, code string) error {
	if code == "" {
		return voucher.Unavailable(err, "redis %s", op)
	}
	return voucher.Unavailable(err, "redis %s %s", op, code)
}

// campaignCodeOf is the campaign code redemption r of the voucher keyed
// under code was made with: its VoucherCode when that is not code (a
// campaign's redemption answers with its code), else "".
func campaignCodeOf(r voucher.Redemption, code string) string {
	if r.VoucherCode != "" && r.VoucherCode != code {
		return r.VoucherCode
	}
	return ""
}

// checkCampaignCode rejects a hold's campaign code that would break the
// hold encoding; "" (a voucher's hold) is fine.
func checkCampaignCode(code string) error {
	if code != "" && !voucher.ValidCode(code) {
		return voucher.Errorf(voucher.CodeInvalidRequest, "invalid campaign code %q", code)
	}
	return nil
}

// checkCode rejects codes that would break the key layout (braces, colons);
// the service validates codes before they get here.
func checkCode(code string) error {
	if !voucher.ValidCode(code) {
		return voucher.Errorf(voucher.CodeInvalidRequest, "invalid voucher code %q", code)
	}
	return nil
}

func checkOrderID(id string) error {
	if !voucher.ValidOrderID(id) {
		return voucher.Errorf(voucher.CodeInvalidRequest, "invalid orderId %q", id)
	}
	return nil
}

// heldSinceOf is the hold start a loaded hold of r records: r's HeldSince
// when its hold began before r was made (a replacement's), else none (the
// hold began at its reservation), so that plain holds keep their layout.
func heldSinceOf(r voucher.Redemption) time.Time {
	if r.HeldSince.IsZero() || unixMilli(r.HeldSince) >= unixMilli(r.CreatedAt) {
		return time.Time{}
	}
	return r.HeldSince
}
