package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Report is the outcome of one run. Its JSON form is the machine-readable
// output of `voucherd bench --json`.
type Report struct {
	Name    string `json:"name,omitempty"`
	Target  Route  `json:"target"`
	BaseURL string `json:"baseUrl"`
	// BaseURLs lists the instances the traffic was spread over, when more
	// than one.
	BaseURLs  []string `json:"baseUrls,omitempty"`
	FlashSale bool     `json:"flashSale"`
	Vouchers  []string `json:"vouchers,omitempty"`
	// Campaign is the campaign id of a campaign run (Config.CampaignCodes),
	// with the number of its codes; Vouchers is then that id alone.
	Campaign      string `json:"campaign,omitempty"`
	CampaignCodes int    `json:"campaignCodes,omitempty"`
	// Stack is the number of codes each order presented (Config.Stack); 0
	// for one code per order. Reserved then counts orders, each holding a
	// use of Stack vouchers.
	Stack int `json:"stack,omitempty"`
	// Loop is "open" (fixed rate) or "closed" (back to back).
	Loop        string  `json:"loop"`
	TargetRate  float64 `json:"targetRate,omitempty"`
	Concurrency int     `json:"concurrency"`
	Seed        uint64  `json:"seed"`

	// Requests is the number of requests that completed (answered or failed).
	Requests int64 `json:"requests"`
	// NewOrders, Repeats and Retries split Requests by workload kind.
	NewOrders       int64   `json:"newOrders"`
	Repeats         int64   `json:"repeats"`
	Retries         int64   `json:"retries"`
	DurationSeconds float64 `json:"durationSeconds"`
	// Rate is the achieved rate: Requests / DurationSeconds.
	Rate float64 `json:"rate"`
	// Latency is over the requests after the warm-up: the WarmupRequests
	// of the first WarmupSeconds were left out (Config.Warmup).
	Latency        Latency `json:"latencyMs"`
	WarmupSeconds  float64 `json:"warmupSeconds,omitempty"`
	WarmupRequests int64   `json:"warmupRequests,omitempty"`
	// Status counts answers by HTTP status; 0 counts requests that got no
	// answer (see Errors for why).
	Status map[int]int64 `json:"status"`
	// Errors counts non-2xx answers by their error code, and requests without
	// an answer as TIMEOUT, CONNECTION or CANCELED.
	Errors map[string]int64 `json:"errors"`
	// Failures counts transport errors, 5xx and unexpected 4xx answers
	// (409 and 422 are expected business outcomes of a reservation).
	Failures int64 `json:"failures"`
	// Reserved is the number of distinct orderIds answered 201.
	Reserved int64 `json:"reserved"`
	// StoppedByMaxDuration is set when the MaxDuration safety bound ended the
	// run before its own end; Interrupted when the caller's context did.
	StoppedByMaxDuration bool `json:"stoppedByMaxDuration,omitempty"`
	Interrupted          bool `json:"interrupted,omitempty"`

	// CPU is the stack's CPU time per request, when Config.CPU was set;
	// CPUError says why it is missing.
	CPU      *CPUCost `json:"cpu,omitempty"`
	CPUError string   `json:"cpuError,omitempty"`

	// Verification is set when the run was verified.
	Verification *Verification `json:"verification,omitempty"`

	// StartedAt is when the run began sending: the origin of
	// Slowest's StartMs.
	StartedAt time.Time `json:"startedAt"`
	// Slowest lists the run's slowest requests (at most SlowestKept, of
	// those the latency figures count), slowest first.
	Slowest []SlowRequest `json:"slowest,omitempty"`

	// Histogram holds every latency in microseconds.
	Histogram *hdrhistogram.Histogram `json:"-"`

	prefix  string
	cfg     Config            // the run's configuration (customer ids)
	granted []map[int64]order // per voucher: orderId seq -> order answered 201
	unknown []map[int64]order // per voucher: orders without a definite answer
	// members maps, per voucher, a run of stacks' member orderIds to their
	// orders' seqs (rowSeq, built on first use).
	members []map[string]int64
}

// Latency percentiles in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// OK reports whether the run was verified without violations. A run of the
// no-op route has nothing to verify and is OK.
func (r *Report) OK() bool {
	if r.Target == RouteNoop {
		return true
	}
	return r.Verification != nil && len(r.Verification.Violations) == 0
}

// NotVerifiedReason says why a reservation run without a Verification was
// not verified: Run verifies only when given voucherd's PostgreSQL.
const NotVerifiedReason = "no database URL was given (voucherd bench --database-url), so the invariants were not read"

// Unverified reports whether this is a reservation run that was not
// verified: neither OK nor broken.
func (r *Report) Unverified() bool {
	return r.Target == RouteReserve && r.Verification == nil
}

// Violations returns the invariant violations found by verification.
func (r *Report) Violations() []string {
	if r.Verification == nil {
		return nil
	}
	return r.Verification.Violations
}

