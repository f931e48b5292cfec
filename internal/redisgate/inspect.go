package redisgate

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/voucherd/voucherd/internal/voucher"
)

// DefaultScanCount is the default of Config.ScanCount.
const DefaultScanCount = 500

// Inspect reads the state of a voucher for reconciliation (remaining against
// totalLimit - held in PostgreSQL, holds that never reached the database) and
// for tests, in chunks: remaining and the held count together in one step
// (counts.lua), then the users, orders and codes hashes with HSCAN, at most
// Config.ScanCount entries a call, so that Redis serves other clients
// between chunks. The hashes are not one snapshot: an entry present for the
// whole read is in the result (once, even when HSCAN returns it twice), one
// changed meanwhile with any value it had during the read, one added or
// removed meanwhile may be in it or not (docs/rules.md, "Reconciliation reads
// in chunks").
func (g *Gate) Inspect(ctx context.Context, code string) (voucher.GateState, error) {
	if err := checkCode(code); err != nil {
		return voucher.GateState{}, err
	}
	client, err := g.conn()
	if err != nil {
		return voucher.GateState{}, interpretError(err, "inspect", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	loaded, remaining, held, err := g.counts(ctx, client, k)
	if err != nil || !loaded {
		return voucher.GateState{}, interpretError0(err, "inspect", code)
	}
	st := voucher.GateState{Loaded: true, Remaining: remaining, HeldCount: held, HeldCounted: held >= 0,
		Users: map[string]int32{}, Orders: map[string]voucher.Hold{}, Codes: map[string]string{}}
	err = g.scanHash(ctx, client, k.users, func(cust, n string) error {
		c, err := strconv.ParseInt(n, 10, 32)
		st.Users[cust] = int32(c)
		return err
	})
	if err == nil {
		err = g.scanHash(ctx, client, k.orders, func(id, v string) error {
			h, err := decodeHold(id, v)
			st.Orders[id] = h
			return err
		})
	}
	if err == nil {
		err = g.scanHash(ctx, client, k.codes, func(c, id string) error {
			st.Codes[c] = id
			return nil
		})
	}
	if err == nil {
		var lc voucher.GateLimitCounts
		lc, err = g.limitCounts(ctx, client, k)
		st.BudgetAmount, st.BudgetHeld, st.Windows = lc.BudgetAmount, lc.BudgetHeld, lc.Windows
	}
	if err != nil {
		return voucher.GateState{}, interpretError(err, "inspect", code)
	}
	return st, nil
}

// limitCounts reads the budget's counter (HMGET) and the occurrences'
// counters (the budget hash's w: fields, with HSCAN).
func (g *Gate) limitCounts(ctx context.Context, client rueidis.Client, k keys) (voucher.GateLimitCounts, error) {
	var lc voucher.GateLimitCounts
	var err error
	if lc.BudgetAmount, lc.BudgetHeld, err = g.budgetCounter(ctx, client, k); err != nil {
		return lc, err
	}
	err = g.scanHash(ctx, client, k.budget, func(field, n string) error {
		w, ok := strings.CutPrefix(field, "w:")
		if !ok {
			return nil
		}
		ms, err := strconv.ParseInt(w, 10, 64)
		if err != nil {
			return err
		}
		c, err := strconv.ParseInt(n, 10, 64)
		if lc.Windows == nil {
			lc.Windows = map[time.Time]int64{}
		}
		lc.Windows[time.UnixMilli(ms).UTC()] = c
		return err
	})
	return lc, err
}

// LimitCounts reads the voucher's budget counter and the counters of the
// occurrences of its windows (one HMGET, then the budget hash with HSCAN).
func (g *Gate) LimitCounts(ctx context.Context, code string) (voucher.GateLimitCounts, error) {
	if err := checkCode(code); err != nil {
		return voucher.GateLimitCounts{}, err
	}
	client, err := g.conn()
	if err != nil {
		return voucher.GateLimitCounts{}, interpretError(err, "limit counts", code)
	}
	lc, err := g.limitCounts(ctx, client, keysFor(g.cfg.KeyPrefix, code))
	if err != nil {
		return voucher.GateLimitCounts{}, interpretError(err, "limit counts", code)
	}
	return lc, nil
}

// ScanOrders reads one chunk of the voucher's orders hash (one HSCAN of
// Config.ScanCount) from cursor and returns its holds, in any state, and
// the next cursor (0: the walk is over).
func (g *Gate) ScanOrders(ctx context.Context, code string, cursor uint64) ([]voucher.Hold, uint64, error) {
	if err := checkCode(code); err != nil {
		return nil, 0, err
	}
	client, err := g.conn()
	if err != nil {
		return nil, 0, interpretError(err, "scan orders", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	cctx, cancel := g.withTimeout(ctx)
	e, err := client.Do(cctx, client.B().Hscan().Key(k.orders).Cursor(cursor).Count(int64(g.cfg.ScanCount)).Build()).AsScanEntry()
	cancel()
	if err != nil {
		return nil, 0, interpretError(err, "scan orders", code)
	}
	holds := make([]voucher.Hold, 0, len(e.Elements)/2)
	for i := 0; i+1 < len(e.Elements); i += 2 {
		h, err := decodeHold(e.Elements[i], e.Elements[i+1])
		if err != nil {
			return nil, 0, interpretError(err, "scan orders", code)
		}
		holds = append(holds, h)
	}
	return holds, e.Cursor, nil
}

// Known reports what the gate records for each of orderIDs now: unknown,
// holding a use, or released (one HMGET of the orders hash; a voucher not
// loaded has none).
func (g *Gate) Known(ctx context.Context, code string, orderIDs []string) ([]voucher.GateOrderState, error) {
	if err := checkCode(code); err != nil {
		return nil, err
	}
	known := make([]voucher.GateOrderState, len(orderIDs))
	if len(orderIDs) == 0 {
		return known, nil
	}
	client, err := g.conn()
	if err != nil {
		return nil, interpretError(err, "known", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	cctx, cancel := g.withTimeout(ctx)
	defer cancel()
	v, err := client.Do(cctx, client.B().Hmget().Key(k.orders).Field(orderIDs...).Build()).ToArray()
	if err == nil && len(v) != len(orderIDs) {
		err = errBadReply
	}
	if err != nil {
		return nil, interpretError(err, "known", code)
	}
	for i, m := range v {
		if m.IsNil() {
			continue
		}
		s, err := m.ToString()
		if err != nil || s == "" {
			return nil, interpretError(errBadReply, "known", code)
		}
		known[i] = voucher.GateOrderHolding
		if s[0] == stateReleased {
			known[i] = voucher.GateOrderReleased
		}
	}
	return known, nil
}

// interpretError0 is interpretError, nil for a nil err.
func interpretError0(err error, op, code string) error {
	if err == nil {
		return nil
	}
	return interpretError(err, op, code)
}

// counts reads whether code is loaded, its remaining uses, its held count
// and its version in one step; held is -1 while the gate has no exact
// count.
func (g *Gate) counts(ctx context.Context, client rueidis.Client, k keys) (loaded bool, remaining, held int64, err error) {
	c, err := g.countsOf(ctx, client, k)
	return c.Loaded, c.Remaining, c.HeldCount, err
}

// countsOf is counts as a voucher.GateCounts (HeldCount -1 while
// uncounted).
func (g *Gate) countsOf(ctx context.Context, client rueidis.Client, k keys) (voucher.GateCounts, error) {
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	res, err := countsScript.Exec(ctx, client, []string{k.remaining, k.held, k.heldScan, k.version}, nil).AsIntSlice()
	if err == nil && len(res) != 4 {
		err = errBadReply
	}
	if err != nil {
		return voucher.GateCounts{}, err
	}
	return voucher.GateCounts{Loaded: res[0] == 1, Remaining: res[1], HeldCount: res[2], HeldCounted: res[0] == 1 && res[2] >= 0,
		Version: res[3]}, nil
}

// Counts reads a voucher's remaining uses, held count and version in one
// step (counts.lua, O(1)).
func (g *Gate) Counts(ctx context.Context, code string) (voucher.GateCounts, error) {
	if err := checkCode(code); err != nil {
		return voucher.GateCounts{}, err
	}
	client, err := g.conn()
	if err != nil {
		return voucher.GateCounts{}, interpretError(err, "counts", code)
	}
	c, err := g.countsOf(ctx, client, keysFor(g.cfg.KeyPrefix, code))
	if err != nil {
		return voucher.GateCounts{}, interpretError(err, "counts", code)
	}
	return c, nil
}

// scanHash calls fn for each field and value of the hash at key, read with
// HSCAN, Config.ScanCount entries a call, each call under Config.Timeout.
// A field HSCAN returns twice is passed twice, the later value last.
func (g *Gate) scanHash(ctx context.Context, client rueidis.Client, key string, fn func(field, value string) error) error {
	var cursor uint64
	for {
		cctx, cancel := g.withTimeout(ctx)
		e, err := client.Do(cctx, client.B().Hscan().Key(key).Cursor(cursor).Count(int64(g.cfg.ScanCount)).Build()).AsScanEntry()
		cancel()
		if err != nil {
			return err
		}
		for i := 0; i+1 < len(e.Elements); i += 2 {
			if err := fn(e.Elements[i], e.Elements[i+1]); err != nil {
				return err
			}
		}
		if e.Cursor == 0 {
			return nil
		}
		cursor = e.Cursor
	}
}

// errBadReply is returned for a script reply of an unexpected shape.
var errBadReply = errors.New("redisgate: malformed script reply")

// Adopt records a hold the database has and the gate lost (reconciliation):
// it takes a use for hold.OrderID, even below zero remaining, only if the
// orderId is unknown to the gate and the voucher is loaded. It reports
// whether it changed anything. The hold is stored as held (durable), or
// confirmed when hold.Confirmed (a CONFIRMED row); a
// campaign's hold (hold.Code set) takes its code, whichever order the gate
// had it held by (the database holds each code once). An adoption clears
// the sold-out cache of code in this process, whose copy of the orders lacks
// the hold.
func (g *Gate) Adopt(ctx context.Context, code string, hold voucher.Hold) (bool, error) {
	return g.adopt(ctx, code, hold, "")
}

// AdoptReleased records a confirmed hold the database has and the gate
// marks released (reconciliation, Kafka mode), as Adopt does an unknown
// one: only while the orderId is still marked released.
func (g *Gate) AdoptReleased(ctx context.Context, code string, hold voucher.Hold) (bool, error) {
	return g.adopt(ctx, code, hold, "released")
}

// adopt runs adopt.lua; over is its ARGV[5].
func (g *Gate) adopt(ctx context.Context, code string, hold voucher.Hold, over string) (bool, error) {
	if err := checkCode(code); err != nil {
		return false, err
	}
	if err := checkOrderID(hold.OrderID); err != nil {
		return false, err
	}
	if err := checkCampaignCode(hold.Code); err != nil {
		return false, err
	}
	client, err := g.conn()
	if err != nil {
		return false, interpretError(err, "adopt", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	n, err := adoptScript.Exec(ctx, client, k.budgeted(), []string{
		hold.OrderID, hold.CustomerID, encodeHold(heldState(hold), hold), hold.Code, over,
	}).AsInt64()
	if err != nil {
		return false, interpretError(err, "adopt", code)
	}
	if n == 1 {
		g.soldOut.clear(code)
	}
	return n == 1, nil
}

// Clamp lowers remaining to totalLimit minus the holds (held and pending) the
// gate records, if it is above, and returns remaining before and after. It
// never raises it. A voucher that is not loaded returns 0, 0. It reads the
// held count, not the orders (clamp.lua); a voucher without an exact count
// (loaded before the count existed) is counted first, in chunks (countHeld).
func (g *Gate) Clamp(ctx context.Context, code string, totalLimit int32) (before, after int64, err error) {
	if err := checkCode(code); err != nil {
		return 0, 0, err
	}
	client, err := g.conn()
	if err != nil {
		return 0, 0, interpretError(err, "clamp", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	for range clampTries {
		cctx, cancel := g.withTimeout(ctx)
		res, err := clampScript.Exec(cctx, client, []string{k.remaining, k.held, k.heldScan},
			[]string{strconv.FormatInt(int64(totalLimit), 10)}).AsIntSlice()
		cancel()
		if err == nil && len(res) != 3 {
			err = errBadReply
		}
		if err != nil {
			return 0, 0, interpretError(err, "clamp", code)
		}
		if res[0] != clampUncounted {
			return res[1], res[2], nil
		}
		if err := g.countHeld(ctx, client, k); err != nil {
			return 0, 0, interpretError(err, "clamp", code)
		}
	}
	return 0, 0, interpretError(errUncounted, "clamp", code)
}

// clampUncounted is clamp.lua's status for a voucher without an exact held
// count; clampTries bounds how often Clamp counts and tries again (the count
// is lost again only if its key is).
const (
	clampUncounted = 2
	clampTries     = 3
)

// errUncounted is returned when the held count could not be made exact.
var errUncounted = errors.New("redisgate: held count not counted")

// countHeld makes the held count of the voucher at k exact, counting its
// orders in chunks of Config.ScanCount with heldinit.lua if it has none. It
// returns once a count is exact or the voucher is not loaded.
func (g *Gate) countHeld(ctx context.Context, client rueidis.Client, k keys) error {
	cursor := "0"
	count := strconv.Itoa(g.cfg.ScanCount)
	for {
		cctx, cancel := g.withTimeout(ctx)
		res, err := heldInitScript.Exec(cctx, client, []string{k.remaining, k.orders, k.held, k.heldScan},
			[]string{cursor, count}).ToArray()
		cancel()
		if err == nil && len(res) != 2 {
			err = errBadReply
		}
		if err != nil {
			return err
		}
		status, err := res[0].AsInt64()
		if err != nil {
			return err
		}
		if status != 2 {
			return nil
		}
		if cursor, err = res[1].ToString(); err != nil {
			return err
		}
	}
}

// Forget deletes the keys of a voucher (its state and its warm-up lock, not
// its version counter, which expires on its own) and its sold-out cache entry
// in this process: the next reservation finds it not loaded. For operations
// and tests; holds in Redis that never reached the database are lost with it.
func (g *Gate) Forget(ctx context.Context, code string) error {
	if err := checkCode(code); err != nil {
		return err
	}
	client, err := g.conn()
	if err != nil {
		return interpretError(err, "forget", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	// UNLINK: a sale's hashes are freed in the background, not in this call.
	err = client.Do(ctx, client.B().Unlink().Key(append(append(k.all(), k.counts()...), k.staging()...)...).Build()).Error()
	g.soldOut.clear(code)
	if err != nil {
		return interpretError(err, "forget", code)
	}
	return nil
}
