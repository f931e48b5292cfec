package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/voucherd/voucherd/internal/kafkaproc"
	"github.com/voucherd/voucherd/internal/localproc"
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
		// Only the folders dev itself creates, whatever --dir points at.
		for _, sub := range []string{"postgres", "redis", "kafka"} {
			if err := os.RemoveAll(filepath.Join(abs, sub)); err != nil {
				return fmt.Errorf("--reset: %w", err)
			}
		}
		fmt.Fprintf(stdout, "voucherd dev: --reset deleted the data of earlier runs in %s\n", abs)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "voucherd dev: data and logs in %s\n", abs)

	var children []*child
	defer func() {
		for i := len(children) - 1; i >= 0; i-- {
			children[i].stop()
		}
	}()
	pg, err := startDevPostgres(ctx, filepath.Join(abs, "postgres"), *pgPort)
	if err != nil {
		return err
	}
	children = append(children, pg)
	redis, err := startDevRedis(ctx, filepath.Join(abs, "redis"), *redisPort)
	if err != nil {
		return err
	}
	children = append(children, redis)
	cfg.DatabaseURL = fmt.Sprintf("postgres://voucherd@127.0.0.1:%d/voucherd?sslmode=disable", *pgPort)
	cfg.RedisAddrs = []string{fmt.Sprintf("127.0.0.1:%d", *redisPort)}
	if *withKafka {
		k, err := startDevKafka(ctx, filepath.Join(abs, "kafka"), *kafkaPort, *kafkaPort+1)
		if err != nil {
			return err
		}
		children = append(children, k)
		cfg.FlashWrites = "kafka"
		cfg.KafkaBrokers = []string{fmt.Sprintf("127.0.0.1:%d", *kafkaPort)}
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

// child is a server process started by dev.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (c *child) stop() { c.signal(syscall.SIGTERM) }

// signal sends sig to the child and waits until it exits (killed after 15s).
func (c *child) signal(sig syscall.Signal) {
	if c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(sig)
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// startChild starts a server with its output in logPath, tied to our life.
func startChild(name, logPath string, cred *syscall.Credential, path string, args ...string) (*child, error) {
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = localproc.SysProcAttr(cred)
	return startCmd(name, logPath, cmd)
}

func startCmd(name, logPath string, cmd *exec.Cmd) (*child, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() //nolint:errcheck // the child writes through its own descriptor; ours is only released
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = localproc.SysProcAttr(nil)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	return c, nil
}

// waitFor polls ready until it succeeds, the child exits or 60 s pass.
func (c *child) waitFor(ctx context.Context, logPath string, ready func(context.Context) error) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		err := ready(rctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("%s exited at start; see %s", c.name, logPath)
		case <-ctx.Done():
			c.stop()
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.stop()
			return fmt.Errorf("%s not ready after 60s (%v); see %s", c.name, err, logPath)
		}
	}
}

func portFree(port int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return fmt.Errorf("port %d is taken (another voucherd dev still running?): %w", port, err)
	}
	return ln.Close()
}

func startDevPostgres(ctx context.Context, dir string, port int) (*child, error) {
	initdb, postgres, err := localproc.FindPostgres()
	if err != nil {
		return nil, err
	}
	if err := portFree(port); err != nil {
		return nil, err
	}
	cred, err := localproc.ServerCredential()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "postgres.log")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		cmd := exec.Command(initdb, "-D", data, "-U", "voucherd", "-A", "trust", "-E", "UTF8", "--no-sync")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("initdb: %v\n%s", err, out)
		}
	}
	c, err := startChild("postgres", logPath, cred, postgres, "-D", data, "-p", strconv.Itoa(port),
		"-k", dir, "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200")
	if err != nil {
		return nil, err
	}
	admin := fmt.Sprintf("postgres://voucherd@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := c.waitFor(ctx, logPath, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'voucherd')").Scan(&exists); err != nil {
			return err
		}
		if !exists {
			_, err = conn.Exec(ctx, "CREATE DATABASE voucherd")
		}
		return err
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func startDevRedis(ctx context.Context, dir string, port int) (*child, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH; %s", localproc.InstallHint)
	}
	if err := portFree(port); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "redis.log")
	c, err := startChild("redis", logPath, nil, path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--appendonly", "yes", "--save", "")
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := c.waitFor(ctx, logPath, func(ctx context.Context) error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(time.Second))
		if _, err := conn.Write([]byte("PING\r\n")); err != nil {
			return err
		}
		buf := make([]byte, 7)
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "+PONG\r\n" {
			return fmt.Errorf("redis not answering PING yet")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func startDevKafka(ctx context.Context, dir string, port, controllerPort int) (*child, error) {
	home, err := kafkaproc.DefaultHome()
	if err != nil {
		return nil, err
	}
	if !kafkaproc.Installed(home) {
		return nil, fmt.Errorf("Kafka is not fetched yet: %s", kafkaproc.FetchHint)
	}
	if err := portFree(port); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "kafka.log")
	cmd, err := kafkaproc.Command(ctx, kafkaproc.Config{Dir: dir, Port: port, ControllerPort: controllerPort, Home: home})
	if err != nil {
		return nil, err
	}
	c, err := startCmd("kafka", logPath, cmd)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := c.waitFor(ctx, logPath, func(ctx context.Context) error { return kafkaproc.Ready(ctx, addr) }); err != nil {
		return nil, err
	}
	return c, nil
}
