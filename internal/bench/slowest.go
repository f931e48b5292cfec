package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SlowestKept is how many of a run's slowest requests its report lists
// (Report.Slowest).
const SlowestKept = 5

// SlowRequest is one of a run's slowest requests: when it was sent,
// measured from the run's start (Report.StartedAt), how long it took, and
// what it got, so that a latency outlier can be set beside what else ran at
// that moment (reconciliation passes, the servers' logs).
type SlowRequest struct {
	// StartMs is the request's send time (its scheduled time in an open
	// loop) in milliseconds after Report.StartedAt.
	StartMs float64 `json:"startMs"`
	// LatencyMs is the request's latency, as the histogram counts it.
	LatencyMs float64 `json:"latencyMs"`
	// Status is the HTTP status; 0 when the request got no answer.
	Status int `json:"status"`
	// Error is the answer's error code, or why there was no answer; empty
	// for a 2xx.
	Error string `json:"error,omitempty"`
	// OrderID is the orderId the request reserved ("" for the no-op route).
	OrderID string `json:"orderId,omitempty"`
	// Kind is "new", "repeat" or "retry" (the workload's kind of request).
	Kind string `json:"kind,omitempty"`
}

// slowest keeps the n slowest requests offered, in no particular order. It
// is guarded by its workerStats' mutex.
type slowest struct {
	n    int
	kept []slowEntry
}

// slowEntry is a request offered to slowest; the report's form is built
// only for the kept ones.
type slowEntry struct {
	start   time.Time
	latency int64 // µs
	status  int
	code    string
	job     job
}

// offer keeps e when it is slower than the fastest request kept, or fewer
// than n are kept. It allocates only when it keeps e's error code.
func (s *slowest) offer(e slowEntry, code []byte) {
	if s.n <= 0 {
		return
	}
	if len(s.kept) < s.n {
		if code != nil {
			e.code = string(code)
		}
		s.kept = append(s.kept, e)
		return
	}
	i := 0
	for j := range s.kept {
		if s.kept[j].latency < s.kept[i].latency {
			i = j
		}
	}
	if e.latency <= s.kept[i].latency {
		return
	}
	if code != nil {
		e.code = string(code)
	}
	s.kept[i] = e
}

// slowestOf merges the kept requests of every worker group and returns the
// n slowest, slowest first, described against the run's start.
func (r *runner) slowestOf(stats []*workerStats, n int) []SlowRequest {
	var all []slowEntry
	for _, ws := range stats {
		all = append(all, ws.slow.kept...)
	}
	slices.SortStableFunc(all, func(a, b slowEntry) int {
		switch {
		case a.latency > b.latency:
			return -1
		case a.latency < b.latency:
			return 1
		}
		return a.start.Compare(b.start)
	})
	all = all[:min(len(all), n)]
	out := make([]SlowRequest, len(all))
	for i, e := range all {
		out[i] = SlowRequest{
			StartMs:   float64(e.start.Sub(r.start).Microseconds()) / 1000,
			LatencyMs: float64(e.latency) / 1000,
			Status:    e.status,
			Error:     e.code,
			Kind:      e.job.kind.String(),
		}
		if r.cfg.Target == RouteReserve {
			out[i].OrderID = r.prefix + "-" + strconv.FormatInt(e.job.order.seq, 10)
		}
	}
	return out
}

// String names the kind as the report does.
func (k jobKind) String() string {
	switch k {
	case kindNew:
		return "new"
	case kindRepeat:
		return "repeat"
	case kindRetry:
		return "retry"
	}
	return "kind" + strconv.Itoa(int(k))
}

// slowestText is the report table's line of the slowest requests.
func slowestText(reqs []SlowRequest) string {
	parts := make([]string, len(reqs))
	for i, s := range reqs {
		what := strconv.Itoa(s.Status)
		if s.Error != "" {
			what += " " + s.Error
		}
		parts[i] = fmt.Sprintf("%s at +%.3fs (%s, %s)", fmtMs(s.LatencyMs), s.StartMs/1000, what, s.OrderID)
	}
	return strings.Join(parts, "; ")
}
