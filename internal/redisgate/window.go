package redisgate

import (
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
