package redisgate

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Inspect reads the state of a voucher for reconciliation (remaining against
// totalLimit - held in PostgreSQL, holds that never reached the database) and
// for tests, in one script. It reads every order of the voucher, and Redis
// serves nothing else meanwhile: call it for one voucher at a time, never on
// the hot path.
func (g *Gate) Inspect(ctx context.Context, code string) (voucher.GateState, error) {
	if err := checkCode(code); err != nil {
		return voucher.GateState{}, err
	}
	client, err := g.conn()
	if err != nil {
		return voucher.GateState{}, interpretError(err, "inspect", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withBulkTimeout(ctx)
	defer cancel()
	res, err := inspectScript.Exec(ctx, client, []string{k.remaining, k.users, k.orders, k.codes}, nil).ToArray()
	if err != nil {
		return voucher.GateState{}, interpretError(err, "inspect", code)
	}
	st, err := decodeState(res)
	if err != nil {
		return voucher.GateState{}, interpretError(err, "inspect", code)
	}
	return st, nil
}

// errBadReply is returned for a script reply of an unexpected shape.
var errBadReply = errors.New("redisgate: malformed script reply")

// decodeState parses the reply of inspect.lua.
func decodeState(res []rueidis.RedisMessage) (voucher.GateState, error) {
	if len(res) == 0 {
		return voucher.GateState{}, errBadReply
	}
	loaded, err := res[0].AsInt64()
	if err != nil {
		return voucher.GateState{}, err
	}
	if loaded == 0 {
		return voucher.GateState{}, nil
	}
	if len(res) != 5 {
		return voucher.GateState{}, errBadReply
	}
	st := voucher.GateState{Loaded: true}
	if st.Remaining, err = res[1].AsInt64(); err != nil {
		return voucher.GateState{}, err
	}
	users, err := res[2].AsStrSlice()
	if err != nil {
		return voucher.GateState{}, err
	}
	st.Users = make(map[string]int32, len(users)/2)
	for i := 0; i+1 < len(users); i += 2 {
		cust := users[i]
		n, err := strconv.ParseInt(users[i+1], 10, 32)
		if err != nil {
			return voucher.GateState{}, err
		}
		st.Users[cust] = int32(n)
	}
	orders, err := res[3].AsStrSlice()
	if err != nil {
		return voucher.GateState{}, err
	}
	st.Orders = make(map[string]voucher.Hold, len(orders)/2)
	for i := 0; i+1 < len(orders); i += 2 {
		h, err := decodeHold(orders[i], orders[i+1])
		if err != nil {
			return voucher.GateState{}, err
		}
		st.Orders[orders[i]] = h
	}
	codes, err := res[4].AsStrSlice()
	if err != nil {
		return voucher.GateState{}, err
	}
	st.Codes = make(map[string]string, len(codes)/2)
	for i := 0; i+1 < len(codes); i += 2 {
		st.Codes[codes[i]] = codes[i+1]
	}
	return st, nil
}

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
	n, err := adoptScript.Exec(ctx, client, k.script(), []string{
		hold.OrderID, hold.CustomerID, encodeHold(heldState(hold), hold), hold.Code,
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
// never raises it. A voucher that is not loaded returns 0, 0.
func (g *Gate) Clamp(ctx context.Context, code string, totalLimit int32) (before, after int64, err error) {
	if err := checkCode(code); err != nil {
		return 0, 0, err
	}
	client, err := g.conn()
	if err != nil {
		return 0, 0, interpretError(err, "clamp", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withBulkTimeout(ctx)
	defer cancel()
	res, err := clampScript.Exec(ctx, client, []string{k.remaining, k.orders},
		[]string{strconv.FormatInt(int64(totalLimit), 10)}).AsIntSlice()
	if err == nil && len(res) != 3 {
		err = errBadReply
	}
	if err != nil {
		return 0, 0, interpretError(err, "clamp", code)
	}
	return res[1], res[2], nil
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
	err = client.Do(ctx, client.B().Del().Key(k.all()...).Build()).Error()
	g.soldOut.clear(code)
	if err != nil {
		return interpretError(err, "forget", code)
	}
	return nil
}
