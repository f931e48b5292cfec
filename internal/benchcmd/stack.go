package benchcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/voucherd/voucherd/internal/bench"
	"github.com/voucherd/voucherd/internal/kafkalog"
	"github.com/voucherd/voucherd/internal/localproc"
	"github.com/voucherd/voucherd/internal/localstack"
	"github.com/voucherd/voucherd/internal/pgstore"
)

// stack is PostgreSQL, Redis (one node or a Cluster) and, for Kafka
// mode, a broker, started for a bench run, with voucherd serve processes:
// one group of instances in sync mode and one in Kafka mode, as the modes
// to run need. Each group has its own Redis key prefix; both share the
// database (every run creates fresh vouchers).
type stack struct {
	dir          string
	exe          string   // the voucherd binary
	env          []string // the voucherd processes' environment
	pg           *localstack.Postgres
	redis        *localstack.Redis        // nil with a cluster
	cluster      *localstack.RedisCluster // nil with one Redis
	kafka        *localstack.Kafka        // nil without Kafka mode
	voucherds    []*localproc.Process     // serve and consume processes, in start order
	databaseURL  string
	redisAddrs   []string
	kafkaBrokers []string
	redisPIDs    []int
	groups       map[string]*instanceGroup // "sync", "kafka"
	// procs is the GOMAXPROCS of every voucherd process, 0 for Go's default.
	procs int
	// kafkaLog reads the writer group's lag (Kafka mode).
	kafkaLog *kafkalog.Log
	// keepLogs is StackOptions.KeepLogs.
	keepLogs string
}

// instanceGroup is the voucherd processes of one write mode.
type instanceGroup struct {
	prefix string
	urls   []string
	pids   []int // serve and consume processes
}

// voucherdStopGrace is how long a voucherd process may take to shut down
// before it is killed.
const voucherdStopGrace = 15 * time.Second

func (s *stack) close() {
	if s.kafkaLog != nil {
		s.kafkaLog.Close()
	}
	// voucherd first, then the services under it.
	for i := len(s.voucherds) - 1; i >= 0; i-- {
		s.voucherds[i].Stop(syscall.SIGTERM, voucherdStopGrace)
	}
	if s.kafka != nil {
		s.kafka.Stop()
	}
	if s.redis != nil {
		s.redis.Stop()
	}
	if s.cluster != nil {
		s.cluster.Stop()
	}
	if s.pg != nil {
		s.pg.Stop()
	}
	if s.keepLogs != "" {
		if err := copyLogs(s.dir, s.keepLogs); err != nil {
			fmt.Fprintf(os.Stderr, "voucherd bench: the stack's logs not kept: %v\n", err)
		}
	}
	_ = os.RemoveAll(s.dir)
}

// copyLogs copies every *.log file under dir into the folder to (made if
// missing), each named by its path under dir with "-" for "/".
func copyLogs(dir, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path) //nolint:gosec // a file of the stack's own folder
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, strings.ReplaceAll(rel, string(filepath.Separator), "-")), b, 0o644) //nolint:gosec // logs for the operator to read
	})
}

// target is the bench target of one mode on the stack, with the processes
// whose CPU time counts for it.
func (s *stack) target(mode string) bench.Target {
	g, wait, kafka := s.groups["sync"], time.Duration(-1), false
	if mode == "flash-kafka" {
		g, wait, kafka = s.groups["kafka"], time.Minute, true
	}
	cpu := []bench.Component{
		{Name: "voucherd", PIDs: g.pids},
		{Name: "redis", PIDs: s.redisPIDs},
		{Name: "postgresql", PIDs: []int{s.pg.PID()}},
	}
	if kafka {
		cpu = append(cpu, bench.Component{Name: "kafka", PIDs: []int{s.kafka.PID()}})
	}
	return bench.Target{Name: mode, BaseURLs: g.urls, FlashSale: mode != "standard", CPU: cpu,
		Verify: &bench.VerifyConfig{DatabaseURL: s.databaseURL, RedisAddrs: s.redisAddrs, KeyPrefix: g.prefix, Wait: wait}}
}

