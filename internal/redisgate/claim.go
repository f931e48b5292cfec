package redisgate

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/voucherd/voucherd/internal/voucher"
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

// claimMode remembers that the gate's Redis refused the one-command claim
// (SET with both NX and GET needs Redis 7.0), so that claims go to
// claim.lua from then on. The two decide alike; the command spares Redis a
// script call on every Kafka-mode take.
type claimMode struct {
	scriptOnly atomic.Bool
}

// claim sets key to value until the given time unless the key exists, and
// returns the value that owns it then: value when this call set it, or the
// value found. One SET NX GET PXAT, or claim.lua on a Redis older than 7.0
// (whose syntax error the first call learns from; a SET that failed so set
// nothing).
func (g *Gate) claim(ctx context.Context, client rueidis.Client, key, value string, until time.Time) (string, error) {
	if !g.claims.scriptOnly.Load() {
		owner, err := client.Do(ctx, client.B().Set().Key(key).Value(value).Nx().Get().
			PxatMillisecondsTimestamp(until.UnixMilli()).Build()).ToString()
		switch {
		case err == nil:
			return owner, nil
		case rueidis.IsRedisNil(err):
			return value, nil
		case !isSyntaxError(err):
			return "", err
		}
		g.claims.scriptOnly.Store(true)
	}
	return claimScript.Exec(ctx, client, []string{key}, []string{value, strconv.FormatInt(until.UnixMilli(), 10)}).ToString()
}

// isSyntaxError reports whether Redis refused a command's arguments (a
// server that does not know an option or a combination of them).
func isSyntaxError(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && strings.Contains(re.Error(), "syntax error")
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
	owner, err := g.claim(ctx, client, g.orderKey(orderID), code, until)
	if err != nil {
		return "", interpretError(err, "claim", code)
	}
	if isStackClaim(owner) {
		return "", nil
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

// A stack's claim (voucher.StackRecord) is stored as stackClaimPrefix and
// the record's JSON: a code's claim is a bare code, which never starts
// with it, so claim.lua and unclaim.lua serve both unchanged.
const stackClaimPrefix = "stack:"

// isStackClaim reports whether a claim's value is a stack's record.
func isStackClaim(v string) bool { return strings.HasPrefix(v, stackClaimPrefix) }

// wireStackRecord is voucher.StackRecord in a claim.
type wireStackRecord struct {
	OrderID     string   `json:"o"`
	CustomerID  string   `json:"c"`
	OrderAmount int64    `json:"a"`
	Codes       []string `json:"s"`
	At          int64    `json:"t"`
	Replaces    string   `json:"r,omitempty"`
}

func encodeStackClaim(rec voucher.StackRecord) (string, error) {
	b, err := json.Marshal(wireStackRecord{OrderID: rec.OrderID, CustomerID: rec.CustomerID, OrderAmount: rec.OrderAmount,
		Codes: rec.Codes, At: rec.At.UnixMilli(), Replaces: rec.Replaces})
	if err != nil {
		return "", err
	}
	return stackClaimPrefix + string(b), nil
}

// decodeOwner turns a claim's value into its owner.
func decodeOwner(v string) (voucher.OrderOwner, error) {
	if !isStackClaim(v) {
		return voucher.OrderOwner{Code: v}, nil
	}
	var w wireStackRecord
	if err := json.Unmarshal([]byte(v[len(stackClaimPrefix):]), &w); err != nil {
		return voucher.OrderOwner{}, fmt.Errorf("redisgate: undecodable stack claim %q: %w", v, err)
	}
	return voucher.OrderOwner{Stack: &voucher.StackRecord{OrderID: w.OrderID, CustomerID: w.CustomerID, OrderAmount: w.OrderAmount,
		Codes: w.Codes, At: time.UnixMilli(w.At).UTC(), Replaces: w.Replaces}}, nil
}

// ClaimStack claims orderID for the stack rec until the given time and
// returns its owner (rec when the claim is ours), as ClaimOrder claims it:
// the key is the orderId's own, so it is one command on one slot.
func (g *Gate) ClaimStack(ctx context.Context, orderID string, rec voucher.StackRecord, until time.Time) (voucher.OrderOwner, error) {
	if err := checkOrderID(orderID); err != nil {
		return voucher.OrderOwner{}, err
	}
	v, err := encodeStackClaim(rec)
	if err != nil {
		return voucher.OrderOwner{}, err
	}
	client, err := g.conn()
	if err != nil {
		return voucher.OrderOwner{}, err
	}
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	owner, err := g.claim(ctx, client, g.orderKey(orderID), v, until)
	if err != nil {
		return voucher.OrderOwner{}, interpretError(err, "claim", orderID)
	}
	return decodeOwner(owner)
}

// UnclaimStack drops rec's claim on orderID, if it holds it (unclaim.lua
// compares the whole value).
func (g *Gate) UnclaimStack(ctx context.Context, orderID string, rec voucher.StackRecord) error {
	v, err := encodeStackClaim(rec)
	if err != nil {
		return err
	}
	client, err := g.conn()
	if err != nil {
		return err
	}
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	if err := unclaimScript.Exec(ctx, client, []string{g.orderKey(orderID)}, []string{v}).Error(); err != nil {
		return interpretError(err, "unclaim", orderID)
	}
	return nil
}

// OrderOwner reads what claims orderID: one GET of its claim key.
func (g *Gate) OrderOwner(ctx context.Context, orderID string) (voucher.OrderOwner, error) {
	if err := checkOrderID(orderID); err != nil {
		return voucher.OrderOwner{}, err
	}
	client, err := g.conn()
	if err != nil {
		return voucher.OrderOwner{}, err
	}
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	v, err := client.Do(ctx, client.B().Get().Key(g.orderKey(orderID)).Build()).ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return voucher.OrderOwner{}, nil
	case err != nil:
		return voucher.OrderOwner{}, interpretError(err, "claim", orderID)
	}
	return decodeOwner(v)
}
