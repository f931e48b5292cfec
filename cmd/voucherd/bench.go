package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/voucherd/voucherd/internal/bench"
	"github.com/voucherd/voucherd/internal/kafkalog"
)

// runBench sends a flash-sale workload to a running voucherd (--url) or to a
// stack it starts itself, then verifies the invariants. It exits non-zero
// when an invariant is broken.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg bench.Config
	fs := newFlagSet("bench", "", stderr)
	url := fs.String("url", "", "voucherd to load; empty starts a stack (PostgreSQL, Redis, Kafka with --compare or --mode flash-kafka) in a temporary folder")
	fs.StringVar(&cfg.APIToken, "api-token", os.Getenv("VOUCHERD_API_TOKEN"), "API token (VOUCHERD_API_TOKEN)")
	fs.StringVar(&cfg.AdminToken, "admin-token", os.Getenv("VOUCHERD_ADMIN_TOKEN"), "admin token (VOUCHERD_ADMIN_TOKEN)")
	mode := fs.String("mode", "flash-sync", "with a started stack: standard, flash-sync or flash-kafka; with --url: standard or flash (the server decides sync or kafka)")
	compare := fs.Bool("compare", false, "run the workload against the no-op route and in standard, flash-sync and flash-kafka mode, and compare")
	noop := fs.Bool("noop", false, "load GET /healthz instead of reserving (the ceiling of the HTTP stack)")
	total := fs.Int("total", 1000, "uses per voucher (totalLimit)")
	perUser := fs.Int("per-user", 1, "perUserLimit")
	fs.IntVar(&cfg.Vouchers, "vouchers", 1, "vouchers to create; traffic is spread uniformly across them")
	fs.Int64Var(&cfg.Customers, "customers", 50000, "distinct customers")
	fs.Float64Var(&cfg.RetryShare, "retry-share", 0.05, "share of requests that retry an earlier orderId")
	fs.Float64Var(&cfg.RepeatShare, "repeat-share", 0, "share of requests from an already-seen customer with a new orderId")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open-loop requests per second (latency from the scheduled send time); 0 runs closed-loop")
	fs.IntVar(&cfg.Concurrency, "concurrency", 64, "connections (closed loop) or most requests in flight (open loop)")
	fs.Int64Var(&cfg.Requests, "requests", 50000, "requests to send")
	fs.DurationVar(&cfg.Duration, "duration", 0, "stop after this long instead of a count")
	fs.DurationVar(&cfg.MaxDuration, "max-duration", 2*time.Minute, "hard bound on sending")
	fs.DurationVar(&cfg.Warmup, "warmup", 0, "leave the requests of the run's first this long out of the latency figures (they are still sent and verified)")
	seed := fs.Uint64("seed", 0, "workload seed; 0 picks one")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	quiet := fs.Bool("quiet", false, "no progress bar")
	dbURL := fs.String("database-url", os.Getenv("VOUCHERD_DATABASE_URL"), "with --url: the server's PostgreSQL, to verify the invariants")
	var redisAddrs []string
	fs.Var(listFlag{&redisAddrs}, "redis-addr", "with --url: the server's Redis, to verify remaining counts")
	prefix := fs.String("redis-key-prefix", os.Getenv("VOUCHERD_REDIS_KEY_PREFIX"), "with --url: the server's Redis key prefix")
	combine := fs.Bool("combine-writes", true, "with a started stack: combine concurrent PostgreSQL reservations of one voucher into one transaction")
	kafkaWarmup := fs.Duration("kafka-warmup", 15*time.Second, "with a started stack that runs Kafka mode: reserve on a throwaway voucher of the Kafka-mode server for this long first, so that the figures are of a warm broker (reported apart); 0 skips")
	pgOutage := fs.Duration("pg-outage", 0, "with a started stack: run flash-sync and flash-kafka side by side and stop PostgreSQL for this long in the middle (see --pg-outage-at)")
	pgOutageAt := fs.Duration("pg-outage-at", 5*time.Second, "with --pg-outage: how long into the run PostgreSQL is stopped")
	otlp := fs.Bool("otlp-sink", false, "with a started stack and OTEL_TRACES_EXPORTER=otlp: export the servers' spans to an OTLP/HTTP endpoint in this process that discards them (the cost of tracing)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (load generator and, with a started stack, the servers) to this file")
	if err := fs.Parse(args); err != nil {
		return err
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
	if *url != "" {
		cfg.BaseURL = *url
		cfg.FlashSale = *mode != "standard"
		cfg.Verify = bench.VerifyConfig{DatabaseURL: *dbURL, RedisAddrs: redisAddrs, KeyPrefix: *prefix}
		targets = []bench.Target{{Name: *mode, BaseURL: *url, FlashSale: cfg.FlashSale}}
	} else {
		if *otlp {
			sink, err := startOTLPSink()
			if err != nil {
				return err
			}
			defer sink.close(stderr)
			if err := sink.useForTraces(); err != nil {
				return err
			}
		}
		wantKafka := *compare || *mode == "flash-kafka" || *pgOutage > 0
		st, err := startBenchStack(ctx, stderr, wantKafka, *combine)
		if err != nil {
			return err
		}
		defer st.close()
		cfg.APIToken, cfg.AdminToken = "", ""
		if wantKafka && *kafkaWarmup > 0 {
			fmt.Fprintf(stderr, "voucherd bench: warming the Kafka path up for %s\n", *kafkaWarmup)
			if err := warmKafka(ctx, stdout, cfg, st, *kafkaWarmup); err != nil {
				return err
			}
		}
		if *pgOutage > 0 {
			return runPGOutage(ctx, stdout, stderr, cfg, st, *pgOutageAt, *pgOutage)
		}
		if wantKafka {
			before := stages(st.kafka.metrics)
			defer func() { fmt.Fprintln(stdout); writeStages(stdout, "flash-kafka", before, stages(st.kafka.metrics)) }()
		}
		cfg.Verify = bench.VerifyConfig{DatabaseURL: st.databaseURL, RedisAddrs: st.redisAddrs}
		syncTarget := func(name string, flash bool) bench.Target {
			return bench.Target{Name: name, BaseURL: "http://" + st.sync.Addr(), FlashSale: flash,
				Verify: &bench.VerifyConfig{DatabaseURL: st.databaseURL, RedisAddrs: st.redisAddrs, KeyPrefix: st.syncPrefix, Wait: -1}}
		}
		kafkaTarget := func() bench.Target {
			return bench.Target{Name: "flash-kafka", BaseURL: "http://" + st.kafka.Addr(), FlashSale: true,
				Verify: &bench.VerifyConfig{DatabaseURL: st.databaseURL, RedisAddrs: st.redisAddrs, KeyPrefix: st.kafkaPrefix, Wait: time.Minute}}
		}
		switch {
		case *compare:
			targets = []bench.Target{syncTarget("standard", false), syncTarget("flash-sync", true), kafkaTarget()}
		case *mode == "standard":
			targets = []bench.Target{syncTarget("standard", false)}
		case *mode == "flash-sync":
			targets = []bench.Target{syncTarget("flash-sync", true)}
		case *mode == "flash-kafka":
			targets = []bench.Target{kafkaTarget()}
		default:
			return fmt.Errorf("--mode must be standard, flash-sync or flash-kafka, not %q", *mode)
		}
	}

	if *compare {
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
		for _, r := range cmp.Reports {
			if !r.OK() {
				return exitError(2)
			}
		}
		return nil
	}
	t := targets[0]
	cfg.Name, cfg.BaseURL, cfg.FlashSale = t.Name, t.BaseURL, t.FlashSale
	if t.Verify != nil {
		cfg.Verify = *t.Verify
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		return err
	}
	if !rep.OK() {
		fmt.Fprintln(stderr, "voucherd bench: invariants broken:")
		for _, v := range rep.Violations() {
			fmt.Fprintln(stderr, "  -", v)
		}
		return exitError(2)
	}
	return nil
}

