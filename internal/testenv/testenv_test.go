package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := testenv.Postgres(t), testenv.Postgres(t)
	require.NotEqual(t, a.Database, b.Database, "each call gets its own database")

	conn, err := pgx.Connect(ctx, a.URL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var one int
	require.NoError(t, conn.QueryRow(ctx, "SELECT 1").Scan(&one))
	require.Equal(t, 1, one)
	var db string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&db))
	require.Equal(t, a.Database, db)
}

func TestNewPostgresStopStartKill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testenv.NewPostgres(t)
	pg := srv.NewDatabase(t)

	exec := func(sql string) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, pg.URL)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	require.NoError(t, exec("CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)"))

	srv.Stop(t)
	require.Error(t, exec("SELECT 1"), "a stopped server refuses connections")
	srv.Start(t)
	require.NoError(t, exec("INSERT INTO kept VALUES (2)"))

	// A connection open across the kill sees the crash; the data survives.
	held, err := pgx.Connect(ctx, pg.URL)
	require.NoError(t, err)
	defer held.Close(ctx)
	srv.Kill(t)
	_, err = held.Exec(ctx, "SELECT 1")
	require.Error(t, err)
	srv.Start(t)

	conn, err := pgx.Connect(ctx, pg.URL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n))
	require.Equal(t, 2, n)
}

func newRedisClient(t *testing.T, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func TestRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newRedisClient(t, testenv.Redis(t).Addr)
	pong, err := c.Do(ctx, c.B().Ping().Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, "PONG", pong)
}

func TestNewRedisStopStartKill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testenv.NewRedis(t)
	addr := srv.Addr
	c := newRedisClient(t, srv.Addr)
	require.NoError(t, c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error())

	srv.Stop(t)
	require.Error(t, c.Do(ctx, c.B().Ping().Build()).Error(), "a stopped server does not answer")
	srv.Start(t)
	require.Equal(t, addr, srv.Addr, "the address survives a restart")
	require.Eventually(t, func() bool {
		return c.Do(ctx, c.B().Ping().Build()).Error() == nil
	}, 10*time.Second, 50*time.Millisecond, "the client reconnects")
	require.True(t, rueidis.IsRedisNil(c.Do(ctx, c.B().Get().Key("k").Build()).Error()), "nothing is persisted")

	srv.Kill(t)
	require.Error(t, c.Do(ctx, c.B().Ping().Build()).Error())
	srv.Start(t)
	require.Eventually(t, func() bool {
		return c.Do(ctx, c.B().Ping().Build()).Error() == nil
	}, 10*time.Second, 50*time.Millisecond)
}

func TestNewRedisCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := testenv.NewRedisCluster(t)
	require.Len(t, cluster.Addrs, 3)

	c := newRedisClient(t, cluster.Addrs[0])
	// Keys spread over all three masters' slots; hash-tagged keys share one.
	for _, k := range []string{"a", "b", "c", "d", "e", "{v}x", "{v}y"} {
		require.NoError(t, c.Do(ctx, c.B().Set().Key(k).Value(k).Build()).Error())
		got, err := c.Do(ctx, c.B().Get().Key(k).Build()).ToString()
		require.NoError(t, err)
		require.Equal(t, k, got)
	}
	require.NoError(t, c.Do(ctx, c.B().Mset().KeyValue().KeyValue("{v}x", "1").KeyValue("{v}y", "2").Build()).Error())

	shards, err := c.Do(ctx, c.B().ClusterShards().Build()).ToArray()
	require.NoError(t, err)
	require.Len(t, shards, 3)
}
