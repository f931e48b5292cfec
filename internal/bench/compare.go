package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
)

// Target is one server Compare loads. The server's flash write mode (sync or
// Kafka) is a server setting, so each mode to compare is its own server;
// FlashSale picks the kind of voucher the run creates on it.
type Target struct {
	// Name labels the row ("standard", "flash-sync", "flash-kafka").
	Name string
	// BaseURL is the server; BaseURLs, when set, are several instances of
	// it to spread the load over (as Config.BaseURLs).
	BaseURL   string
	BaseURLs  []string
	FlashSale bool
	// CPU, when set, replaces Config.CPU for this target.
	CPU []Component
	// Verify, when set, replaces Config.Verify for this target (another
	// database or key prefix).
	Verify *VerifyConfig
}

// Comparison is the outcome of Compare: one row per run, the no-op baseline
// first.
type Comparison struct {
	Rows []CompareRow `json:"rows"`
	// Reports are the full reports, in the order of Rows.
	Reports []*Report `json:"reports"`
}

// CompareRow sums up one run against the baselines. Ratios are 0 when the
// baseline is missing or did not complete any request.
type CompareRow struct {
	Name      string  `json:"name"`
	Target    Route   `json:"target"`
	FlashSale bool    `json:"flashSale"`
	Rate      float64 `json:"rate"`
	P99Ms     float64 `json:"p99Ms"`
	Failures  int64   `json:"failures"`
	Reserved  int64   `json:"reserved"`
	// RateVsNoop and P99VsNoop divide this run's rate and p99 by the no-op
	// run's; RateVsStandard and P99VsStandard by the first standard target's.
	RateVsNoop     float64 `json:"rateVsNoop"`
	P99VsNoop      float64 `json:"p99VsNoop"`
	RateVsStandard float64 `json:"rateVsStandard,omitempty"`
	P99VsStandard  float64 `json:"p99VsStandard,omitempty"`
	// Violations is the number of invariant violations (-1 when not verified).
	Violations int `json:"violations"`
}

// Compare runs the same workload (same settings, same seed) first against
// the no-op route of the first target, then against fresh vouchers on each
// target in turn, and sums up throughput and p99 relative to the no-op run
// and to the first standard (FlashSale=false) target. cfg.Target, Name,
// BaseURL and FlashSale are taken from each target.
//
// It stops at the first run that fails to start (an error creating its
// vouchers, a cancelled context) and returns what it has so far.
func Compare(ctx context.Context, cfg Config, targets []Target) (*Comparison, error) {
	if len(targets) == 0 {
		return nil, errors.New("bench: compare: no targets")
	}
	// Fixing the defaults once gives every run the same seed, so the same
	// sequence of customers, orderIds and retries.
	cfg.BaseURL, cfg.BaseURLs = targets[0].BaseURL, targets[0].BaseURLs
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cmp := &Comparison{}

	noop := cfg
	noop.Name, noop.Target, noop.FlashSale = "noop", RouteNoop, false
	noop.BaseURL, noop.BaseURLs = targets[0].BaseURL, targets[0].BaseURLs
	noop.Verify = VerifyConfig{}
	if targets[0].CPU != nil {
		noop.CPU = targets[0].CPU
	}
	rep, err := Run(ctx, noop)
	if rep != nil {
		cmp.add(rep)
	}
	if err != nil {
		return cmp, fmt.Errorf("bench: compare: noop: %w", err)
	}

	for _, t := range targets {
		run := cfg
		run.Name, run.Target, run.FlashSale = t.Name, RouteReserve, t.FlashSale
		run.BaseURL, run.BaseURLs = t.BaseURL, t.BaseURLs
		if t.CPU != nil {
			run.CPU = t.CPU
		}
		if t.Verify != nil {
			run.Verify = *t.Verify
		}
		rep, err := Run(ctx, run)
		if rep != nil {
			cmp.add(rep)
		}
		if err != nil {
			return cmp, fmt.Errorf("bench: compare: %s: %w", t.Name, err)
		}
	}
	return cmp, nil
}

func (c *Comparison) add(rep *Report) {
	row := CompareRow{
		Name: rep.Name, Target: rep.Target, FlashSale: rep.FlashSale,
		Rate: rep.Rate, P99Ms: rep.Latency.P99, Failures: rep.Failures, Reserved: rep.Reserved,
		Violations: -1,
	}
	if rep.Verification != nil {
		row.Violations = len(rep.Verification.Violations)
	}
	c.Rows = append(c.Rows, row)
	c.Reports = append(c.Reports, rep)
	c.ratios()
}

// ratios fills the ratio columns from the baselines present.
func (c *Comparison) ratios() {
	var noop, std *CompareRow
	for i := range c.Rows {
		r := &c.Rows[i]
		if r.Target == RouteNoop && noop == nil {
			noop = r
		}
		if r.Target == RouteReserve && !r.FlashSale && std == nil {
			std = r
		}
	}
	for i := range c.Rows {
		r := &c.Rows[i]
		if noop != nil {
			r.RateVsNoop, r.P99VsNoop = ratio(r.Rate, noop.Rate), ratio(r.P99Ms, noop.P99Ms)
		}
		if std != nil && r.Target == RouteReserve {
			r.RateVsStandard, r.P99VsStandard = ratio(r.Rate, std.Rate), ratio(r.P99Ms, std.P99Ms)
		}
	}
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// WriteTable writes the comparison as a human-readable table.
func (c *Comparison) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "run\treq/s\tp99\trate/noop\tp99/noop\trate/standard\tp99/standard\tfailures\treserved\tverify\t")
	for _, r := range c.Rows {
		verify := "-"
		switch {
		case r.Violations == 0:
			verify = "OK"
		case r.Violations > 0:
			verify = fmt.Sprintf("%d VIOLATIONS", r.Violations)
		}
		reserved := "-"
		if r.Target == RouteReserve {
			reserved = fmt.Sprint(r.Reserved)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n",
			r.Name, r.Rate, fmtMs(r.P99Ms), fmtRatio(r.RateVsNoop), fmtRatio(r.P99VsNoop),
			fmtRatio(r.RateVsStandard), fmtRatio(r.P99VsStandard), r.Failures, reserved, verify)
	}
	return tw.Flush()
}

func fmtRatio(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", x)
}
