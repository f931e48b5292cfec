package redisgate

import (
	"context"
	"strconv"
	"time"
)

var (
	claimScript   = newScript("claim.lua", false)
	unclaimScript = newScript("unclaim.lua", false)
)

// orderKey is the claim key of an orderId; the orderId is its own hash tag,
// so claims spread over the cluster and never share a voucher's slot.
func (g *Gate) orderKey(orderID string) string {
	return g.cfg.KeyPrefix + "order:{" + orderID + "}"
}

// ClaimOrder claims orderID for code until the given time and returns the
// code that owns it: code itself when the claim is (or already was) ours.
func (g *Gate) ClaimOrder(ctx context.Context, orderID, code string, until time.Time) (string, error) {
	if err := checkCode(code); err != nil {
		return "", err
	}
	if err := checkOrderID(orderID); err != nil {
		return "", err
	}
	client, err := g.conn()
	if err != nil {
		return "", err
	}
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	owner, err := claimScript.Exec(ctx, client, []string{g.orderKey(orderID)},
		[]string{code, strconv.FormatInt(until.UnixMilli(), 10)}).ToString()
	if err != nil {
		return "", interpretError(err, "claim", code)
	}
	return owner, nil
}

// UnclaimOrder drops code's claim on orderID, if it holds it.
func (g *Gate) UnclaimOrder(ctx context.Context, orderID, code string) error {
	client, err := g.conn()
	if err != nil {
		return err
	}
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	if err := unclaimScript.Exec(ctx, client, []string{g.orderKey(orderID)}, []string{code}).Error(); err != nil {
		return interpretError(err, "unclaim", code)
	}
	return nil
}
