package redisgate

import (
	"context"
	"strconv"

	"github.com/voucherd/voucherd/internal/voucher"
)

// rediscountScript rewrites a hold's discount and the budget's held amount.
var rediscountScript = newScript("rediscount.lua", false)

// Rediscount sets the discount recorded in orderID's hold to discount if
// the orderId holds a use, moving the money budget's held amount by the
// difference in the same script, and reports whether it changed it. The
// use stays held throughout.
func (g *Gate) Rediscount(ctx context.Context, code, orderID string, discount int64) (bool, error) {
	if err := checkCode(code); err != nil {
		return false, err
	}
	if err := checkOrderID(orderID); err != nil {
		return false, err
	}
	if discount < 0 {
		return false, voucher.Errorf(voucher.CodeInvalidRequest, "discount must not be negative, got %d", discount)
	}
	client, err := g.conn()
	if err != nil {
		return false, interpretError(err, "rediscount", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	n, err := rediscountScript.Exec(ctx, client, []string{k.orders, k.version, k.budget},
		[]string{orderID, strconv.FormatInt(discount, 10)}).AsInt64()
	if err != nil {
		return false, interpretError(err, "rediscount", code)
	}
	if n == 1 {
		// A sold-out copy of the orders answers replays with the discount.
		g.soldOut.clear(code)
	}
	return n == 1, nil
}
