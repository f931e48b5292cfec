package redisgate

import (
	"context"
	"strconv"
	"time"
)

// extendScript rewrites a hold's expiry after a hold extension.
var extendScript = newScript("extend.lua", false)

// Extend sets the expiry recorded in orderID's hold to expiresAt if it is
// later and the orderId holds a use (held or pending), and reports whether
// it changed it: a replay answered from the gate then says what the
// database says. A released orderId is left as it is.
func (g *Gate) Extend(ctx context.Context, code, orderID string, expiresAt time.Time) (bool, error) {
	if err := checkCode(code); err != nil {
		return false, err
	}
	if err := checkOrderID(orderID); err != nil {
		return false, err
	}
	client, err := g.conn()
	if err != nil {
		return false, interpretError(err, "extend", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	n, err := extendScript.Exec(ctx, client, []string{k.orders, k.version},
		[]string{orderID, strconv.FormatInt(unixMilli(expiresAt), 10)}).AsInt64()
	if err != nil {
		return false, interpretError(err, "extend", code)
	}
	if n == 1 {
		// A sold-out copy of the orders answers replays; drop it rather
		// than let it answer the old expiry until its TTL.
		g.soldOut.clear(code)
	}
	return n == 1, nil
}
