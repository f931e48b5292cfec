package redisgate

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Status of replace.lua beyond those it shares with reserve.lua.
const replaceNotHeld = 8

// Validate answers what Reserve would decide for orderID ("" leaves the
// orderId checks out), customerID and campaignCode ("" for a voucher) with
// validate.lua, which writes nothing. While the voucher is in the sold-out
// cache the copy answers, as it does for Reserve. q.Budget fits
// q.Discount to the money budget as Reserve fits a hold's
// (GateBudgetExceeded with BudgetLeft, or GateTaken with Discount clipped),
// q.WindowLimit > 0 checks the count of occurrence q.Window
// (GateWindowFull).
func (g *Gate) Validate(ctx context.Context, code string, perUserLimit int32, orderID, customerID, campaignCode string, q voucher.TakeLimits) (voucher.GateDecision, error) {
	if err := checkCode(code); err != nil {
		return voucher.GateDecision{}, err
	}
	if orderID != "" {
		if err := checkOrderID(orderID); err != nil {
			return voucher.GateDecision{}, err
		}
	}
	if err := checkCampaignCode(campaignCode); err != nil {
		return voucher.GateDecision{}, err
	}
	if perUserLimit <= 0 {
		return voucher.GateDecision{}, voucher.Errorf(voucher.CodeInvalidRequest, "perUserLimit must be > 0")
	}
	if e := g.soldOut.get(code); e != nil && orderID != "" {
		if d, ok := e.decide(orderID, customerID, campaignCode, false); ok {
			return d, nil
		}
	} else if e != nil {
		return e.decideUnknown(campaignCode), nil
	}
	client, err := g.conn()
	if err != nil {
		return voucher.GateDecision{}, interpretError(err, "validate", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	res, err := validateScript.Exec(ctx, client, []string{k.remaining, k.users, k.orders, k.codes, k.budget},
		[]string{orderID, customerID, strconv.FormatInt(int64(perUserLimit), 10), campaignCode,
			windowLimitArg(q.WindowLimit), windowArg(q.Window), budgetMode(q.Budget), strconv.FormatInt(q.Discount, 10)}).ToArray()
	if err != nil {
		return voucher.GateDecision{}, interpretError(err, "validate", code)
	}
	status, remaining, third, err := reserveReply(res)
	if err != nil {
		return voucher.GateDecision{}, interpretError(err, "validate", code)
	}
	d := voucher.GateDecision{Remaining: max(remaining, 0)}
	switch status {
	case reserveTaken:
		d.Outcome = voucher.GateTaken
		if d.Discount, err = clippedDiscount(res); err != nil {
			return voucher.GateDecision{}, interpretError(err, "validate", code)
		}
	case reserveBudget:
		d.Outcome = voucher.GateBudgetExceeded
		if d.BudgetLeft, err = strconv.ParseInt(third, 10, 64); err != nil {
			return voucher.GateDecision{}, interpretError(err, "validate", code)
		}
	case reserveReplay, reserveConflict, reserveReleased:
		d.Outcome = knownOrderOutcome(status)
		if d.Hold, err = decodeHold(orderID, third); err != nil {
			return voucher.GateDecision{}, interpretError(err, "validate", code)
		}
	case reserveNotLoaded:
		d.Outcome = voucher.GateNotLoaded
	case reserveQuotaHeld:
		d.Outcome = voucher.GateQuotaHeld
	case reserveSoldOut:
		d.Outcome = voucher.GateSoldOut
	case reserveCodeUsed:
		d.Outcome = voucher.GateCodeUsed
	case reserveWindowFull:
		d.Outcome = voucher.GateWindowFull
	default:
		return voucher.GateDecision{}, interpretError(fmt.Errorf("unknown validate status %d", status), "validate", code)
	}
	return d, nil
}

// Replace takes the use of replaces, hold.CustomerID's held hold, for
// hold.OrderID with replace.lua: one atomic step in which the counts do not
// move. hold.Pending stores the new hold as pending (Kafka mode). A
// campaign's hold (hold.Code set) takes its own code, GateCodeUsed when an
// order other than replaces holds it, and frees the replaced order's code;
// a pending hold leaves that code with the replaced order until Commit, or
// until the new hold is released (marked) or the replacement undone. It
// never answers from the sold-out cache, and clears it when it replaced.
func (g *Gate) Replace(ctx context.Context, code string, hold voucher.Hold, replaces string) (voucher.GateDecision, error) {
	if err := checkCode(code); err != nil {
		return voucher.GateDecision{}, err
	}
	if err := checkOrderID(hold.OrderID); err != nil {
		return voucher.GateDecision{}, err
	}
	if err := checkOrderID(replaces); err != nil {
		return voucher.GateDecision{}, err
	}
	if err := checkCampaignCode(hold.Code); err != nil {
		return voucher.GateDecision{}, err
	}
	client, err := g.conn()
	if err != nil {
		return voucher.GateDecision{}, interpretError(err, "replace", code)
	}
	state := byte(stateHeld)
	if hold.Pending {
		state = statePending
	}
	// The hold keeps the order it replaced (encodeHold).
	hold.Replaces = replaces
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	res, err := replaceScript.Exec(ctx, client, k.takeBudgeted(),
		[]string{hold.OrderID, hold.CustomerID, encodeHold(state, hold), replaces, hold.Code, attemptToken(hold),
			budgetMode(hold.Budget), windowLimitArg(hold.WindowLimit)}).ToArray()
	if err != nil {
		return voucher.GateDecision{}, interpretTakeError(err, "replace", code)
	}
	status, remaining, third, err := reserveReply(res)
	if err != nil {
		return voucher.GateDecision{}, interpretError(err, "replace", code)
	}
	d := voucher.GateDecision{Remaining: max(remaining, 0)}
	switch status {
	case reserveTaken:
		d.Outcome = voucher.GateTaken
		if d.Discount, err = clippedDiscount(res); err != nil {
			return voucher.GateDecision{}, interpretError(err, "replace", code)
		}
		g.soldOut.clear(code)
	case reserveReplay, reserveConflict, reserveReleased:
		d.Outcome = knownOrderOutcome(status)
		if d.Hold, err = decodeHold(hold.OrderID, third); err != nil {
			return voucher.GateDecision{}, interpretError(err, "replace", code)
		}
	case reserveNotLoaded:
		d.Outcome = voucher.GateNotLoaded
	case replaceNotHeld:
		d.Outcome = voucher.GateNotHeld
	case reserveCodeUsed:
		d.Outcome = voucher.GateCodeUsed
	case reserveVoided:
		return voucher.GateDecision{}, errVoidedAttempt("replace", code)
	case reserveBudget:
		d.Outcome = voucher.GateBudgetExceeded
		if d.BudgetLeft, err = strconv.ParseInt(third, 10, 64); err != nil {
			return voucher.GateDecision{}, interpretError(err, "replace", code)
		}
	case reserveWindowFull:
		d.Outcome = voucher.GateWindowFull
	default:
		return voucher.GateDecision{}, interpretError(fmt.Errorf("unknown replace status %d", status), "replace", code)
	}
	return d, nil
}

// Unreplace undoes a Replace of replaces by orderID with unreplace.lua and
// reports whether it did.
func (g *Gate) Unreplace(ctx context.Context, code, orderID, replaces string) (bool, error) {
	if err := checkCode(code); err != nil {
		return false, err
	}
	client, err := g.conn()
	if err != nil {
		return false, interpretError(err, "unreplace", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	n, err := unreplaceScript.Exec(ctx, client, k.budgeted(),
		[]string{orderID, replaces}).AsInt64()
	if err != nil {
		return false, interpretError(err, "unreplace", code)
	}
	if n == 1 {
		g.soldOut.clear(code)
	}
	return n == 1, nil
}

// FreedFrom returns the order a replacement's commit last freed
// campaignCode from on the campaign budget keyed under code (commit.lua),
// "" when none did since the budget was loaded.
func (g *Gate) FreedFrom(ctx context.Context, code, campaignCode string) (string, error) {
	if err := checkCode(code); err != nil {
		return "", err
	}
	if err := checkCampaignCode(campaignCode); err != nil {
		return "", err
	}
	client, err := g.conn()
	if err != nil {
		return "", interpretError(err, "freed", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	orderID, err := client.Do(ctx, client.B().Hget().Key(k.freed).Field(campaignCode).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", nil
	}
	if err != nil {
		return "", interpretError(err, "freed", code)
	}
	return orderID, nil
}