// defaults fills in the zero values and checks the rest.
func (o *StackOptions) defaults() error {
	if o.Instances == 0 {
		o.Instances = 1
	}
	if o.Redis == "" {
		o.Redis = "single"
	}
	if o.KafkaPartitions == 0 {
		o.KafkaPartitions = 3
	}
	if o.Consumers == 0 {
		o.Consumers = 1
	}
	switch {
	case o.Executable == "":
		return errors.New("benchcmd: StackOptions.Executable is required")
	case o.Instances < 1:
		return errors.New("--instances must be at least 1")
	case o.Redis != "single" && o.Redis != "cluster":
		return fmt.Errorf("--redis must be single or cluster, not %q", o.Redis)
	case o.KafkaPartitions > math.MaxInt32:
		return fmt.Errorf("--kafka-partitions must be at most %d", math.MaxInt32)
	case o.KafkaPartitions < 1 || o.Consumers < 1:
		return errors.New("--kafka-partitions and --consumers must be at least 1")
	}
	return nil
}

// startStack starts the servers and the voucherd processes that modes
// need, reporting what it starts on stderr.
func startStack(ctx context.Context, stderr io.Writer, o StackOptions, modes []string) (_ *stack, err error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	withSync, withKafka := false, false
	for _, m := range modes {
		withKafka = withKafka || m == "flash-kafka"
		withSync = withSync || m != "flash-kafka"
	}
	dir, err := os.MkdirTemp("", "voucherd-bench-")
	if err != nil {
		return nil, err
	}
	st := &stack{dir: dir, groups: map[string]*instanceGroup{}, exe: o.Executable, env: o.Env, keepLogs: o.KeepLogs,
		procs: instanceProcs(o.Procs, runtime.NumCPU(), max(o.Instances, o.Consumers))}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	// PostgreSQL may run as another user (when this runs as root).
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "voucherd bench: starting PostgreSQL (durable commits), Redis (%s)%s and %d voucherd instance(s) per mode in %s\n",
		o.Redis, map[bool]string{true: ", Kafka", false: ""}[withKafka], o.Instances, dir)
	if st.pg, err = localstack.StartPostgres(ctx, localstack.PostgresConfig{Dir: filepath.Join(dir, "postgres"), Database: "voucherd"}); err != nil {
		return nil, err
	}
	st.databaseURL = st.pg.URL
	if err := migrateOnce(ctx, st.databaseURL); err != nil {
		return nil, err
	}
	if o.Redis == "cluster" {
		if st.cluster, err = localstack.StartRedisCluster(ctx, localstack.RedisClusterConfig{Dir: filepath.Join(dir, "redis-cluster")}); err != nil {
			return nil, err
		}
		st.redisAddrs = st.cluster.Addrs
		for _, n := range st.cluster.Nodes {
			st.redisPIDs = append(st.redisPIDs, n.PID())
		}
	} else {
		if st.redis, err = localstack.StartRedis(ctx, localstack.RedisConfig{Dir: filepath.Join(dir, "redis"), AppendOnly: true}); err != nil {
			return nil, err
		}
		st.redisAddrs = []string{st.redis.Addr}
		st.redisPIDs = []int{st.redis.PID()}
	}
	if o.RedisRealtime {
		if err := realtime(ctx, st.redisPIDs); err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "voucherd bench: Redis runs at real-time priority (SCHED_FIFO 10)\n")
	}
	// Each instance gets a share of the connections one instance would
	// have, so that PostgreSQL sees as many whatever the instance count.
	pool := max(8, 32/o.Instances)
	common := []string{
		"--database-url=" + st.databaseURL, "--redis-addr=" + strings.Join(st.redisAddrs, ","),
		"--reservation-ttl=15m", "--expiry-interval=1s", "--soldout-ttl=1s", "--migrate=false",
		"--shutdown-timeout=10s", "--reconcile-interval=0", "--reconcile-grace=30s", "--log-format=text",
		"--log-level=error", "--db-max-conns=" + strconv.Itoa(pool), "--db-min-conns=" + strconv.Itoa(pool),
		"--voucher-cache-ttl=1s", "--produce-timeout=2s", "--write-timeout=5s",
		"--combine-writes=" + strconv.FormatBool(!o.SeparateWrites),
	}
	if o.ReconcileShare > 0 {
		common = append(common, "--reconcile-share="+strconv.FormatFloat(o.ReconcileShare, 'g', -1, 64))
	}
	common = append(common, o.ServeFlags...)
	if withSync {
		g, err := st.startGroup(ctx, "sync", o.Instances, 0, append(slices.Clone(common), "--flash-writes=sync", "--redis-key-prefix=bsync:"))
		if err != nil {
			return nil, err
		}
		g.prefix = "bsync:"
	}
	if !withKafka {
		return st, nil
	}
	if st.kafka, err = localstack.StartKafka(ctx, localstack.KafkaConfig{Dir: filepath.Join(dir, "kafka")}); err != nil {
		return nil, err
	}
	st.kafkaBrokers = []string{st.kafka.Addr}
	kafkaArgs := append(slices.Clone(common), "--flash-writes=kafka", "--redis-key-prefix=bkafka:",
		"--kafka-brokers="+st.kafkaBrokers[0], "--kafka-partitions="+strconv.Itoa(o.KafkaPartitions),
		"--kafka-topic=voucherd.reservations", "--kafka-dlq-topic=voucherd.reservations.dlq",
		"--kafka-group=voucherd-writer")
	g, err := st.startGroup(ctx, "kafka", o.Instances, o.Consumers, kafkaArgs)
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
		DeadLetterTopic: "voucherd.reservations.dlq", Group: "voucherd-writer", Partitions: int32(o.KafkaPartitions)}); err != nil { //nolint:gosec // checked by the options' validation: 1 to MaxInt32
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
func (s *stack) startGroup(ctx context.Context, name string, n, consumers int, args []string) (*instanceGroup, error) {
	g := &instanceGroup{}
	s.groups[name] = g
	var serving []*localproc.Process
	for i := range n {
		port, err := localproc.FreePort()
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		a := append([]string{"serve", "--addr=" + addr, "--consumer=" + strconv.FormatBool(i < consumers)}, args...)
		p, err := s.startVoucherd(fmt.Sprintf("voucherd-%s-%d", name, i), a)
		if err != nil {
			return nil, err
		}
		serving = append(serving, p)
		g.pids = append(g.pids, p.PID())
		g.urls = append(g.urls, "http://"+addr)
	}
	for i := n; i < consumers; i++ {
		p, err := s.startVoucherd(fmt.Sprintf("voucherd-%s-consume-%d", name, i), append([]string{"consume"}, args...))
		if err != nil {
			return nil, err
		}
		g.pids = append(g.pids, p.PID())
	}
	for i, u := range g.urls {
		if err := serving[i].WaitReady(ctx, time.Minute, func(ctx context.Context) error {
			return httpReady(ctx, u+"/readyz")
		}); err != nil {
			return nil, fmt.Errorf("%w; see %s", err, serving[i].LogPath)
		}
	}
	return g, nil
}

// instanceProcs returns the GOMAXPROCS of each of the given number of
// voucherd processes of a write mode on a machine of cpus CPUs, for the
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
// folder, in the stack's environment with GOMAXPROCS set to the stack's
// procs when they are set.
func (s *stack) startVoucherd(name string, args []string) (*localproc.Process, error) {
	env := append([]string{}, s.env...) // never nil: nil would inherit ours
	if s.procs > 0 {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(s.procs)) // the last value of a key wins
	}
	p := &localproc.Process{Name: name, Path: s.exe, Args: args, Env: env, LogPath: filepath.Join(s.dir, name+".log")}
	if err := p.Start(); err != nil {
		return nil, err
	}
	s.voucherds = append(s.voucherds, p)
	return p, nil
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

// realtime puts the main thread of each process in pids at real-time
// priority SCHED_FIFO 10 with chrt (util-linux).
func realtime(ctx context.Context, pids []int) error {
	for _, pid := range pids {
		out, err := exec.CommandContext(ctx, "chrt", "-f", "-p", "10", strconv.Itoa(pid)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("redis at real-time priority (chrt -f -p 10 %d, needs root or CAP_SYS_NICE and util-linux): %w: %s", pid, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