func (r *runner) report(stats []*workerStats, elapsed time.Duration) *Report {
	cfg := r.cfg
	rep := &Report{
		cfg:           cfg,
		Name:          cfg.Name,
		Target:        cfg.Target,
		BaseURL:       cfg.BaseURL,
		FlashSale:     cfg.FlashSale && cfg.Target == RouteReserve,
		Vouchers:      r.codes,
		Loop:          "closed",
		TargetRate:    cfg.Rate,
		Concurrency:   cfg.Concurrency,
		Seed:          cfg.Seed,
		Status:        map[int]int64{},
		Errors:        map[string]int64{},
		Failures:      r.failures.Load(),
		WarmupSeconds: cfg.Warmup.Seconds(),
		StartedAt:     r.start.UTC(),
		Slowest:       r.slowestOf(stats, SlowestKept),
		Histogram:     hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs),
		prefix:        r.prefix,
	}
	if cfg.Stack > 1 {
		rep.Stack = cfg.Stack
	}
	if len(cfg.BaseURLs) > 1 {
		rep.BaseURLs = cfg.BaseURLs
	}
	if cfg.Rate > 0 {
		rep.Loop = "open"
	}
	// A campaign run is checked as one voucher, its budget: every code's
	// orders count against it.
	byVoucher := func(o order) int32 { return o.voucher }
	if r.campaign != "" {
		rep.Vouchers, rep.Campaign, rep.CampaignCodes = []string{r.campaign}, r.campaign, len(r.codes)
		byVoucher = func(order) int32 { return 0 }
	}
	rep.granted = make([]map[int64]order, len(rep.Vouchers))
	rep.unknown = make([]map[int64]order, len(rep.Vouchers))
	for i := range rep.Vouchers {
		rep.granted[i] = map[int64]order{}
		rep.unknown[i] = map[int64]order{}
	}
	for _, ws := range stats {
		rep.Histogram.Merge(ws.hist)
		for k, v := range ws.status {
			if v > 0 {
				rep.Status[k] += v
			}
		}
		for k, v := range ws.errs {
			rep.Errors[k] += *v
		}
		rep.WarmupRequests += ws.warmup
		rep.NewOrders += ws.kinds[kindNew]
		rep.Repeats += ws.kinds[kindRepeat]
		rep.Retries += ws.kinds[kindRetry]
		// An order of several codes counts on each of its vouchers.
		for k := range max(cfg.Stack, 1) {
			for _, o := range ws.granted {
				rep.granted[stackVoucher(int(byVoucher(o)), k, len(rep.Vouchers))][o.seq] = o
			}
			for _, o := range ws.unknown {
				rep.unknown[stackVoucher(int(byVoucher(o)), k, len(rep.Vouchers))][o.seq] = o
			}
		}
	}
	for i := range rep.granted {
		rep.Reserved += int64(len(rep.granted[i]))
		// An order answered 201 on one attempt is known, whatever another
		// attempt of it got.
		for seq := range rep.granted[i] {
			delete(rep.unknown[i], seq)
		}
	}
	rep.Reserved /= int64(max(cfg.Stack, 1))
	rep.Requests = rep.Histogram.TotalCount() + rep.WarmupRequests
	rep.DurationSeconds = elapsed.Seconds()
	if rep.DurationSeconds > 0 {
		rep.Rate = float64(rep.Requests) / rep.DurationSeconds
	}
	rep.Latency = latencyOf(rep.Histogram)
	return rep
}

