package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/voucherd/voucherd/internal/localproc"
)

// redisStartTimeout bounds one redis-server start; it is normally instant.
const redisStartTimeout = 30 * time.Second

// RedisServer is a Redis server. Redis returns the one shared by the test
// binary (tests keep to their own key prefix); NewRedis starts a private one
// that a test may stop, kill and start again on the same address.
type RedisServer struct {
	// Addr is the server's "127.0.0.1:port".
	Addr string

	dir  string             // temp dir with the log (and nodes.conf in a cluster); "" when external
	proc *localproc.Process // nil when the server is external
}

// RedisCluster is a Redis Cluster of three masters without replicas, for
// tests of hash-tagged keys and cross-slot rules.
type RedisCluster struct {
	// Addrs lists the masters' "127.0.0.1:port"; any of them is a seed.
	Addrs []string
	// Nodes are the masters, in the order of Addrs, for tests that stop one.
	Nodes []*RedisServer

	dir string
}

var sharedRedis struct {
	once sync.Once
	srv  *RedisServer
	err  error
}

// Redis returns the Redis server shared by the test binary, starting it on
// first use (or using VOUCHERD_TEST_REDIS_ADDR when set). Tests share its
// keyspace, so each must use its own key prefix.
func Redis(t testing.TB) *RedisServer {
	t.Helper()
	sharedRedis.once.Do(func() {
		if addr := os.Getenv("VOUCHERD_TEST_REDIS_ADDR"); addr != "" {
			sharedRedis.srv, sharedRedis.err = externalRedis(addr)
			return
		}
		sharedRedis.srv, sharedRedis.err = startRedis("", 3, nil)
		if sharedRedis.err == nil {
			registerCleanup(sharedRedis.srv.shutdown)
		}
	})
	if sharedRedis.err != nil {
		t.Fatalf("testenv: shared Redis: %v", sharedRedis.err)
	}
	return sharedRedis.srv
}

// NewRedis starts a Redis server for this test only, removed at the test's
// cleanup. Its address survives Stop, Kill and Start; its data does not
// (persistence is off, as in the shared server).
func NewRedis(t testing.TB) *RedisServer {
	t.Helper()
	srv, err := startRedis("", 3, nil)
	if err != nil {
		t.Fatalf("testenv: private Redis: %v", err)
	}
	t.Cleanup(srv.shutdown)
	return srv
}

// NewRedisCluster starts a Redis Cluster of three masters for this test
// only, and waits until every node reports cluster_state:ok.
func NewRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	c, err := startRedisCluster()
	if err != nil {
		t.Fatalf("testenv: Redis Cluster: %v", err)
	}
	t.Cleanup(c.shutdown)
	return c
}

// StartRedisCluster starts a Redis Cluster of three masters outside any
// test (for `voucherd bench`); the caller must Close it.
func StartRedisCluster() (*RedisCluster, error) { return startRedisCluster() }

// Close stops the masters and removes their files.
func (c *RedisCluster) Close() { c.shutdown() }

// PID returns the server's process id, 0 when it is not running or not
// ours.
func (s *RedisServer) PID() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Stop shuts the server down (SIGTERM); nothing is saved.
func (s *RedisServer) Stop(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "Stop")
	if !s.proc.Stop(syscall.SIGTERM, 10*time.Second) {
		t.Logf("testenv: redis-server did not stop within 10s and was killed\n%s", localproc.LogTail(s.proc.LogPath))
	}
}

// Kill ends the server with SIGKILL, as a crash would.
func (s *RedisServer) Kill(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "Kill")
	s.proc.Kill()
}

// Start starts a stopped or killed server again on the same address and
// waits until it answers PING.
func (s *RedisServer) Start(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "Start")
	if s.proc.Running() {
		t.Fatalf("testenv: RedisServer.Start: redis-server %s is already running", s.Addr)
	}
	// Retry for a while: another process may briefly hold the port.
	deadline := time.Now().Add(redisStartTimeout)
	for {
		err := s.startOnce()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: restart redis-server %s: %s", s.Addr, failure(s.proc, err))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *RedisServer) mustOwn(t testing.TB, method string) {
	t.Helper()
	if s.proc == nil {
		t.Fatalf("testenv: RedisServer.%s needs a server started by NewRedis, not the shared or an external one", method)
	}
}

func (s *RedisServer) startOnce() error {
	if err := s.proc.Start(); err != nil {
		return err
	}
	err := s.proc.WaitReady(context.Background(), redisStartTimeout, func(ctx context.Context) error {
		reply, err := redisCommand(ctx, s.Addr, "PING")
		if err == nil && reply != "PONG" {
			err = fmt.Errorf("PING answered %q", reply)
		}
		return err
	})
	if err != nil {
		s.proc.Kill()
	}
	return err
}

