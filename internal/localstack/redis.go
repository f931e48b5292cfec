package localstack

import (
	"bufio"
	"context"
	"crypto/tls"
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
	"time"

	"github.com/voucherd/voucherd/internal/localproc"
)

// redisPortTries is how many free ports StartRedis tries when the port is
// left to it and another process takes one before redis-server binds it.
const redisPortTries = 3

// RedisConfig says where and how to run one redis-server.
type RedisConfig struct {
	// Dir holds the log (Dir/redis.log) and, with AppendOnly, the data. It
	// is made when missing. Required.
	Dir string
	// Port is the port on 127.0.0.1; 0 picks a free one.
	Port int
	// AppendOnly keeps every write in an append-only file in Dir, so that a
	// server started again on Dir has its data back; without it nothing is
	// written to disk.
	AppendOnly bool
	// Args are more redis-server arguments, given after the ones this
	// package sets.
	Args []string
	// TLS, when set, makes the server accept TLS connections only: Port is
	// its tls-port and the plain port is off.
	TLS *RedisTLS
	// Users are ACL users, each the words of one `user` directive
	// ("alice", "on", ">secret", "~*", "&*", "+@all"); the readiness PING
	// authenticates as the first one (its password is the word after ">").
	// An entry {"default", "off"} makes every client authenticate.
	Users [][]string
	// StartTimeout bounds a start until the server answers PING; 0 means
	// 60s.
	StartTimeout time.Duration
}

// RedisTLS is the TLS of a server started by StartRedis.
type RedisTLS struct {
	// CertFile and KeyFile are the server's certificate and key (PEM).
	CertFile, KeyFile string
	// CAFile holds the certificates that clients' certificates must chain
	// to; Redis needs one even when it asks for no client certificate.
	CAFile string
	// ClientCerts: "no" (the default) asks for none, "optional" checks one
	// when given, "yes" requires one (tls-auth-clients).
	ClientCerts string
	// Client is how the readiness PING connects; it must trust CertFile.
	Client *tls.Config
}

// Redis is a redis-server started by StartRedis.
type Redis struct {
	// Addr is the server's "127.0.0.1:port".
	Addr string

	timeout time.Duration
	proc    *localproc.Process
	// tls, user and password are how ping connects (nil, "" for plain TCP
	// without AUTH).
	tls            *tls.Config
	user, password string
}

