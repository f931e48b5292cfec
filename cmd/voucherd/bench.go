package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/voucherd/voucherd/internal/bench"
	"github.com/voucherd/voucherd/internal/benchcmd"
)

// benchScenarios are named presets: each sets flags before the command
// line's own flags are applied, so any of them can still be overridden.
var benchScenarios = map[string][]string{
	// Many vouchers over several instances: 100 flash vouchers and a hot
	// one beside them taking a fifth of the traffic, 3 instances, a
	// 3-master Redis Cluster, 6 partitions, 2 consumers, sync and Kafka mode.
	"scale": {"--vouchers=101", "--hot-share=0.2", "--total=1000", "--requests=200000", "--instances=3",
		"--redis=cluster", "--kafka-partitions=6", "--consumers=2", "--mode=flash-sync,flash-kafka"},
	// A campaign sale: 100,000 unique codes sharing one budget of 10,000
	// uses, one per customer, each new order presenting a random code (low
	// contention per code, one shared budget row), standard mode (--mode
	// flash-sync or flash-kafka runs it as a flash campaign).
	"campaign": {"--campaign-codes=100000", "--total=10000", "--per-user=1", "--customers=50000",
		"--requests=20000", "--mode=standard"},
	// A big flash voucher: 1,000,000 uses, one per customer, filled by a
	// million new customers, run twice, each on a stack of its own:
	// without reconciliation, then with a repairing reconciliation every
	// 5 s during the load; each run reports Redis's longest command
	// (SLOWLOG) beside its latency.
	"big-voucher": {"--total=1000000", "--per-user=1", "--customers=2000000", "--requests=1000000",
		"--repeat-share=0", "--retry-share=0", "--mode=flash-sync", "--reconcile-every=5s", "--max-duration=15m"},
}