func latencyOf(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		P50:  ms(h.ValueAtQuantile(50)),
		P90:  ms(h.ValueAtQuantile(90)),
		P99:  ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)),
		Max:  ms(h.Max()),
		Mean: h.Mean() / 1000,
	}
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as a human-readable table.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(k, format string, args ...any) { _, _ = fmt.Fprintf(tw, k+"\t"+format+"\n", args...) }
	if r.Name != "" {
		p("run", "%s", r.Name)
	}
	what := string(r.Target)
	if r.Target == RouteReserve {
		mode := "standard"
		if r.FlashSale {
			mode = "flash sale"
		}
		what += " (" + mode + ")"
	} else {
		what += " (GET /healthz)"
	}
	if len(r.BaseURLs) > 1 {
		p("target", "%s at %d instances: %s", what, len(r.BaseURLs), strings.Join(r.BaseURLs, " "))
	} else {
		p("target", "%s at %s", what, r.BaseURL)
	}
	if len(r.Vouchers) > 0 {
		v := strings.Join(r.Vouchers, " ")
		if len(r.Vouchers) > 4 {
			v = strings.Join(r.Vouchers[:3], " ") + fmt.Sprintf(" ... (%d vouchers)", len(r.Vouchers))
		}
		if r.Stack > 1 {
			v += fmt.Sprintf(" (orders of %d codes, all or none)", r.Stack)
		}
		p("vouchers", "%s", v)
	}
	loop := fmt.Sprintf("closed loop, %d workers", r.Concurrency)
	if r.Loop == "open" {
		loop = fmt.Sprintf("open loop at %.0f req/s, up to %d in flight", r.TargetRate, r.Concurrency)
	}
	p("load", "%s, seed %d", loop, r.Seed)
	p("requests", "%d in %.2fs = %.1f req/s (new %d, repeat customer %d, retry %d)",
		r.Requests, r.DurationSeconds, r.Rate, r.NewOrders, r.Repeats, r.Retries)
	if r.WarmupRequests > 0 {
		p("warm-up", "%d requests of the first %gs left out of the latency figures", r.WarmupRequests, r.WarmupSeconds)
	}
	l := r.Latency
	p("latency", "p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  mean %s",
		fmtMs(l.P50), fmtMs(l.P90), fmtMs(l.P99), fmtMs(l.P999), fmtMs(l.Max), fmtMs(l.Mean))
	if len(r.Slowest) > 0 {
		p("slowest", "%s", slowestText(r.Slowest))
	}
	p("status", "%s", joinCounts(r.Status, func(k int) string {
		if k == 0 {
			return "no answer"
		}
		return strconv.Itoa(k) + " " + http.StatusText(k)
	}))
	if len(r.Errors) > 0 {
		p("errors", "%s", joinCounts(r.Errors, func(k string) string { return k }))
	}
	p("failures", "%d", r.Failures)
	if r.Target == RouteReserve {
		p("reserved", "%d distinct orderIds answered 201", r.Reserved)
	}
	if r.StoppedByMaxDuration {
		p("stopped", "by the MaxDuration safety bound")
	}
	if r.Interrupted {
		p("stopped", "interrupted")
	}
	if c := r.CPU; c != nil {
		after := ""
		if r.WarmupSeconds > 0 {
			after = " after the warm-up"
		}
		p("cpu", "per request over the %d requests of %.2fs%s:", c.Requests, c.Seconds, after)
		for _, cc := range append(append(slices.Clone(c.Components), c.Stack), c.LoadGenerator) {
			over := ""
			if cc.IdleCores > 0 || cc.MarginalMicrosPerRequest != 0 {
				over = fmt.Sprintf("  (idle %.2f cores; %.1f µs/req over idle)", cc.IdleCores, cc.MarginalMicrosPerRequest)
			}
			p("", "%-15s %8.1f µs/req  %6.2f cores  %7.2f CPU s%s", cc.Name, cc.MicrosPerRequest, cc.Cores, cc.CPUSeconds, over)
		}
	}
	if r.CPUError != "" {
		p("cpu", "not measured: %s", r.CPUError)
	}
	if v := r.Verification; v != nil {
		checks := v.Vouchers
		if len(checks) > maxCheckedLines {
			// Many vouchers: one line for all of them (--json has each).
			sum := VoucherCheck{Code: fmt.Sprintf("%d vouchers", len(checks))}
			for _, c := range checks {
				sum.TotalLimit += c.TotalLimit
				sum.Granted += c.Granted
				sum.HeldRows += c.HeldRows
				sum.UsedCount += c.UsedCount
				sum.RowsWritten += c.RowsWritten
				sum.Released += c.Released
				sum.Unknown += c.Unknown
			}
			checks = []VoucherCheck{sum}
		}
		for _, c := range checks {
			redis := ""
			if c.RedisRemaining != nil {
				redis = fmt.Sprintf(", redis remaining %d", *c.RedisRemaining)
			}
			p("checked", "%s: limit %d, 201s %d, held rows %d, used_count %d, rows written %d, released %d, unknown %d%s",
				c.Code, c.TotalLimit, c.Granted, c.HeldRows, c.UsedCount, c.RowsWritten, c.Released, c.Unknown, redis)
		}
		if len(v.Violations) == 0 {
			p("verify", "OK (waited %.1fs)", v.WaitedSeconds)
		} else {
			p("verify", "%d VIOLATIONS", len(v.Violations))
			for _, s := range v.Violations {
				p("", "- %s", s)
			}
		}
	} else if r.Unverified() {
		p("verify", "not verified: %s", NotVerifiedReason)
	}
	return tw.Flush()
}

// maxCheckedLines is the most vouchers the table lists one by one; above
// it, it prints their totals (each voucher is still verified).
const maxCheckedLines = 10

func fmtMs(ms float64) string {
	switch {
	case ms >= 1000:
		return strconv.FormatFloat(ms/1000, 'f', 2, 64) + "s"
	case ms >= 10:
		return strconv.FormatFloat(ms, 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(ms, 'f', 3, 64) + "ms"
}

func joinCounts[K int | string](m map[K]int64, name func(K) string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", name(k), m[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
