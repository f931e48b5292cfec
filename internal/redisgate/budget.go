package redisgate

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/voucherd/voucherd/internal/voucher"
)

// budgetMode is a take's money budget as reserve.lua and replace.lua take
// it (ARGV[6]): "" none, "reject" or "clip".
func budgetMode(b voucher.Budget) string {
	switch {
	case b.Amount == 0:
		return ""
	case b.Clip:
		return "clip"
	}
	return "reject"
}

// snapshotBudget is the money budget of a snapshot as load.lua and
// loadstep.lua take it: its cap ("0" for none) and held, the discounts of
// the snapshot's held orders (what the gate's counter counts:
// lib/budget.lua), then the counts of its occurrences (snapshotWindows).
func snapshotBudget(s voucher.Snapshot) []string {
	var held int64
	for _, r := range s.Orders {
		if r.Status.Held() {
			held += r.DiscountAmount
		}
	}
	return []string{strconv.FormatInt(s.Voucher.Budget.Amount, 10), strconv.FormatInt(held, 10), snapshotWindows(s)}
}

// budgetSpent reports whether the HMGET cap, held reply of a budget hash
// shows nothing left; false for a voucher without a budget.
func budgetSpent(r rueidis.RedisResult) (bool, error) {
	v, err := r.ToArray()
	if err != nil || len(v) != 2 || v[0].IsNil() {
		return false, err
	}
	amount, err := v[0].AsInt64()
	if err != nil {
		return false, err
	}
	held, err := v[1].AsInt64()
	return amount-held <= 0, err
}

// clippedDiscount is the fourth element of a take's reply: the discount the
// budget clipped the hold to, 0 when the reply has none.
func clippedDiscount(res []rueidis.RedisMessage) (int64, error) {
	if len(res) < 4 {
		return 0, nil
	}
	s, err := res[3].ToString()
	if err != nil {
		return 0, err
	}
	d, err := strconv.ParseInt(s, 10, 64)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: clipped discount %q", errBadReply, s)
	}
	return d, nil
}

// budgetCounter reads the gate's money budget counter of k's voucher: its
// cap (0: none) and held.
func (g *Gate) budgetCounter(ctx context.Context, client rueidis.Client, k keys) (amount, held int64, err error) {
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	v, err := client.Do(ctx, client.B().Hmget().Key(k.budget).Field("cap", "held").Build()).ToArray()
	if err != nil || len(v) != 2 || v[0].IsNil() {
		return 0, 0, err
	}
	if amount, err = v[0].AsInt64(); err != nil {
		return 0, 0, err
	}
	held, err = v[1].AsInt64()
	return amount, held, err
}