// runBench sends a flash-sale workload to running voucherd instances
// (--url) or to a stack it starts itself, then verifies the invariants. It
// exits non-zero when an invariant is broken.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg bench.Config
	var o benchcmd.Options
	var cpuPIDs []string
	fs := newFlagSet("bench", "", stderr)
	fs.Var(listFlag{&o.URLs}, "url", "voucherd to load, or a comma-separated list of instances of one deployment to spread the load over; empty starts a stack (PostgreSQL, Redis, Kafka for flash-kafka, voucherd serve processes) in a temporary folder")
	fs.StringVar(&cfg.APIToken, "api-token", os.Getenv("VOUCHERD_API_TOKEN"), "API token (VOUCHERD_API_TOKEN)")
	fs.StringVar(&cfg.AdminToken, "admin-token", os.Getenv("VOUCHERD_ADMIN_TOKEN"), "admin token (VOUCHERD_ADMIN_TOKEN)")
	o.Modes = []string{"flash-sync"}
	fs.Var(listFlag{&o.Modes}, "mode", "with a started stack: standard, flash-sync or flash-kafka, or a comma-separated list run in turn; with --url: standard or flash (the server decides sync or kafka)")
	fs.BoolVar(&o.Compare, "compare", false, "run the workload against the no-op route and in standard, flash-sync and flash-kafka mode, and compare")
	noop := fs.Bool("noop", false, "load GET /healthz instead of reserving (the ceiling of the HTTP stack)")
	scenario := fs.String("scenario", "", "a preset applied before the other flags: "+strings.Join(slices.Sorted(maps.Keys(benchScenarios)), ", "))
	total := fs.Int("total", 1000, "uses per voucher (totalLimit)")
	perUser := fs.Int("per-user", 1, "perUserLimit")
	fs.Float64Var(&cfg.DiscountPercent, "percent", 0, "give the vouchers this discountPercent (1 to 100, two decimals at most) instead of a fixed discountAmount; each order is then of 100,000 minor units above the minimum")
	fs.Int64Var(&cfg.MaxDiscountAmount, "max-discount", 0, "with --percent: the vouchers' maxDiscountAmount (0: no cap)")
	fs.Int64Var(&cfg.BudgetAmount, "budget", 0, "give each voucher a money budget of this many minor units (budgetAmount): a budget-limited flash sale that ends with BUDGET_EXCEEDED before the uses run out; 0: none")
	fs.BoolVar(&cfg.BudgetClip, "budget-clip", false, "with --budget: give the last orders what is left of the budget (budgetShortfall clip)")
	fs.IntVar(&cfg.Vouchers, "vouchers", 1, "vouchers to create; traffic is spread uniformly across them")
	fs.Float64Var(&cfg.HotShare, "hot-share", 0, "with several vouchers: share of the traffic sent to the first one (a hot voucher)")
	fs.IntVar(&cfg.Stack, "stack", 0, "each order presents this many codes at once (2 to 5, all or none): the drawn voucher and the next ones, so that orders share codes (--vouchers at least this many, created stackable; with --hot-share the first is the hottest); verification checks all or none per order")
	fs.IntVar(&cfg.CampaignCodes, "campaign-codes", 0, "a campaign sale: one campaign of this many unique codes sharing --total and --per-user, each new order presenting a random code (in flash modes a flash campaign)")
	fs.Int64Var(&cfg.Customers, "customers", 50000, "distinct customers")
	fs.BoolVar(&cfg.StringCustomerIDs, "string-customer-ids", false, `send customer n as the string "cus-n" instead of the integer n`)
	fs.Float64Var(&cfg.RetryShare, "retry-share", 0.05, "share of requests that retry an earlier orderId")
	fs.Float64Var(&cfg.RepeatShare, "repeat-share", 0, "share of requests from an already-seen customer with a new orderId")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open-loop requests per second (latency from the scheduled send time); 0 runs closed-loop")
	fs.IntVar(&cfg.Concurrency, "concurrency", 64, "connections (closed loop) or most requests in flight (open loop)")
	fs.Int64Var(&cfg.Requests, "requests", 50000, "requests to send")
	fs.DurationVar(&cfg.Duration, "duration", 0, "stop after this long instead of a count")
	fs.DurationVar(&cfg.MaxDuration, "max-duration", 2*time.Minute, "hard bound on sending")
	fs.DurationVar(&cfg.Warmup, "warmup", 0, "leave the requests of the run's first this long out of the latency and CPU figures (they are still sent and verified)")
	fs.IntVar(&o.Stack.Instances, "instances", 1, "with a started stack: voucherd serve processes per write mode; the load is spread over them")
	fs.StringVar(&o.Stack.Redis, "redis", "single", "with a started stack: single (one Redis) or cluster (a Redis Cluster of 3 masters)")
	fs.IntVar(&o.Stack.KafkaPartitions, "kafka-partitions", 3, "with a started stack: partitions of the reservations topic")
	fs.IntVar(&o.Stack.Consumers, "consumers", 1, "with a started stack: consumers in the Kafka group (inside the first instances, then voucherd consume processes)")
	fs.IntVar(&o.Stack.Procs, "instance-procs", 0, "with a started stack: GOMAXPROCS of each voucherd process; 0 gives each its share of this machine's CPUs (CPUs / processes per write mode, at least 1), as a CPU limit would in a deployment; -1 leaves Go's default (every CPU)")
	regroup := fs.Duration("combine-regroup", 0, "with a started stack: the voucherd processes' --combine-regroup (negative: no regrouping wait); unset leaves the server's default")
	cohorts := fs.Bool("combine-cohorts", false, "with a started stack: the voucherd processes' --combine-cohorts; unset leaves the server's default")
	writers := fs.Int("writers", 0, "with a started stack: combined PostgreSQL writes of one voucher in flight at once in each voucherd (serve --combine-writers); unset leaves the server's default")
	flushDelay := fs.Duration("redis-flush-delay", 0, "with a started stack: the voucherd processes' --redis-flush-delay; unset leaves the server's default")
	pipelines := fs.Int("redis-pipelines", 0, "with a started stack: the voucherd processes' --redis-pipelines; unset leaves the server's default")
	combineTakes := fs.Bool("redis-combine-takes", false, "with a started stack: the voucherd processes' --redis-combine-takes; unset leaves the server's default")
	fs.DurationVar(&cfg.CPUIdle, "cpu-idle", 2*time.Second, "with CPU accounting: first watch the stack this long without traffic, to tell its idle cost from the requests'")
	fs.Var(listFlag{&cpuPIDs}, "cpu", "with --url: processes whose CPU time per request to report, as name=pid[+pid...], comma-separated (descendants count too)")
	seed := fs.Uint64("seed", 0, "workload seed; 0 picks one")
	fs.BoolVar(&o.JSON, "json", false, "print the report as one JSON document on stdout (several reports as an array), and everything else, progress, the Kafka warm-up and the stage table included, on stderr")
	quiet := fs.Bool("quiet", false, "no progress bar")
	dbURL := fs.String("database-url", os.Getenv("VOUCHERD_DATABASE_URL"), "with --url: the server's PostgreSQL, to verify the invariants; without it the run is reported not verified, and that is not a failure")
	var redisAddrs []string
	fs.Var(listFlag{&redisAddrs}, "redis-addr", "with --url: the server's Redis, to verify remaining counts")
	prefix := fs.String("redis-key-prefix", os.Getenv("VOUCHERD_REDIS_KEY_PREFIX"), "with --url: the server's Redis key prefix")
	combine := fs.Bool("combine-writes", true, "with a started stack: combine concurrent PostgreSQL reservations of one voucher into one transaction")
	fs.BoolVar(&o.Stack.RedisRealtime, "redis-realtime", false, "with a started stack: run Redis at real-time priority (SCHED_FIFO 10 with chrt; needs root), so that the processes sharing its cores cannot deschedule it mid-command, as on a core of its own")
	fs.StringVar(&o.Stack.KeepLogs, "keep-logs", "", "with a started stack: copy the stack's logs (each voucherd's, PostgreSQL's, Redis's) to this folder when it stops; with --reconcile-every the servers log each reconciliation pass's phases there, each run's stack in a folder of its own (MODE, MODE+reconcile)")
	fs.Float64Var(&o.Stack.ReconcileShare, "reconcile-share", 0, "with a started stack: the servers' --reconcile-share, the largest share of its time a reconciliation pass works (0: their default, 0.1; 1: no pause)")
	fs.DurationVar(&o.KafkaWarmup, "kafka-warmup", 15*time.Second, "with a started stack that runs Kafka mode: reserve on a throwaway voucher of the Kafka-mode servers for this long first, so that the figures are of a warm broker (reported apart); 0 skips")
	fs.DurationVar(&o.PGOutage, "pg-outage", 0, "with a started stack: run flash-sync and flash-kafka side by side and stop PostgreSQL for this long in the middle (see --pg-outage-at)")
	fs.DurationVar(&o.PGOutageAt, "pg-outage-at", 5*time.Second, "with --pg-outage: how long into the run PostgreSQL is stopped")
	fs.DurationVar(&o.ReconcileEvery, "reconcile-every", 0, "run each mode twice on fresh vouchers, without and then with a repairing reconciliation of the run's vouchers this often during the load, and report Redis's longest voucherd command (SLOWLOG) of each run and both runs' reserve p99 side by side; a started stack is started afresh for each run, so that neither inherits the other's holds and rows (with --url and --redis-addr the second run has the first's); 0 runs once without")
	fs.Var(listFlag{&o.Events}, "events", "with a started stack: run each mode once per webhook subscription, a comma-separated list of none, confirmed (reservation.confirmed and .released) and reserved (reservation.reserved too), delivered to a receiver in this process; compares throughput, p99, the outbox's bytes per 1,000 uses and the delivery lag")
	fs.BoolVar(&o.OTLPSink, "otlp-sink", false, "with a started stack and OTEL_TRACES_EXPORTER=otlp: export the servers' spans to an OTLP/HTTP endpoint in this process that discards them (the cost of tracing)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (the load generator; the servers are processes of their own) to this file")
	err := fs.Parse(args)
	if err != nil {
		return err
	}
	if *scenario != "" {
		preset, ok := benchScenarios[*scenario]
		if !ok {
			return fmt.Errorf("--scenario must be one of %s, not %q", strings.Join(slices.Sorted(maps.Keys(benchScenarios)), ", "), *scenario)
		}
		// The preset first, then the command line again over it.
		if err := fs.Parse(append(slices.Clone(preset), args...)); err != nil {
			return err
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close() //nolint:errcheck // pprof writes the profile and reports no write error; closing only releases the file
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	if cfg.TotalLimit, err = int32Setting("total", *total); err != nil {
		return err
	}
	if cfg.PerUserLimit, err = int32Setting("per-user", *perUser); err != nil {
		return err
	}
	cfg.Seed = *seed
	if !*quiet {
		cfg.Progress = stderr
	}
	if *noop {
		cfg.Target = bench.RouteNoop
	}
	o.Workload = cfg
	if len(o.URLs) > 0 {
		if o.CPU, err = parseCPUPIDs(cpuPIDs); err != nil {
			return err
		}
		o.Workload.Verify = bench.VerifyConfig{DatabaseURL: *dbURL, RedisAddrs: redisAddrs, KeyPrefix: *prefix}
	}
	o.Stack.SeparateWrites = !*combine
	// Only the settings given are passed on, so that the servers' defaults
	// stay what is compared otherwise.
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "combine-regroup":
			o.Stack.ServeFlags = append(o.Stack.ServeFlags, "--combine-regroup="+regroup.String())
		case "combine-cohorts":
			o.Stack.ServeFlags = append(o.Stack.ServeFlags, "--combine-cohorts="+strconv.FormatBool(*cohorts))
		case "writers":
			o.Stack.ServeFlags = append(o.Stack.ServeFlags, "--combine-writers="+strconv.Itoa(*writers))
		case "redis-flush-delay":
			o.Stack.ServeFlags = append(o.Stack.ServeFlags, "--redis-flush-delay="+flushDelay.String())
		case "redis-pipelines":
			o.Stack.ServeFlags = append(o.Stack.ServeFlags, "--redis-pipelines="+strconv.Itoa(*pipelines))
		case "redis-combine-takes":
			o.Stack.ServeFlags = append(o.Stack.ServeFlags, "--redis-combine-takes="+strconv.FormatBool(*combineTakes))
		}
	})
	if o.Stack.Executable, err = os.Executable(); err != nil {
		return err
	}
	o.Stack.Env = benchServerEnv(os.Environ())
	err = benchcmd.Run(ctx, o, stdout, stderr)
	if errors.Is(err, benchcmd.ErrInvariants) {
		return exitError(2)
	}
	return err
}

