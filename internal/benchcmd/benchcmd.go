// Package benchcmd runs `voucherd bench`: internal/bench's flash-sale
// workload against running voucherd instances, or against a stack it
// starts itself (PostgreSQL, Redis or a Redis Cluster, Kafka, and voucherd
// serve and consume processes, through internal/localstack), then the
// reports and the verdict on the invariants. It also runs the Kafka
// warm-up, the PostgreSQL outage and the comparison of the write modes.
//
// cmd/voucherd reads the flags and the environment into Options; this
// package reads neither.
package benchcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/voucherd/voucherd/internal/bench"
)

// ErrInvariants is returned by Run when a run broke an invariant; the
// reports are written and the broken invariants listed on stderr.
var ErrInvariants = errors.New("bench: invariants broken")

// Options is one `voucherd bench` invocation.
type Options struct {
	// Workload is the run's workload and verification. Run sets its Name,
	// base URLs, FlashSale, CPU and, with a started stack, its tokens and
	// Verify for each target.
	Workload bench.Config
	// URLs are running instances of one deployment to spread the load
	// over; empty starts a stack in a temporary folder.
	URLs []string
	// Modes are, with a started stack, the write modes to run in turn:
	// standard, flash-sync, flash-kafka. With URLs the first names the
	// target: standard, or flash (the server decides sync or Kafka).
	// Empty means flash-sync.
	Modes []string
	// Compare runs the workload against the no-op route and in every
	// write mode (Modes is ignored) and compares them.
	Compare bool
	// CPU are, with URLs, the processes whose CPU time per request to
	// report.
	CPU []bench.Component
	// JSON writes the report (or the reports, as an array, or the
	// comparison) as one JSON document on stdout; everything else, the
	// Kafka warm-up and the stage table included, goes to stderr.
	JSON bool

	// Stack says how to start the stack when URLs is empty.
	Stack StackOptions
	// KafkaWarmup, with a started stack that runs Kafka mode, first
	// reserves on a throwaway voucher for this long, so that the figures
	// are of a warm broker; 0 skips it.
	KafkaWarmup time.Duration
	// PGOutage, with a started stack, runs flash-sync and flash-kafka side
	// by side and stops PostgreSQL for this long, PGOutageAt into the run.
	PGOutage, PGOutageAt time.Duration
	// ReconcileEvery, when positive, runs each mode twice on fresh
	// vouchers, without and then with a repairing reconciliation of the
	// run's vouchers this often during the load, and reports Redis's
	// longest voucherd command (SLOWLOG) of each run and the reserve p99
	// of both side by side (with JSON, one BigVoucherResult); it needs a
	// started stack or the workload's Verify.RedisAddrs, and no Compare.
	// It changes the SLOWLOG settings of the stack's Redis for the runs
	// and puts them back after.
	ReconcileEvery time.Duration
	// OTLPSink, with a started stack, has the servers export their spans
	// to an OTLP/HTTP endpoint in this process that discards them (the cost
	// of tracing; the servers must have OTEL_TRACES_EXPORTER=otlp).
	OTLPSink bool
	// Events, with a started stack, runs each mode once per event
	// subscription setting (EventsNone, EventsConfirmed, EventsReserved)
	// and compares throughput, p99, the outbox's growth and the delivery
	// lag to a receiver in this process (events.go).
	Events []string
}

// StackOptions says how to start the stack of a run without URLs.
type StackOptions struct {
	// Executable is the voucherd binary, run as `serve` and `consume`.
	// Required.
	Executable string
	// Env is the whole environment of the voucherd processes (nil: an
	// empty one); their flags say everything else. Run adds GOMAXPROCS
	// (see Procs) and, with OTLPSink, the OTLP endpoint.
	Env []string
	// Instances is the number of serve processes per write mode, the load
	// spread over them; 0 means 1.
	Instances int
	// Redis is "single" (one Redis, the default) or "cluster" (a Redis
	// Cluster of 3 masters).
	Redis string
	// KafkaPartitions is the reservation topic's partition count; 0 means 3.
	KafkaPartitions int
	// Consumers is the number of consumers in the Kafka group, inside the
	// first instances and then in consume processes; 0 means 1.
	Consumers int
	// SeparateWrites turns off the combining of concurrent PostgreSQL
	// reservations of one voucher into one transaction.
	SeparateWrites bool
	// ReconcileShare is the servers' --reconcile-share, the share of its
	// time a reconciliation pass works (0: the servers' default).
	ReconcileShare float64
	// RedisRealtime runs the stack's redis-server processes at real-time
	// priority (SCHED_FIFO 10, set with chrt; needs root or CAP_SYS_NICE),
	// so that the load generator, voucherd and PostgreSQL on the same
	// cores cannot deschedule Redis in the middle of a command: Redis as
	// on a core of its own, its SLOWLOG then Redis's own work.
	RedisRealtime bool
	// Procs is the GOMAXPROCS of each voucherd process: positive as given,
	// 0 their share of this machine's CPUs, -1 Go's default.
	Procs int
	// ServeFlags are added to the flags of every voucherd serve and
	// consume process, after the stack's own (the last value of a flag
	// wins): settings of the write path to compare, such as
	// --combine-writers or --redis-flush-delay.
	ServeFlags []string
	// KeepLogs, when set, is a folder the stack's logs (every voucherd
	// process's, PostgreSQL's, Redis's) are copied to when it stops; the
	// stack's own folder is removed.
	KeepLogs string
}

