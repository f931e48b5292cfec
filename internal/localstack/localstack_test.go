package localstack

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/kafkaproc"
)

// stackDir returns a folder the servers may use even when they run as
// another user than the test (as postgres does when the test runs as root).
func stackDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	return dir
}

// onFreePorts calls start with n fresh distinct loopback ports until it
// does not fail for a taken port, three times at most: another process may
// take a port between localproc.FreePort and the server's bind. It returns
// start's result and the ports it was given.
func onFreePorts[T any](t *testing.T, n int, start func(ports []int) (T, error)) (T, []int) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(n)
		require.NoError(t, err)
		v, err := start(ports)
		var taken *portTakenError
		if err != nil && errors.As(err, &taken) && attempt < 3 {
			continue
		}
		require.NoError(t, err)
		return v, ports
	}
}

// A developer's PostgreSQL keeps its data across a restart of the server
// and across a new StartPostgres on the same folder, and creates the
// database once.
func TestPostgresKeepsItsData(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := PostgresConfig{Dir: filepath.Join(stackDir(t), "postgres"), Database: "voucherd"}
	pg, ports := onFreePorts(t, 1, func(ports []int) (*Postgres, error) {
		cfg.Port = ports[0]
		return StartPostgres(ctx, cfg)
	})
	port := ports[0]
	t.Cleanup(func() { pg.Stop() })
	require.Equal(t, "postgres://voucherd@127.0.0.1:"+strconv.Itoa(port)+"/voucherd?sslmode=disable", pg.URL)
	require.Positive(t, pg.PID())
	count := func() int {
		t.Helper()
		conn, err := pgx.Connect(ctx, pg.URL)
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS kept AS SELECT 1 AS n")
		require.NoError(t, err)
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*)::int FROM kept").Scan(&n))
		return n
	}
	require.Equal(t, 1, count())

	pg.Stop()
	require.Zero(t, pg.PID())
	require.NoError(t, pg.Start(ctx))
	require.Equal(t, 1, count())

	_, err := StartPostgres(ctx, cfg)
	require.ErrorContains(t, err, "is taken", "the port is the running server's")
	pg.Stop()
	again, err := StartPostgres(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { again.Stop() })
	require.Equal(t, 1, count())
}

// With Port 0 StartPostgres chooses a free port, and its URL names it.
func TestPostgresChoosesPort(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pg, err := StartPostgres(ctx, PostgresConfig{Dir: filepath.Join(stackDir(t), "postgres"), Database: "voucherd"})
	require.NoError(t, err)
	t.Cleanup(func() { pg.Stop() })
	require.Regexp(t, `^postgres://voucherd@127\.0\.0\.1:[1-9][0-9]*/voucherd\?sslmode=disable$`, pg.URL)
	conn, err := pgx.Connect(ctx, pg.URL)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
}

// A taken port is a *portTakenError, which the port-choosing starts retry.
func TestPortTakenError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	err = portFree(ln.Addr().(*net.TCPAddr).Port)
	var taken *portTakenError
	require.ErrorAs(t, err, &taken)
	require.ErrorContains(t, err, "is taken")
}

// With AppendOnly a Redis server has its data back after a restart.
func TestRedisAppendOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r, err := StartRedis(ctx, RedisConfig{Dir: t.TempDir(), AppendOnly: true})
	require.NoError(t, err)
	t.Cleanup(func() { r.Stop() })
	require.Positive(t, r.PID())
	_, err = redisCommand(ctx, r.Addr, "SET", "k", "v")
	require.NoError(t, err)

	require.True(t, r.Stop())
	require.False(t, r.Running())
	require.Error(t, PingRedis(ctx, r.Addr))
	require.NoError(t, r.Start(ctx))
	v, err := redisCommand(ctx, r.Addr, "GET", "k")
	require.NoError(t, err)
	require.Equal(t, "v", v)
}

// A port another process holds fails at once, with a message saying so.
func TestRedisPortTaken(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	_, err = StartRedis(t.Context(), RedisConfig{Dir: t.TempDir(), Port: ln.Addr().(*net.TCPAddr).Port})
	require.ErrorContains(t, err, "is taken")
}

// A Redis Cluster's masters agree the cluster is ok and know each other.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, err := StartRedisCluster(ctx, RedisClusterConfig{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	require.Len(t, c.Addrs, 3)
	require.Len(t, c.Nodes, 3)
	for _, addr := range c.Addrs {
		info, err := redisCommand(ctx, addr, "CLUSTER", "INFO")
		require.NoError(t, err)
		require.Contains(t, info, "cluster_state:ok")
		require.Contains(t, info, "cluster_known_nodes:3")
	}
	c.Stop()
	for _, n := range c.Nodes {
		require.False(t, n.Running())
	}
}

// A broker's ports are both given or both chosen.
func TestKafkaConfigPorts(t *testing.T) {
	t.Parallel()
	for _, cfg := range []KafkaConfig{
		{Dir: t.TempDir(), Port: 9092},
		{Dir: t.TempDir(), ControllerPort: 9093},
		{Dir: t.TempDir(), Port: -1, ControllerPort: -1},
		{Port: 9092, ControllerPort: 9093},
	} {
		_, err := StartKafka(t.Context(), cfg)
		require.ErrorContains(t, err, "KafkaConfig needs Dir", "%+v", cfg)
	}
}

// A broker on ports StartKafka chose answers metadata requests once
// StartKafka returns.
func TestKafka(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	home := os.Getenv("VOUCHERD_KAFKA_HOME")
	k, err := StartKafka(ctx, KafkaConfig{Dir: t.TempDir(), Home: home})
	require.NoError(t, err)
	t.Cleanup(func() { k.Stop() })
	require.Positive(t, k.PID())
	require.NoError(t, kafkaproc.Ready(ctx, k.Addr))
	k.Stop()
	require.Zero(t, k.PID())
}

// A developer's stack starts PostgreSQL and Redis in folders of its own,
// and ResetStack deletes those folders and nothing else.
func TestStackAndReset(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := stackDir(t)
	mine := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(mine, []byte("keep"), 0o644))
	s, ports := onFreePorts(t, 2, func(ports []int) (*Stack, error) {
		return StartStack(ctx, StackConfig{Dir: dir, PostgresPort: ports[0], RedisPort: ports[1]})
	})
	pgPort, redisPort := ports[0], ports[1]
	t.Cleanup(s.Stop)
	require.Equal(t, "postgres://voucherd@127.0.0.1:"+strconv.Itoa(pgPort)+"/voucherd?sslmode=disable", s.DatabaseURL)
	require.Equal(t, []string{"127.0.0.1:" + strconv.Itoa(redisPort)}, s.RedisAddrs)
	require.Empty(t, s.KafkaBrokers)
	require.NoError(t, PingRedis(ctx, s.RedisAddrs[0]))
	conn, err := pgx.Connect(ctx, s.DatabaseURL)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	s.Stop()
	require.Error(t, PingRedis(ctx, s.RedisAddrs[0]))
	require.DirExists(t, filepath.Join(dir, "postgres"))
	require.NoError(t, ResetStack(dir))
	require.NoDirExists(t, filepath.Join(dir, "postgres"))
	require.NoDirExists(t, filepath.Join(dir, "redis"))
	require.FileExists(t, mine)
}