// StartRedis starts redis-server and waits until it answers PING. A server
// that does not become ready is killed.
func StartRedis(ctx context.Context, cfg RedisConfig) (*Redis, error) {
	if cfg.Dir == "" {
		return nil, errors.New("localstack: RedisConfig needs Dir")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH; %s", localproc.InstallHint)
	}
	if cfg.Port > 0 {
		if err := portFree(cfg.Port); err != nil {
			return nil, err
		}
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	appendOnly := "no"
	if cfg.AppendOnly {
		appendOnly = "yes"
	}
	for attempt := 1; ; attempt++ {
		port := cfg.Port
		if port == 0 {
			if port, err = localproc.FreePort(); err != nil {
				return nil, err
			}
		}
		listen := []string{"--port", strconv.Itoa(port)}
		if cfg.TLS != nil {
			clientCerts := cfg.TLS.ClientCerts
			if clientCerts == "" {
				clientCerts = "no"
			}
			listen = []string{"--port", "0", "--tls-port", strconv.Itoa(port),
				"--tls-cert-file", cfg.TLS.CertFile, "--tls-key-file", cfg.TLS.KeyFile,
				"--tls-ca-cert-file", cfg.TLS.CAFile, "--tls-auth-clients", clientCerts}
		}
		for _, u := range cfg.Users {
			listen = append(append(listen, "--user"), u...)
		}
		args := append(listen, []string{
			"--bind", "127.0.0.1",
			"--dir", dir,
			"--save", "",
			"--appendonly", appendOnly,
			"--protected-mode", "no",
			"--daemonize", "no",
			"--logfile", "",
		}...)
		args = append(args, cfg.Args...)
		r := &Redis{
			Addr:    "127.0.0.1:" + strconv.Itoa(port),
			timeout: orDefault(cfg.StartTimeout),
			proc:    &localproc.Process{Name: "redis-server", Path: bin, Args: args, LogPath: filepath.Join(dir, "redis.log")},
		}
		if cfg.TLS != nil {
			r.tls = cfg.TLS.Client
		}
		if len(cfg.Users) > 0 {
			r.user = cfg.Users[0][0]
			for _, w := range cfg.Users[0][1:] {
				if strings.HasPrefix(w, ">") {
					r.password = w[1:]
				}
			}
		}
		err := r.Start(ctx)
		if err == nil {
			return r, nil
		}
		if cfg.Port == 0 && attempt < redisPortTries && strings.Contains(localproc.LogTail(r.LogPath()), "in use") {
			continue
		}
		return nil, fmt.Errorf("%w\nredis-server log %s (last lines):\n%s", err, r.LogPath(), localproc.LogTail(r.LogPath()))
	}
}

// Start starts the server again on its address after Stop or Kill, and
// waits until it answers PING; a server that does not is killed. The data
// comes back only with AppendOnly.
func (r *Redis) Start(ctx context.Context) error {
	if err := r.proc.Start(); err != nil {
		return err
	}
	err := r.proc.WaitReady(ctx, r.timeout, r.ping)
	if err != nil {
		r.proc.Kill()
	}
	return err
}

// Stop shuts the server down (SIGTERM) and waits for it; it is killed after
// 15 s. It returns false when it had to be killed.
func (r *Redis) Stop() bool { return r.proc.Stop(syscall.SIGTERM, stopGrace) }

// Kill ends the server with SIGKILL, as a crash would.
func (r *Redis) Kill() { r.proc.Kill() }

// Running reports whether the server process is running.
func (r *Redis) Running() bool { return r.proc.Running() }

// PID returns the server's process id, 0 when it is not running.
func (r *Redis) PID() int { return r.proc.PID() }

// LogPath returns the server's log file.
func (r *Redis) LogPath() string { return r.proc.LogPath }

// RedisClusterConfig says where to run a Redis Cluster.
type RedisClusterConfig struct {
	// Dir holds one folder per master (node0, node1, ...), each with its
	// log and the node's cluster configuration. Required.
	Dir string
	// Masters is the number of masters, without replicas; 0 means 3.
	Masters int
	// TLS and Users secure every node as RedisConfig's do; with TLS the
	// cluster bus uses TLS too (tls-cluster), each node showing its
	// certificate to the others, so the certificate must also be valid for
	// client authentication.
	TLS   *RedisTLS
	Users [][]string
}

// RedisCluster is a Redis Cluster started by StartRedisCluster: masters
// without replicas, on free ports, nothing kept on disk but the cluster
// configuration.
type RedisCluster struct {
	// Addrs lists the masters' "127.0.0.1:port"; any of them is a seed.
	Addrs []string
	// Nodes are the masters, in the order of Addrs.
	Nodes []*Redis
}

// StartRedisCluster starts cluster-enabled masters, joins them with
// redis-cli --cluster create (which spreads the slots over them) and waits
// until every node reports cluster_state:ok. On failure it stops the nodes
// it started.
func StartRedisCluster(ctx context.Context, cfg RedisClusterConfig) (c *RedisCluster, err error) {
	if cfg.Dir == "" {
		return nil, errors.New("localstack: RedisClusterConfig needs Dir")
	}
	if cfg.Masters == 0 {
		cfg.Masters = 3
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli not found on PATH; %s", localproc.InstallHint)
	}
	c = &RedisCluster{}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	for i := range cfg.Masters {
		// An explicit bus port: the default (port+10000) may be taken or
		// past 65535 for a port from the ephemeral range.
		bus, err := localproc.FreePort()
		if err != nil {
			return nil, err
		}
		args := []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-node-timeout", "5000",
		}
		if cfg.TLS != nil {
			args = append(args, "--tls-cluster", "yes")
		}
		n, err := StartRedis(ctx, RedisConfig{Dir: filepath.Join(cfg.Dir, fmt.Sprintf("node%d", i)), Args: args,
			TLS: cfg.TLS, Users: cfg.Users})
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
		c.Addrs = append(c.Addrs, n.Addr)
	}

	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if cfg.TLS != nil {
		args = append(args, "--tls", "--cacert", cfg.TLS.CAFile)
	}
	if n := c.Nodes[0]; n.user != "" {
		// redis-cli reads the password from REDISCLI_AUTH, out of the
		// process listing.
		args = append(args, "--user", n.user)
	}
	cmd := exec.CommandContext(cctx, cli, args...)
	cmd.SysProcAttr = localproc.SysProcAttr(nil)
	if n := c.Nodes[0]; n.user != "" {
		cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+n.password)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("redis-cli --cluster create %s: %v\n%s", strings.Join(c.Addrs, " "), err, strings.TrimSpace(string(out)))
	}

	for _, n := range c.Nodes {
		err := n.proc.WaitReady(ctx, time.Minute, func(ctx context.Context) error {
			info, err := n.command(ctx, "CLUSTER", "INFO")
			if err == nil && !strings.Contains(info, "cluster_state:ok") {
				err = errors.New("cluster_state is not ok yet")
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("cluster node %s: %w\nredis-server log %s (last lines):\n%s", n.Addr, err, n.LogPath(), localproc.LogTail(n.LogPath()))
		}
	}
	return c, nil
}

// Stop stops every master at once (each as Redis.Stop). Their folders
// stay.
func (c *RedisCluster) Stop() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(func() { n.Stop() })
	}
	wg.Wait()
}