// Run runs the benchmark o describes, writes its reports to stdout and its
// progress to stderr, and returns ErrInvariants when an invariant broke.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) error {
	if len(o.Modes) == 0 {
		o.Modes = []string{"flash-sync"}
	}
	if len(o.URLs) == 0 {
		return runOnStack(ctx, o, stdout, stderr)
	}
	if len(o.Events) > 0 {
		return errors.New("--events needs a started stack (no --url)")
	}
	cfg, mode := o.Workload, o.Modes[0]
	cfg.BaseURLs = o.URLs
	cfg.FlashSale = mode != "standard"
	targets := []bench.Target{{Name: mode, BaseURLs: o.URLs, FlashSale: cfg.FlashSale, CPU: o.CPU}}
	if o.ReconcileEvery > 0 {
		if len(cfg.Verify.RedisAddrs) == 0 {
			return errors.New("--reconcile-every needs a started stack or --redis-addr")
		}
		// The same servers for both runs: the second inherits the first's
		// holds and rows.
		servers := func(context.Context, string, bool) (bench.Target, []string, func(), error) {
			return targets[0], cfg.Verify.RedisAddrs, func() {}, nil
		}
		return runReconciling(ctx, o, cfg, servers, stdout, stderr)
	}
	return runTargets(ctx, o, cfg, targets, stdout, stderr)
}

// runOnStack starts the stack the modes need, warms Kafka up, and runs the
// modes in turn (or the PostgreSQL outage), then stops the stack.
func runOnStack(ctx context.Context, o Options, stdout, stderr io.Writer) error {
	// info receives what is not the report: on stdout beside the tables,
	// on stderr with JSON, which keeps stdout one JSON document.
	info := stdout
	if o.JSON {
		info = stderr
	}
	modes := o.Modes
	if o.Compare {
		modes = []string{"standard", "flash-sync", "flash-kafka"}
	}
	if o.PGOutage > 0 {
		modes = []string{"flash-sync", "flash-kafka"}
	}
	for _, m := range modes {
		if m != "standard" && m != "flash-sync" && m != "flash-kafka" {
			return fmt.Errorf("--mode must be standard, flash-sync or flash-kafka, not %q", m)
		}
	}
	so := o.Stack
	if o.ReconcileEvery > 0 {
		// Each reconciliation pass logs its phases at info level, to be
		// set beside the run's slowest requests (--keep-logs).
		so.ServeFlags = append([]string{"--log-level=info"}, so.ServeFlags...)
	}
	if o.OTLPSink {
		sink, err := StartOTLPSink()
		if err != nil {
			return err
		}
		defer func() {
			sink.Close()
			fmt.Fprintf(stderr, "voucherd bench: the OTLP sink received %d exports, %d bytes\n", sink.Exports(), sink.Bytes())
		}()
		if so.Env, err = sink.tracesTo(so.Env); err != nil {
			return err
		}
	}
	if len(o.Events) > 0 {
		if err := checkEvents(o.Events); err != nil {
			return err
		}
		so.Env = append(slices.Clone(so.Env), "VOUCHERD_WEBHOOK_ALLOW_PRIVATE=true")
	}
	cfg := o.Workload
	cfg.APIToken, cfg.AdminToken = "", ""
	if o.ReconcileEvery > 0 {
		return runReconciling(ctx, o, cfg, freshStacks(so, o.KafkaWarmup, cfg, stderr, info), stdout, stderr)
	}
	st, err := startStack(ctx, stderr, so, modes)
	if err != nil {
		return err
	}
	defer st.close()
	if kafka := st.groups["kafka"]; kafka != nil {
		if o.KafkaWarmup > 0 {
			fmt.Fprintf(stderr, "voucherd bench: warming the Kafka path up for %s\n", o.KafkaWarmup)
			if err := warmKafka(ctx, info, cfg, st, o.KafkaWarmup); err != nil {
				return err
			}
		}
		if o.PGOutage == 0 {
			before := stages(ctx, kafka.urls)
			defer func() {
				fmt.Fprintln(info)
				writeStages(info, "flash-kafka", before, stages(ctx, kafka.urls))
			}()
		}
	}
	if o.PGOutage > 0 {
		return runPGOutage(ctx, stdout, stderr, info, o.JSON, cfg, st, o.PGOutageAt, o.PGOutage)
	}
	var targets []bench.Target
	for _, m := range modes {
		targets = append(targets, st.target(m))
	}
	if len(o.Events) > 0 {
		return runEvents(ctx, o, cfg, st, targets, stdout, stderr)
	}
	return runTargets(ctx, o, cfg, targets, stdout, stderr)
}

