package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/voucherd/voucherd/internal/localproc"
	"github.com/voucherd/voucherd/internal/localstack"
)

// redisStartTimeout bounds one redis-server start; it is normally instant.
const redisStartTimeout = 30 * time.Second

// RedisServer is a Redis server. Redis returns the one shared by the test
// binary (tests keep to their own key prefix); NewRedis starts a private one
// that a test may stop, kill and start again on the same address.
type RedisServer struct {
	// Addr is the server's "127.0.0.1:port".
	Addr string

	dir string            // temp dir with the log; "" when external or a cluster's node
	srv *localstack.Redis // nil when the server is external
}

// RedisCluster is a Redis Cluster of three masters without replicas, for
// tests of hash-tagged keys and cross-slot rules.
type RedisCluster struct {
	// Addrs lists the masters' "127.0.0.1:port"; any of them is a seed.
	Addrs []string
	// Nodes are the masters, in the order of Addrs, for tests that stop one.
	Nodes []*RedisServer

	dir     string
	cluster *localstack.RedisCluster
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
		sharedRedis.srv, sharedRedis.err = startRedis()
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
	srv, err := startRedis()
	if err != nil {
		t.Fatalf("testenv: private Redis: %v", err)
	}
	t.Cleanup(srv.shutdown)
	return srv
}

// RedisOptions secure a private server of NewRedisWith.
type RedisOptions struct {
	// TLS, when set, makes the server accept TLS connections only, with
	// the server certificate of these Certs (client certificates signed by
	// their CA are checked when given, not required).
	TLS *Certs
	// Users are ACL users, as localstack.RedisConfig.Users; the server's
	// readiness is checked as the first.
	Users [][]string
}

// redisTLS is the server side of opts.TLS, nil without it.
func (opts RedisOptions) redisTLS() *localstack.RedisTLS {
	c := opts.TLS
	if c == nil {
		return nil
	}
	return &localstack.RedisTLS{CertFile: c.ServerCert, KeyFile: c.ServerKey, CAFile: c.CAFile,
		ClientCerts: "optional", Client: &tls.Config{RootCAs: c.Pool, MinVersion: tls.VersionTLS12}}
}

// NewRedisClusterWith is NewRedisCluster with TLS (on the cluster bus
// too) and ACL users on every node.
func NewRedisClusterWith(t testing.TB, opts RedisOptions) *RedisCluster {
	t.Helper()
	c, err := startRedisClusterConfig(localstack.RedisClusterConfig{TLS: opts.redisTLS(), Users: opts.Users})
	if err != nil {
		t.Fatalf("testenv: Redis Cluster: %v", err)
	}
	t.Cleanup(c.shutdown)
	return c
}

// NewRedisWith is NewRedis with TLS and ACL users.
func NewRedisWith(t testing.TB, opts RedisOptions) *RedisServer {
	t.Helper()
	cfg := localstack.RedisConfig{Users: opts.Users, TLS: opts.redisTLS()}
	srv, err := startRedisConfig(cfg)
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

// PID returns the server's process id, 0 when it is not running or not
// ours.
func (s *RedisServer) PID() int {
	if s.srv == nil {
		return 0
	}
	return s.srv.PID()
}

// Stop shuts the server down (SIGTERM); nothing is saved.
func (s *RedisServer) Stop(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "Stop")
	if !s.srv.Stop() {
		t.Logf("testenv: redis-server did not stop within 15s and was killed\n%s", localproc.LogTail(s.srv.LogPath()))
	}
}

// Kill ends the server with SIGKILL, as a crash would.
func (s *RedisServer) Kill(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "Kill")
	s.srv.Kill()
}

// Start starts a stopped or killed server again on the same address and
// waits until it answers PING.
func (s *RedisServer) Start(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "Start")
	if s.srv.Running() {
		t.Fatalf("testenv: RedisServer.Start: redis-server %s is already running", s.Addr)
	}
	// Retry for a while: another process may briefly hold the port.
	deadline := time.Now().Add(redisStartTimeout)
	for {
		err := s.srv.Start(context.Background())
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: restart redis-server %s: %v\nredis-server log %s (last lines):\n%s\n%s",
				s.Addr, err, s.srv.LogPath(), localproc.LogTail(s.srv.LogPath()), installHint)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *RedisServer) mustOwn(t testing.TB, method string) {
	t.Helper()
	if s.srv == nil {
		t.Fatalf("testenv: RedisServer.%s needs a server started by NewRedis, not the shared or an external one", method)
	}
}

// shutdown stops the server and removes its files; for Main and t.Cleanup.
func (s *RedisServer) shutdown() {
	if s.srv == nil {
		return
	}
	s.srv.Stop()
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

func (c *RedisCluster) shutdown() {
	c.cluster.Stop()
	_ = os.RemoveAll(c.dir)
}

func externalRedis(addr string) (*RedisServer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := localstack.PingRedis(ctx, addr); err != nil {
		return nil, fmt.Errorf("VOUCHERD_TEST_REDIS_ADDR %s does not answer PING: %w", addr, err)
	}
	return &RedisServer{Addr: addr}, nil
}

// startRedis starts redis-server on a free port with persistence off, in a
// temp dir of its own that shutdown removes.
func startRedis() (*RedisServer, error) { return startRedisConfig(localstack.RedisConfig{}) }

// startRedisConfig is startRedis with more settings in cfg (its Dir and
// StartTimeout are set here).
func startRedisConfig(cfg localstack.RedisConfig) (*RedisServer, error) {
	dir, err := tempDir("voucherd-redis-")
	if err != nil {
		return nil, err
	}
	cfg.Dir, cfg.StartTimeout = dir, redisStartTimeout
	srv, err := localstack.StartRedis(context.Background(), cfg)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("%w\n%s", err, installHint)
	}
	return &RedisServer{Addr: srv.Addr, dir: dir, srv: srv}, nil
}

// startRedisCluster starts a cluster of three masters (localstack) in a
// temp dir of its own that shutdown removes.
func startRedisCluster() (*RedisCluster, error) {
	return startRedisClusterConfig(localstack.RedisClusterConfig{})
}

// startRedisClusterConfig is startRedisCluster with more settings in cfg
// (its Dir is set here).
func startRedisClusterConfig(cfg localstack.RedisClusterConfig) (*RedisCluster, error) {
	dir, err := tempDir("voucherd-rcluster-")
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	cluster, err := localstack.StartRedisCluster(context.Background(), cfg)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("%w\n%s", err, installHint)
	}
	c := &RedisCluster{Addrs: cluster.Addrs, dir: dir, cluster: cluster}
	for _, n := range cluster.Nodes {
		c.Nodes = append(c.Nodes, &RedisServer{Addr: n.Addr, srv: n})
	}
	return c, nil
}
