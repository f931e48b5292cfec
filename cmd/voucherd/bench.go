package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/voucherd/voucherd/internal/bench"
	"github.com/voucherd/voucherd/internal/kafkalog"
	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
)

// benchOptions are the flags of `voucherd bench` beyond the workload.
type benchOptions struct {
	urls      []string
	modes     []string
	compare   bool
	instances int
	redis     string // "single" or "cluster"
	parts     int    // Kafka topic partitions
	consumers int    // consumers in the Kafka group
	combine   bool
	cpuPIDs   []string // with --url: name=pid+pid...
	procs     int      // GOMAXPROCS of each started voucherd; 0: its share of the CPUs, -1: Go's default
}

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
	// million new customers, run twice: without reconciliation, then with
	// a repairing reconciliation every 5 s during the load; each run
	// reports Redis's longest command (SLOWLOG) beside its latency.
	"big-voucher": {"--total=1000000", "--per-user=1", "--customers=2000000", "--requests=1000000",
		"--repeat-share=0", "--retry-share=0", "--mode=flash-sync", "--reconcile-every=5s", "--max-duration=15m"},
}

// runBench sends a flash-sale workload to running voucherd instances
// (--url) or to a stack it starts itself, then verifies the invariants. It
// exits non-zero when an invariant is broken.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg bench.Config
	var o benchOptions
	fs := newFlagSet("bench", "", stderr)
	fs.Var(listFlag{&o.urls}, "url", "voucherd to load, or a comma-separated list of instances of one deployment to spread the load over; empty starts a stack (PostgreSQL, Redis, Kafka for flash-kafka, voucherd serve processes) in a temporary folder")
	fs.StringVar(&cfg.APIToken, "api-token", os.Getenv("VOUCHERD_API_TOKEN"), "API token (VOUCHERD_API_TOKEN)")
	fs.StringVar(&cfg.AdminToken, "admin-token", os.Getenv("VOUCHERD_ADMIN_TOKEN"), "admin token (VOUCHERD_ADMIN_TOKEN)")
	o.modes = []string{"flash-sync"}
	fs.Var(listFlag{&o.modes}, "mode", "with a started stack: standard, flash-sync or flash-kafka, or a comma-separated list run in turn; with --url: standard or flash (the server decides sync or kafka)")
	fs.BoolVar(&o.compare, "compare", false, "run the workload against the no-op route and in standard, flash-sync and flash-kafka mode, and compare")
	noop := fs.Bool("noop", false, "load GET /healthz instead of reserving (the ceiling of the HTTP stack)")
	scenario := fs.String("scenario", "", "a preset applied before the other flags: "+strings.Join(slices.Sorted(maps.Keys(benchScenarios)), ", "))
	total := fs.Int("total", 1000, "uses per voucher (totalLimit)")
	perUser := fs.Int("per-user", 1, "perUserLimit")
	fs.Float64Var(&cfg.DiscountPercent, "percent", 0, "give the vouchers this discountPercent (1 to 100, two decimals at most) instead of a fixed discountAmount; each order is then of 100,000 minor units above the minimum")
	fs.Int64Var(&cfg.MaxDiscountAmount, "max-discount", 0, "with --percent: the vouchers' maxDiscountAmount (0: no cap)")
	fs.IntVar(&cfg.Vouchers, "vouchers", 1, "vouchers to create; traffic is spread uniformly across them")
	fs.Float64Var(&cfg.HotShare, "hot-share", 0, "with several vouchers: share of the traffic sent to the first one (a hot voucher)")
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
	fs.IntVar(&o.instances, "instances", 1, "with a started stack: voucherd serve processes per write mode; the load is spread over them")
	fs.StringVar(&o.redis, "redis", "single", "with a started stack: single (one Redis) or cluster (a Redis Cluster of 3 masters)")
	fs.IntVar(&o.parts, "kafka-partitions", 3, "with a started stack: partitions of the reservations topic")
	fs.IntVar(&o.consumers, "consumers", 1, "with a started stack: consumers in the Kafka group (inside the first instances, then voucherd consume processes)")
	fs.IntVar(&o.procs, "instance-procs", 0, "with a started stack: GOMAXPROCS of each voucherd process; 0 gives each its share of this machine's CPUs (CPUs / processes per write mode, at least 1), as a CPU limit would in a deployment; -1 leaves Go's default (every CPU)")
	fs.DurationVar(&cfg.CPUIdle, "cpu-idle", 2*time.Second, "with CPU accounting: first watch the stack this long without traffic, to tell its idle cost from the requests'")
	fs.Var(listFlag{&o.cpuPIDs}, "cpu", "with --url: processes whose CPU time per request to report, as name=pid[+pid...], comma-separated (descendants count too)")
	seed := fs.Uint64("seed", 0, "workload seed; 0 picks one")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	quiet := fs.Bool("quiet", false, "no progress bar")
	dbURL := fs.String("database-url", os.Getenv("VOUCHERD_DATABASE_URL"), "with --url: the server's PostgreSQL, to verify the invariants")
	var redisAddrs []string
	fs.Var(listFlag{&redisAddrs}, "redis-addr", "with --url: the server's Redis, to verify remaining counts")
	prefix := fs.String("redis-key-prefix", os.Getenv("VOUCHERD_REDIS_KEY_PREFIX"), "with --url: the server's Redis key prefix")
	fs.BoolVar(&o.combine, "combine-writes", true, "with a started stack: combine concurrent PostgreSQL reservations of one voucher into one transaction")
	kafkaWarmup := fs.Duration("kafka-warmup", 15*time.Second, "with a started stack that runs Kafka mode: reserve on a throwaway voucher of the Kafka-mode servers for this long first, so that the figures are of a warm broker (reported apart); 0 skips")
	pgOutage := fs.Duration("pg-outage", 0, "with a started stack: run flash-sync and flash-kafka side by side and stop PostgreSQL for this long in the middle (see --pg-outage-at)")
	pgOutageAt := fs.Duration("pg-outage-at", 5*time.Second, "with --pg-outage: how long into the run PostgreSQL is stopped")
	otlp := fs.Bool("otlp-sink", false, "with a started stack and OTEL_TRACES_EXPORTER=otlp: export the servers' spans to an OTLP/HTTP endpoint in this process that discards them (the cost of tracing)")
	reconcileEvery := fs.Duration("reconcile-every", 0, "run each mode twice on fresh vouchers, without and then with a repairing reconciliation of the run's vouchers this often during the load, and report Redis's longest command (SLOWLOG) of each run; needs a started stack or --redis-addr; 0 runs once without")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (the load generator; the servers are processes of their own) to this file")
	if err := fs.Parse(args); err != nil {
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
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cfg.TotalLimit, cfg.PerUserLimit, cfg.Seed = int32(*total), int32(*perUser), *seed
	if !*quiet {
		cfg.Progress = stderr
	}
	if *noop {
		cfg.Target = bench.RouteNoop
	}

	var targets []bench.Target
	if len(o.urls) > 0 {
		mode := o.modes[0]
		cpu, err := parseCPUPIDs(o.cpuPIDs)
		if err != nil {
			return err
		}
		cfg.BaseURLs = o.urls
		cfg.FlashSale = mode != "standard"
		cfg.Verify = bench.VerifyConfig{DatabaseURL: *dbURL, RedisAddrs: redisAddrs, KeyPrefix: *prefix}
		targets = []bench.Target{{Name: mode, BaseURLs: o.urls, FlashSale: cfg.FlashSale, CPU: cpu}}
	} else {
		if o.compare {
			o.modes = []string{"standard", "flash-sync", "flash-kafka"}
		}
		if *pgOutage > 0 {
			o.modes = []string{"flash-sync", "flash-kafka"}
		}
		if *otlp {
			// The servers inherit the OTEL_* variables this sets.
			sink, err := startOTLPSink()
			if err != nil {
				return err
			}
			defer sink.close(stderr)
			if err := sink.useForTraces(); err != nil {
				return err
			}
		}
		for _, m := range o.modes {
			if m != "standard" && m != "flash-sync" && m != "flash-kafka" {
				return fmt.Errorf("--mode must be standard, flash-sync or flash-kafka, not %q", m)
			}
		}
		st, err := startBenchStack(ctx, stderr, o)
		if err != nil {
			return err
		}
		defer st.close()
		cfg.APIToken, cfg.AdminToken = "", ""
		if kafka := st.groups["kafka"]; kafka != nil {
			if *kafkaWarmup > 0 {
				fmt.Fprintf(stderr, "voucherd bench: warming the Kafka path up for %s\n", *kafkaWarmup)
				if err := warmKafka(ctx, stdout, cfg, st, *kafkaWarmup); err != nil {
					return err
				}
			}
			if *pgOutage == 0 {
				// After the reports; on stderr with --json, which keeps
				// stdout one JSON document.
				out := stdout
				if *asJSON {
					out = stderr
				}
				before := stages(ctx, kafka.urls)
				defer func() {
					fmt.Fprintln(out)
					writeStages(out, "flash-kafka", before, stages(ctx, kafka.urls))
				}()
			}
		}
		if *pgOutage > 0 {
			return runPGOutage(ctx, stdout, stderr, cfg, st, *pgOutageAt, *pgOutage)
		}
		for _, m := range o.modes {
			targets = append(targets, st.target(m))
		}
		redisAddrs = st.redisAddrs
	}

	if *reconcileEvery > 0 {
		if o.compare || len(redisAddrs) == 0 {
			return errors.New("--reconcile-every needs a started stack or --redis-addr, and no --compare")
		}
		reports, err := runBigVoucher(ctx, stdout, cfg, targets, redisAddrs, *reconcileEvery)
		if err != nil {
			return err
		}
		return benchExit(stderr, reports)
	}

	if o.compare {
		cmp, err := bench.Compare(ctx, cfg, targets)
		if cmp != nil {
			if *asJSON {
				_ = writeIndented(stdout, cmp)
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
		return benchExit(stderr, cmp.Reports)
	}
	var reports []*bench.Report
	defer func() {
		if *asJSON && len(reports) > 1 {
			_ = writeIndented(stdout, reports)
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
		case *asJSON && len(targets) == 1:
			err = rep.WriteJSON(stdout)
		case !*asJSON:
			err = rep.WriteTable(stdout)
			fmt.Fprintln(stdout)
		}
		if err != nil {
			return err
		}
	}
	return benchExit(stderr, reports)
}

// benchExit returns exit status 2 when a run broke an invariant.
func benchExit(stderr io.Writer, reports []*bench.Report) error {
	ok := true
	for _, r := range reports {
		if !r.OK() {
			ok = false
			fmt.Fprintf(stderr, "voucherd bench: %s: invariants broken:\n", r.Name)
			for _, v := range r.Violations() {
				fmt.Fprintln(stderr, "  -", v)
			}
		}
	}
	if !ok {
		return exitError(2)
	}
	return nil
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

// benchStack is PostgreSQL, Redis (one node or a Cluster) and, for Kafka
// mode, a broker, started for a bench run, with voucherd serve processes:
// one group of instances in sync mode and one in Kafka mode, as the modes
// to run need. Each group has its own Redis key prefix; both share the
// database (every run creates fresh vouchers).
type benchStack struct {
	dir          string
	children     []*child
	cluster      *testenv.RedisCluster
	databaseURL  string
	redisAddrs   []string
	kafkaBrokers []string
	pg           *child // also in children
	pgDir        string
	pgPort       int
	redisPIDs    []int
	kafkaPID     int
	groups       map[string]*instanceGroup // "sync", "kafka"
	// procs is the GOMAXPROCS of every voucherd process, 0 for Go's default.
	procs int
	// kafkaLog reads the writer group's lag (Kafka mode).
	kafkaLog *kafkalog.Log
}

// instanceGroup is the voucherd processes of one write mode.
type instanceGroup struct {
	prefix string
	urls   []string
	pids   []int // serve and consume processes
}

func (s *benchStack) close() {
	if s.kafkaLog != nil {
		s.kafkaLog.Close()
	}
	// voucherd first, then the services under it.
	for i := len(s.children) - 1; i >= 0; i-- {
		s.children[i].stop()
	}
	if s.cluster != nil {
		s.cluster.Close()
	}
	_ = os.RemoveAll(s.dir)
}

// target is the bench target of one mode on the stack, with the processes
// whose CPU time counts for it.
func (s *benchStack) target(mode string) bench.Target {
	g, wait, kafka := s.groups["sync"], time.Duration(-1), false
	if mode == "flash-kafka" {
		g, wait, kafka = s.groups["kafka"], time.Minute, true
	}
	cpu := []bench.Component{
		{Name: "voucherd", PIDs: g.pids},
		{Name: "redis", PIDs: s.redisPIDs},
		{Name: "postgresql", PIDs: []int{s.pg.cmd.Process.Pid}},
	}
	if kafka {
		cpu = append(cpu, bench.Component{Name: "kafka", PIDs: []int{s.kafkaPID}})
	}
	return bench.Target{Name: mode, BaseURLs: g.urls, FlashSale: mode != "standard", CPU: cpu,
		Verify: &bench.VerifyConfig{DatabaseURL: s.databaseURL, RedisAddrs: s.redisAddrs, KeyPrefix: g.prefix, Wait: wait}}
}

func freeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func startBenchStack(ctx context.Context, stderr io.Writer, o benchOptions) (_ *benchStack, err error) {
	switch {
	case o.instances < 1:
		return nil, errors.New("--instances must be at least 1")
	case o.redis != "single" && o.redis != "cluster":
		return nil, fmt.Errorf("--redis must be single or cluster, not %q", o.redis)
	case o.parts < 1 || o.consumers < 1:
		return nil, errors.New("--kafka-partitions and --consumers must be at least 1")
	}
	withSync, withKafka := false, false
	for _, m := range o.modes {
		withKafka = withKafka || m == "flash-kafka"
		withSync = withSync || m != "flash-kafka"
	}
	dir, err := os.MkdirTemp("", "voucherd-bench-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	st := &benchStack{dir: dir, groups: map[string]*instanceGroup{}, procs: instanceProcs(o.procs, runtime.NumCPU(), max(o.instances, o.consumers))}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	fmt.Fprintf(stderr, "voucherd bench: starting PostgreSQL (durable commits), Redis (%s)%s and %d voucherd instance(s) per mode in %s\n",
		o.redis, map[bool]string{true: ", Kafka", false: ""}[withKafka], o.instances, dir)
	pgPort, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	st.pgDir, st.pgPort = filepath.Join(dir, "postgres"), pgPort
	pg, err := startDevPostgres(ctx, st.pgDir, st.pgPort)
	if err != nil {
		return nil, err
	}
	st.children = append(st.children, pg)
	st.pg = pg
	st.databaseURL = "postgres://voucherd@127.0.0.1:" + strconv.Itoa(pgPort) + "/voucherd?sslmode=disable"
	if err := migrateOnce(ctx, st.databaseURL); err != nil {
		return nil, err
	}
	if o.redis == "cluster" {
		if st.cluster, err = testenv.StartRedisCluster(); err != nil {
			return nil, err
		}
		st.redisAddrs = st.cluster.Addrs
		for _, n := range st.cluster.Nodes {
			st.redisPIDs = append(st.redisPIDs, n.PID())
		}
	} else {
		port, err := freeLoopbackPort()
		if err != nil {
			return nil, err
		}
		rd, err := startDevRedis(ctx, filepath.Join(dir, "redis"), port)
		if err != nil {
			return nil, err
		}
		st.children = append(st.children, rd)
		st.redisAddrs = []string{"127.0.0.1:" + strconv.Itoa(port)}
		st.redisPIDs = []int{rd.cmd.Process.Pid}
	}
	// Each instance gets a share of the connections one instance would
	// have, so that PostgreSQL sees as many whatever the instance count.
	pool := max(8, 32/o.instances)
	common := []string{
		"--database-url=" + st.databaseURL, "--redis-addr=" + strings.Join(st.redisAddrs, ","),
		"--reservation-ttl=15m", "--expiry-interval=1s", "--soldout-ttl=1s", "--migrate=false",
		"--shutdown-timeout=10s", "--reconcile-interval=0", "--reconcile-grace=30s", "--log-format=text",
		"--log-level=error", "--db-max-conns=" + strconv.Itoa(pool), "--db-min-conns=" + strconv.Itoa(pool),
		"--voucher-cache-ttl=1s", "--produce-timeout=2s", "--write-timeout=5s",
		"--combine-writes=" + strconv.FormatBool(o.combine),
	}
	if withSync {
		g, err := st.startGroup(ctx, "sync", o.instances, 0, append(slices.Clone(common), "--flash-writes=sync", "--redis-key-prefix=bsync:"))
		if err != nil {
			return nil, err
		}
		g.prefix = "bsync:"
	}
	if !withKafka {
		return st, nil
	}
	ports := make([]int, 2)
	for i := range ports {
		if ports[i], err = freeLoopbackPort(); err != nil {
			return nil, err
		}
	}
	k, err := startDevKafka(ctx, filepath.Join(dir, "kafka"), ports[0], ports[1])
	if err != nil {
		return nil, err
	}
	st.children = append(st.children, k)
	st.kafkaPID = k.cmd.Process.Pid
	st.kafkaBrokers = []string{"127.0.0.1:" + strconv.Itoa(ports[0])}
	kafkaArgs := append(slices.Clone(common), "--flash-writes=kafka", "--redis-key-prefix=bkafka:",
		"--kafka-brokers="+st.kafkaBrokers[0], "--kafka-partitions="+strconv.Itoa(o.parts),
		"--kafka-topic=voucherd.reservations", "--kafka-dlq-topic=voucherd.reservations.dlq",
		"--kafka-group=voucherd-writer")
	g, err := st.startGroup(ctx, "kafka", o.instances, o.consumers, kafkaArgs)
	if err != nil {
		return nil, err
	}
	g.prefix = "bkafka:"
	// A fresh broker creates its group offsets on the consumer's first
	// join; until then "caught up" cannot be told, warm-ups are refused and
	// a sale's first requests answer 503 (63 and 126 of 50,000 in two of
	// six runs before this wait). The benchmark measures the sale, not the
	// broker's first seconds.
	if st.kafkaLog, err = kafkalog.New(kafkalog.Config{Brokers: st.kafkaBrokers, Topic: "voucherd.reservations",
		DeadLetterTopic: "voucherd.reservations.dlq", Group: "voucherd-writer", Partitions: int32(o.parts)}); err != nil {
		return nil, err
	}
	if err = waitCaughtUp(ctx, st.kafkaLog, time.Minute); err != nil {
		return nil, err
	}
	return st, nil
}

// migrateOnce applies the migrations before any instance starts, so that
// the instances need not race for the migration lock.
func migrateOnce(ctx context.Context, databaseURL string) error {
	store, err := pgstore.Open(ctx, pgstore.Config{URL: databaseURL, MaxConns: 2})
	if err != nil {
		return err
	}
	defer store.Close()
	return store.Migrate(ctx)
}

// startGroup starts n voucherd serve processes of one write mode and waits
// until each answers /readyz. With consumers > 0 (Kafka mode) the first
// consumers instances run the consumer inside serve, and consume processes
// make up the rest.
func (s *benchStack) startGroup(ctx context.Context, name string, n, consumers int, args []string) (*instanceGroup, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	g := &instanceGroup{}
	s.groups[name] = g
	for i := range n {
		port, err := freeLoopbackPort()
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		a := append([]string{"serve", "--addr=" + addr, "--consumer=" + strconv.FormatBool(i < consumers)}, args...)
		c, err := s.startVoucherd(fmt.Sprintf("voucherd-%s-%d", name, i), exe, a)
		if err != nil {
			return nil, err
		}
		g.pids = append(g.pids, c.cmd.Process.Pid)
		g.urls = append(g.urls, "http://"+addr)
	}
	for i := n; i < consumers; i++ {
		c, err := s.startVoucherd(fmt.Sprintf("voucherd-%s-consume-%d", name, i), exe, append([]string{"consume"}, args...))
		if err != nil {
			return nil, err
		}
		g.pids = append(g.pids, c.cmd.Process.Pid)
	}
	for i, u := range g.urls {
		logPath := filepath.Join(s.dir, fmt.Sprintf("voucherd-%s-%d.log", name, i))
		if err := s.children[len(s.children)-len(g.pids)+i].waitFor(ctx, logPath, func(ctx context.Context) error {
			return httpReady(ctx, u+"/readyz")
		}); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// instanceProcs returns the GOMAXPROCS of each of the processes voucherd
// processes of a write mode on a machine of cpus CPUs for the
// --instance-procs value flag: flag itself when positive, their share of
// the CPUs (at least 1) for 0, and 0 (Go's default) for -1. Processes
// sharing a machine each with a P per CPU spin and switch more than their
// load needs; a deployment's CPU limit gives each instance its share.
func instanceProcs(flag, cpus, processes int) int {
	switch {
	case flag > 0:
		return flag
	case flag < 0:
		return 0
	}
	return max(1, cpus/max(1, processes))
}

// startVoucherd starts one voucherd process with its output in the stack's
// folder. Its environment has no VOUCHERD_* variables but
// VOUCHERD_KAFKA_LINGER (a producer setting to measure): the flags say
// all. OTEL_* variables pass, so that the servers trace as they would
// serve. GOMAXPROCS is the stack's procs when set.
func (s *benchStack) startVoucherd(name, exe string, args []string) (*child, error) {
	cmd := exec.Command(exe, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VOUCHERD_") || strings.HasPrefix(kv, "VOUCHERD_KAFKA_LINGER=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if s.procs > 0 {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(s.procs)) // the last value of a key wins
	}
	c, err := startCmd(name, filepath.Join(s.dir, name+".log"), cmd)
	if err != nil {
		return nil, err
	}
	s.children = append(s.children, c)
	return c, nil
}

// httpReady succeeds when url answers 200.
func httpReady(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	return nil
}

// waitCaughtUp waits until the consumer group of log has caught up.
func waitCaughtUp(ctx context.Context, log *kafkalog.Log, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		err := log.CaughtUp(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the Kafka consumer did not catch up within %s: %w", limit, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
