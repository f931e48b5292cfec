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

// RestoreWindows gives each occurrence of windows whose counter the gate
// lost (absent) the count windows has for it, with restorewindows.lua; a counter
// present is left alone. It returns how many it put back; a voucher that is
// not loaded gets none.
func (g *Gate) RestoreWindows(ctx context.Context, code string, windows map[time.Time]int64) (int, error) {
	if err := checkCode(code); err != nil {
		return 0, err
	}
	client, err := g.conn()
	if err != nil {
		return 0, interpretError(err, "restore windows", code)
	}
	args := make([]string, 0, 2*len(windows))
	for w, n := range windows {
		args = append(args, windowArg(w), strconv.FormatInt(n, 10))
	}
	k := keysFor(g.cfg.KeyPrefix, code)
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	n, err := restoreWindowsScript.Exec(ctx, client, []string{k.remaining, k.budget}, args).AsInt64()
	if err != nil {
		return 0, interpretError(err, "restore windows", code)
	}
	return int(max(n, 0)), nil
}