// PingRedis succeeds when the Redis server at addr answers PING with PONG.
func PingRedis(ctx context.Context, addr string) error {
	reply, err := redisCommand(ctx, addr, "PING")
	if err == nil && reply != "PONG" {
		err = fmt.Errorf("PING answered %q", reply)
	}
	return err
}

// ping is PingRedis over the server's TLS and as its first user.
func (r *Redis) ping(ctx context.Context) error {
	reply, err := r.command(ctx, "PING")
	if err == nil && reply != "PONG" {
		err = fmt.Errorf("PING answered %q", reply)
	}
	return err
}

// command is redisCommand over the server's TLS and as its first user.
func (r *Redis) command(ctx context.Context, args ...string) (string, error) {
	conn, err := dialRedis(ctx, r.Addr, r.tls)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if r.user != "" {
		if _, err := roundTrip(conn, "AUTH", r.user, r.password); err != nil {
			return "", err
		}
	}
	return roundTrip(conn, args...)
}

// dialRedis opens a connection that ends with ctx's deadline, with TLS
// when tlsConfig is not nil.
func dialRedis(ctx context.Context, addr string, tlsConfig *tls.Config) (net.Conn, error) {
	var conn net.Conn
	var err error
	if tlsConfig != nil {
		d := tls.Dialer{Config: tlsConfig}
		conn, err = d.DialContext(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	return conn, nil
}

// redisCommand sends one command over a new connection and returns a
// simple-string, integer or bulk-string reply; an error reply becomes an
// error. It is all starting a server needs (PING, CLUSTER INFO) and keeps
// this package free of a Redis client.
func redisCommand(ctx context.Context, addr string, args ...string) (string, error) {
	conn, err := dialRedis(ctx, addr, nil)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return roundTrip(conn, args...)
}

// roundTrip sends one command on conn and reads its reply, as redisCommand.
func roundTrip(conn net.Conn, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	// One reader per command is enough: Redis answers nothing unasked, so
	// no byte of the next reply is buffered away.
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
