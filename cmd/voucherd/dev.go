package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/voucherd/voucherd/internal/localstack"
)

// runDev starts PostgreSQL and Redis (and Kafka with --kafka) as children
// with their data under one folder, migrates and serves: the embedded
// default for a first run.
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	fs := newFlagSet("dev", "", stderr)
	// dev runs its own PostgreSQL and Redis (and Kafka with --kafka) and
	// always migrates, so their flags are left out; it logs text for humans
	// unless VOUCHERD_LOG_FORMAT or --log-format says otherwise.
	registerServeFlagsExcept(fs, &cfg, "database-url", "redis-addr", "migrate", "flash-writes", "kafka-brokers")
	if os.Getenv("VOUCHERD_LOG_FORMAT") == "" {
		cfg.LogFormat = "text"
		fs.Lookup("log-format").DefValue = "text"
	}
	dir := fs.String("dir", ".voucherd-dev", "folder for the data and logs of the child servers")
	pgPort := fs.Int("pg-port", 55432, "PostgreSQL port on 127.0.0.1")
	redisPort := fs.Int("redis-port", 56379, "Redis port on 127.0.0.1")
	withKafka := fs.Bool("kafka", false, "also start a single-node Kafka broker and serve in Kafka write mode")
	reset := fs.Bool("reset", false, "delete the data of earlier runs (the postgres, redis and kafka folders under --dir) before starting")
	kafkaPort := fs.Int("kafka-port", 59092, "Kafka port on 127.0.0.1 (the controller uses the next one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	if *reset {
		if err := localstack.ResetStack(abs); err != nil {
			return fmt.Errorf("--reset: %w", err)
		}
		fmt.Fprintf(stdout, "voucherd dev: --reset deleted the data of earlier runs in %s\n", abs)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "voucherd dev: data and logs in %s\n", abs)
	stack, err := localstack.StartStack(ctx, localstack.StackConfig{Dir: abs, PostgresPort: *pgPort, RedisPort: *redisPort,
		Kafka: *withKafka, KafkaPort: *kafkaPort})
	if err != nil {
		return err
	}
	defer stack.Stop()
	cfg.DatabaseURL, cfg.RedisAddrs = stack.DatabaseURL, stack.RedisAddrs
	if *withKafka {
		cfg.FlashWrites, cfg.KafkaBrokers = "kafka", stack.KafkaBrokers
	}
	cfg.MigrateOnStart = true
	log, err := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return err
	}
	app, err := NewApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	if err := app.Start(ctx); err != nil {
		_ = app.Close() // the start's error is the one to report
		return err
	}
	printDevBanner(stdout, app.Addr(), cfg)
	werr := app.Wait(ctx)
	cerr := app.Close()
	return errors.Join(werr, cerr)
}

// printDevBanner prints how to try the server. The example's voucher code
// is new on every start, so that it can be pasted again after a restart on
// the same data; the README's examples make new names on every run.
func printDevBanner(w io.Writer, addr string, cfg Config) {
	auth := ""
	if cfg.AdminToken != "" {
		auth = ` -H "Authorization: Bearer $VOUCHERD_ADMIN_TOKEN"`
	}
	api := ""
	if cfg.APIToken != "" {
		api = ` -H "Authorization: Bearer $VOUCHERD_API_TOKEN"`
	}
	now := time.Now().UTC()
	start := now.Add(-time.Minute).Format(time.RFC3339)
	end := now.Add(30 * 24 * time.Hour).Format(time.RFC3339)
	code := fmt.Sprintf("FLASH-%d", now.Unix())
	fmt.Fprintf(w, `
voucherd is serving on http://%[1]s (flash writes: %[2]s). Try:

  curl -s -w '\n' -XPOST http://%[1]s/vouchers%[3]s -H 'Content-Type: application/json' \
    -d '{"code":"%[7]s","discountAmount":100000,"totalLimit":1000,"perUserLimit":1,"startsAt":"%[5]s","endsAt":"%[6]s","flashSale":true}'
  curl -s -w '\n' -XPOST http://%[1]s/vouchers/%[7]s/reservations%[4]s -H 'Content-Type: application/json' \
    -d '{"customerId":42,"orderId":"order-42","orderAmount":250000}'
  curl -s -w '\n' http://%[1]s/vouchers/%[7]s%[4]s

More in README.md (The API). Data stays in the --dir folder; --reset starts over.
Ctrl-C stops voucherd and its PostgreSQL, Redis and Kafka.
`, addr, cfg.FlashWrites, auth, api, start, end, code)
}
