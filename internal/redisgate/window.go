package redisgate

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// windowLimitArg is a voucher's quota per occurrence as the take scripts
// take it: ” for none.
func windowLimitArg(limit int32) string {
	if limit <= 0 {
		return ""
	}
	return strconv.FormatInt(int64(limit), 10)
}

// windowArg is an occurrence's start as the hold field windowMs and the
// scripts' arguments have it: unix milliseconds, ” for none.
func windowArg(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// snapshotWindows is the occurrences' counts of a snapshot as load.lua and
// loadstep.lua take them: a JSON object windowMs -> count over the held
// redemptions that name an occurrence, "" for none.
func snapshotWindows(s voucher.Snapshot) string {
	counts := map[int64]int{}
	for _, r := range s.Orders {
		if r.Status.Held() && !r.Window.IsZero() {
			counts[r.Window.UnixMilli()]++
		}
	}
	if len(counts) == 0 {
		return ""
	}
	keys := make([]int64, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, `"`+strconv.FormatInt(k, 10)+`":`+strconv.Itoa(counts[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// RaiseCounters raises the gate's money budget counter to budgetHeld (< 0:
// leave it) and each occurrence's counter to its count in windows, where
// they are below, with raise.lua; it never lowers one. It returns how many
// it raised; a voucher that is not loaded raises nothing.
func (g *Gate) RaiseCounters(ctx context.Context, code string, budgetHeld int64, windows map[time.Time]int64) (int, error) {
	if err := checkCode(code); err != nil {
		return 0, err
	}
	client, err := g.conn()
	if err != nil {
		return 0, interpretError(err, "raise", code)
	}
	args := make([]string, 1, 1+2*len(windows))
	if budgetHeld >= 0 {
		args[0] = strconv.FormatInt(budgetHeld, 10)
	}
	for w, n := range windows {
		args = append(args, windowArg(w), strconv.FormatInt(n, 10))
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	n, err := raiseScript.Exec(ctx, client, []string{k.remaining, k.budget}, args).AsInt64()
	if err != nil {
		return 0, interpretError(err, "raise", code)
	}
	if n > 0 {
		// A copy that refused from the lower counter is still right; one
		// that took from it is gone with the take. Drop it all the same.
		g.soldOut.clear(code)
	}
	return int(max(n, 0)), nil
}
