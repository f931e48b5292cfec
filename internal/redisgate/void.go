package redisgate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/voucherd/voucherd/internal/voucher"
)

// voidKeep is how long a voucher's voided attempts are kept after the last
// one: far longer than any script held back in a connection.
const voidKeep = 24 * time.Hour

// attemptToken names one reservation attempt of hold.OrderID: the
// millisecond of its ReservedAt, which each attempt sets from its own clock
// reading (lib/void.lua).
func attemptToken(hold voucher.Hold) string {
	return strconv.FormatInt(hold.ReservedAt.UnixMilli(), 10)
}

// Void settles the attempt hold names (its OrderID and ReservedAt) whose
// Reserve or Replace got no answer, in one step with void.lua: when the gate
// knows the orderId its stored hold is returned (found), whoever stored it;
// otherwise the attempt is recorded as voided, so that its script takes
// nothing should it still reach Redis, while another attempt of the orderId
// is unaffected.
func (g *Gate) Void(ctx context.Context, code string, hold voucher.Hold) (voucher.Hold, bool, error) {
	if err := checkCode(code); err != nil {
		return voucher.Hold{}, false, err
	}
	if err := checkOrderID(hold.OrderID); err != nil {
		return voucher.Hold{}, false, err
	}
	client, err := g.conn()
	if err != nil {
		return voucher.Hold{}, false, interpretError(err, "void", code)
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	s, err := voidScript.Exec(ctx, client, []string{k.remaining, k.orders, k.void},
		[]string{hold.OrderID, attemptToken(hold), strconv.FormatInt(voidKeep.Milliseconds(), 10)}).ToString()
	if rueidis.IsRedisNil(err) {
		return voucher.Hold{}, false, nil
	}
	if err != nil {
		return voucher.Hold{}, false, interpretError(err, "void", code)
	}
	h, err := decodeHold(hold.OrderID, s)
	if err != nil {
		return voucher.Hold{}, false, interpretError(err, "void", code)
	}
	return h, true, nil
}

// errVoidedAttempt answers a take whose attempt was voided (reserve.lua
// status 10): it took nothing. Only the voided attempt itself carries its
// token, and its caller had given up on it.
func errVoidedAttempt(op, code string) error {
	return voucher.Unavailable(nil, "redis %s %s: this attempt was voided after it got no answer", op, code)
}

// interpretTakeError is interpretError for a call that takes a use
// (Reserve, Replace): when the call may have reached Redis without its
// answer reaching us (unanswered), the error also wraps
// voucher.ErrGateUnanswered.
func interpretTakeError(err error, op, code string) error {
	if unanswered(err) {
		err = fmt.Errorf("%w: %w", voucher.ErrGateUnanswered, err)
	}
	return interpretError(err, op, code)
}

// unanswered reports whether a failed call may have run in Redis: every
// failure but an error reply from Redis and a connection that was never
// made (the command was not sent).
func unanswered(err error) bool {
	if _, ok := rueidis.IsRedisErr(err); ok {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	return !errors.Is(err, syscall.ECONNREFUSED)
}