// benchServerEnv is the environment of the voucherd processes a bench
// stack starts: ours without the VOUCHERD_* variables, since their flags
// say all, but VOUCHERD_KAFKA_LINGER and VOUCHERD_KAFKA_SEND_WHEN_IDLE,
// producer settings to measure. OTEL_* variables pass, so that the servers
// trace as they would serve.
func benchServerEnv(environ []string) []string {
	var env []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "VOUCHERD_") || strings.HasPrefix(kv, "VOUCHERD_KAFKA_LINGER=") ||
			strings.HasPrefix(kv, "VOUCHERD_KAFKA_SEND_WHEN_IDLE=") {
			env = append(env, kv)
		}
	}
	return env
}

// parseCPUPIDs reads --cpu: name=pid[+pid...] items.
func parseCPUPIDs(items []string) ([]bench.Component, error) {
	var out []bench.Component
	for _, it := range items {
		name, pids, ok := strings.Cut(it, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--cpu: %q is not name=pid[+pid...]", it)
		}
		c := bench.Component{Name: name}
		for _, p := range strings.Split(pids, "+") {
			pid, err := strconv.Atoi(p)
			if err != nil || pid <= 0 {
				return nil, fmt.Errorf("--cpu: %q is not a process id", p)
			}
			c.PIDs = append(c.PIDs, pid)
		}
		out = append(out, c)
	}
	return out, nil
}