// shutdown stops the server and removes its files; for Main and t.Cleanup.
func (s *RedisServer) shutdown() {
	if s.proc == nil {
		return
	}
	s.proc.Stop(syscall.SIGTERM, 10*time.Second)
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

func (c *RedisCluster) shutdown() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.proc.Stop(syscall.SIGTERM, 10*time.Second)
		}()
	}
	wg.Wait()
	_ = os.RemoveAll(c.dir)
}

func externalRedis(addr string) (*RedisServer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := redisCommand(ctx, addr, "PING"); err != nil {
		return nil, fmt.Errorf("VOUCHERD_TEST_REDIS_ADDR %s does not answer PING: %w", addr, err)
	}
	return &RedisServer{Addr: addr}, nil
}

// startRedis starts redis-server on a free port with persistence off. With
// dir == "" it makes (and shutdown removes) a temp dir of its own. It tries
// up to tries ports in case another process takes the port first.
func startRedis(dir string, tries int, extra func() ([]string, error)) (*RedisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH; %s", installHint)
	}
	ownDir := dir == ""
	if ownDir {
		if dir, err = tempDir("voucherd-redis-"); err != nil {
			return nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		port, err := localproc.FreePort()
		if err != nil {
			return nil, err
		}
		args := []string{
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--dir", dir,
			"--save", "",
			"--appendonly", "no",
			"--protected-mode", "no",
			"--daemonize", "no",
			"--logfile", "",
		}
		if extra != nil {
			more, err := extra()
			if err != nil {
				return nil, err
			}
			args = append(args, more...)
		}
		srv := &RedisServer{
			Addr: fmt.Sprintf("127.0.0.1:%d", port),
			proc: &localproc.Process{
				Name:    "redis-server",
				Path:    bin,
				Args:    args,
				LogPath: filepath.Join(dir, "redis.log"),
			},
		}
		if ownDir {
			srv.dir = dir
		}
		err = srv.startOnce()
		if err == nil {
			return srv, nil
		}
		if attempt < tries && strings.Contains(localproc.LogTail(srv.proc.LogPath), "in use") {
			continue
		}
		msg := failure(srv.proc, err)
		if ownDir {
			_ = os.RemoveAll(dir)
		}
		return nil, errors.New(msg)
	}
}

// startRedisCluster starts three cluster-enabled masters, joins them with
// redis-cli --cluster create and waits until all agree the cluster is ok.
func startRedisCluster() (c *RedisCluster, err error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli not found on PATH; %s", installHint)
	}
	dir, err := tempDir("voucherd-rcluster-")
	if err != nil {
		return nil, err
	}
	c = &RedisCluster{dir: dir}
	defer func() {
		if err != nil {
			c.shutdown()
		}
	}()
	for i := 0; i < 3; i++ {
		nodeDir := filepath.Join(dir, fmt.Sprintf("node%d", i))
		if err := os.Mkdir(nodeDir, 0o755); err != nil {
			return nil, err
		}
		n, err := startRedis(nodeDir, 3, func() ([]string, error) {
			// An explicit bus port: the default (port+10000) may be taken or
			// past 65535 for a port from the ephemeral range.
			bus, err := localproc.FreePort()
			if err != nil {
				return nil, err
			}
			return []string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				"--cluster-port", strconv.Itoa(bus),
				"--cluster-node-timeout", "5000",
			}, nil
		})
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
		c.Addrs = append(c.Addrs, n.Addr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.SysProcAttr = localproc.SysProcAttr(nil)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("redis-cli --cluster create %s: %v\n%s", strings.Join(c.Addrs, " "), err, strings.TrimSpace(string(out)))
	}

	for _, n := range c.Nodes {
		err := n.proc.WaitReady(context.Background(), time.Minute, func(ctx context.Context) error {
			info, err := redisCommand(ctx, n.Addr, "CLUSTER", "INFO")
			if err == nil && !strings.Contains(info, "cluster_state:ok") {
				err = errors.New("cluster_state is not ok yet")
			}
			return err
		})
		if err != nil {
			return nil, errors.New(failure(n.proc, fmt.Errorf("cluster node %s: %w", n.Addr, err)))
		}
	}
	return c, nil
}

// redisCommand sends one command over a new connection and returns a
// simple-string, integer or bulk-string reply; an error reply becomes an
// error. It is all testenv needs (PING, CLUSTER INFO) and keeps this
// package free of a Redis client.
func redisCommand(ctx context.Context, addr string, args ...string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("unexpected reply %q", line)
	}
}