// benchStack is PostgreSQL, Redis (and Kafka) started for a bench run, with
// one voucherd in sync mode and, when asked, one in Kafka mode, both in this
// process.
type benchStack struct {
	dir                     string
	children                []*child
	pg                      *child // also in children
	pgDir                   string
	pgPort                  int
	databaseURL             string
	redisAddrs              []string
	sync, kafka             *App
	syncPrefix, kafkaPrefix string
}

func (s *benchStack) close() {
	for _, a := range []*App{s.sync, s.kafka} {
		if a != nil {
			_ = a.Close()
		}
	}
	for i := len(s.children) - 1; i >= 0; i-- {
		s.children[i].stop()
	}
	_ = os.RemoveAll(s.dir)
}

func freeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func startBenchStack(ctx context.Context, stderr io.Writer, withKafka, combine bool) (_ *benchStack, err error) {
	dir, err := os.MkdirTemp("", "voucherd-bench-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	st := &benchStack{dir: dir}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	ports := make([]int, 4)
	for i := range ports {
		if ports[i], err = freeLoopbackPort(); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(stderr, "voucherd bench: starting PostgreSQL (durable commits), Redis%s in %s\n",
		map[bool]string{true: " and Kafka", false: ""}[withKafka], dir)
	st.pgDir, st.pgPort = filepath.Join(dir, "postgres"), ports[0]
	pg, err := startDevPostgres(ctx, st.pgDir, st.pgPort)
	if err != nil {
		return nil, err
	}
	st.children = append(st.children, pg)
	st.pg = pg
	rd, err := startDevRedis(ctx, filepath.Join(dir, "redis"), ports[1])
	if err != nil {
		return nil, err
	}
	st.children = append(st.children, rd)
	st.databaseURL = "postgres://voucherd@127.0.0.1:" + strconv.Itoa(ports[0]) + "/voucherd?sslmode=disable"
	st.redisAddrs = []string{"127.0.0.1:" + strconv.Itoa(ports[1])}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	base := Config{
		Addr: "127.0.0.1:0", DatabaseURL: st.databaseURL, RedisAddrs: st.redisAddrs,
		ReservationTTL: 15 * time.Minute, ExpiryInterval: time.Second, FlashWrites: "sync",
		SoldOutTTL: time.Second, MigrateOnStart: true, ShutdownTimeout: 10 * time.Second,
		ReconcileEvery: 0, ReconcileGrace: 30 * time.Second, LogFormat: "text", LogLevel: "error",
		MaxDBConns: 32, MinDBConns: 32, VoucherCacheTTL: time.Second, ProduceTimeout: 2 * time.Second,
		WriteTimeout: 5 * time.Second, KafkaPartitions: 3, RunConsumer: true, CombineWrites: combine,
	}
	// The OTEL_* variables trace the started servers as they would serve.
	if base.Tracing, err = tracingFromEnv(os.Getenv); err != nil {
		return nil, err
	}
	syncCfg := base
	syncCfg.RedisKeyPrefix, st.syncPrefix = "bsync:", "bsync:"
	if st.sync, err = NewApp(ctx, syncCfg, log); err != nil {
		return nil, err
	}
	if err = st.sync.Start(ctx); err != nil {
		return nil, err
	}
	if !withKafka {
		return st, nil
	}
	k, err := startDevKafka(ctx, filepath.Join(dir, "kafka"), ports[2], ports[3])
	if err != nil {
		return nil, err
	}
	st.children = append(st.children, k)
	kcfg := base
	kcfg.FlashWrites = "kafka"
	if v := os.Getenv("VOUCHERD_KAFKA_LINGER"); v != "" {
		if kcfg.KafkaLinger, err = time.ParseDuration(v); err != nil {
			return nil, fmt.Errorf("VOUCHERD_KAFKA_LINGER: %w", err)
		}
	}
	kcfg.KafkaBrokers = []string{"127.0.0.1:" + strconv.Itoa(ports[2])}
	kcfg.KafkaTopic, kcfg.KafkaDLQTopic, kcfg.KafkaGroup = "voucherd.reservations", "voucherd.reservations.dlq", "voucherd-writer"
	kcfg.RedisKeyPrefix, st.kafkaPrefix = "bkafka:", "bkafka:"
	kcfg.MigrateOnStart = false
	if st.kafka, err = NewApp(ctx, kcfg, log); err != nil {
		return nil, err
	}
	if err = st.kafka.Start(ctx); err != nil {
		return nil, err
	}
	// A fresh broker creates its group offsets on the consumer's first
	// join; until then "caught up" cannot be told, warm-ups are refused and
	// a sale's first requests answer 503 (63 and 126 of 50,000 in two of
	// six runs before this wait). The benchmark measures the sale, not the
	// broker's first seconds.
	if err = waitCaughtUp(ctx, st.kafka.kafka.log, time.Minute); err != nil {
		return nil, err
	}
	return st, nil
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