// runReconciling is runTargets for Options.ReconcileEvery: each mode
// without and with reconciliation, on the servers servers gives each run.
func runReconciling(ctx context.Context, o Options, cfg bench.Config, servers bigVoucherServers, stdout, stderr io.Writer) error {
	if o.Compare {
		return errors.New("--reconcile-every takes no --compare")
	}
	modes := o.Modes
	if len(o.URLs) > 0 {
		modes = o.Modes[:1]
	}
	reports, err := runBigVoucher(ctx, stdout, stderr, o.JSON, cfg, modes, servers, o.ReconcileEvery)
	if err != nil {
		return err
	}
	return checkInvariants(stderr, reports)
}

// freshStacks gives each run of runReconciling a stack of its own, started
// for its mode (the Kafka path warmed up for kafkaWarmup first) and
// stopped after the run: on the stack of the run before, a run would
// inherit its million holds and rows (a bigger table to vacuum and index,
// a bigger Redis to rewrite), a cost that is not reconciliation's.
func freshStacks(so StackOptions, kafkaWarmup time.Duration, cfg bench.Config, stderr, info io.Writer) bigVoucherServers {
	return func(ctx context.Context, mode string, reconcile bool) (bench.Target, []string, func(), error) {
		so := so
		if so.KeepLogs != "" {
			so.KeepLogs = filepath.Join(so.KeepLogs, mode+map[bool]string{false: "", true: "+reconcile"}[reconcile])
		}
		st, err := startStack(ctx, stderr, so, []string{mode})
		if err != nil {
			return bench.Target{}, nil, nil, err
		}
		if mode == "flash-kafka" && kafkaWarmup > 0 {
			fmt.Fprintf(stderr, "voucherd bench: warming the Kafka path up for %s\n", kafkaWarmup)
			if err := warmKafka(ctx, info, cfg, st, kafkaWarmup); err != nil {
				st.close()
				return bench.Target{}, nil, nil, err
			}
		}
		return st.target(mode), st.redisAddrs, st.close, nil
	}
}

// runTargets runs cfg against each target in turn, or compares them, and
// writes the reports.
func runTargets(ctx context.Context, o Options, cfg bench.Config, targets []bench.Target, stdout, stderr io.Writer) error {
	if o.Compare {
		cmp, err := bench.Compare(ctx, cfg, targets)
		if cmp != nil {
			if o.JSON {
				_ = writeJSON(stdout, cmp)
			} else {
				for _, r := range cmp.Reports {
					_ = r.WriteTable(stdout)
					fmt.Fprintln(stdout)
				}
				_ = cmp.WriteTable(stdout)
			}
		}
		if err != nil {
			return err
		}
		return checkInvariants(stderr, cmp.Reports)
	}
	var reports []*bench.Report
	defer func() {
		if o.JSON && len(reports) > 1 {
			_ = writeJSON(stdout, reports)
		}
	}()
	for _, t := range targets {
		run := cfg
		run.Name, run.FlashSale, run.CPU = t.Name, t.FlashSale, t.CPU
		run.BaseURL, run.BaseURLs = "", t.BaseURLs
		if t.Verify != nil {
			run.Verify = *t.Verify
		}
		rep, err := bench.Run(ctx, run)
		if rep != nil {
			reports = append(reports, rep)
		}
		if err != nil {
			return err
		}
		switch {
		case o.JSON && len(targets) == 1:
			err = rep.WriteJSON(stdout)
		case !o.JSON:
			err = rep.WriteTable(stdout)
			fmt.Fprintln(stdout)
		}
		if err != nil {
			return err
		}
	}
	return checkInvariants(stderr, reports)
}

// checkInvariants lists on stderr the invariants each report says broke,
// and returns ErrInvariants when one did. A run against --url without
// --database-url was not verified: it is said so on stderr, and is not a
// failure.
func checkInvariants(stderr io.Writer, reports []*bench.Report) error {
	ok := true
	for _, r := range reports {
		if r.Unverified() {
			fmt.Fprintf(stderr, "voucherd bench: %s: not verified: %s\n", r.Name, bench.NotVerifiedReason)
			continue
		}
		if !r.OK() {
			ok = false
			fmt.Fprintf(stderr, "voucherd bench: %s: invariants broken:\n", r.Name)
			for _, v := range r.Violations() {
				fmt.Fprintln(stderr, "  -", v)
			}
		}
	}
	if !ok {
		return ErrInvariants
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// envValue returns the value of key in env (the last one wins, as in
// exec.Cmd) and whether it is set.
func envValue(env []string, key string) (string, bool) {
	val, ok := "", false
	for _, kv := range env {
		if k, v, found := strings.Cut(kv, "="); found && k == key {
			val, ok = v, true
		}
	}
	return val, ok
}
