package testenv

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/voucherd/voucherd/internal/kafkaproc"
	"github.com/voucherd/voucherd/internal/localproc"
)

const (
	// kafkaStartTimeout bounds one broker start (JVM start, KRaft election,
	// first metadata answer); normally a few seconds, slower when several
	// test binaries start JVMs at once on a small machine.
	kafkaStartTimeout = 60 * time.Second
	// kafkaStopGrace is how long a SIGTERM'd broker may take to shut down
	// cleanly before it is killed.
	kafkaStopGrace = 30 * time.Second
	// kafkaFetchTimeout bounds `scripts/kafka.sh fetch` (about 45 MB once).
	kafkaFetchTimeout = 10 * time.Minute
)

// KafkaBroker is an Apache Kafka broker. Kafka returns the one shared by the
// test binary (tests use their own topics, see Topic); NewKafka starts a
// private one that a test may stop, kill and start again on the same ports
// and data.
type KafkaBroker struct {
	// Brokers are the seed addresses, "127.0.0.1:port".
	Brokers []string
	// SASLBrokers are the addresses of the SASL_SSL listener of a broker
	// started by NewKafkaSASL; nil otherwise.
	SASLBrokers []string

	dir  string             // temp dir with server.properties, data/ and kafka.log; "" when external
	proc *localproc.Process // nil when the broker is external
}

var sharedKafka struct {
	once sync.Once
	b    *KafkaBroker
	err  error
}

var kafkaJars struct {
	once sync.Once
	home string
	err  error
}

// Kafka returns the broker shared by the test binary, starting it on first
// use (or using VOUCHERD_TEST_KAFKA_BROKERS, a comma-separated list, when
// set). Topic auto-creation is off: use Topic for a throwaway topic.
func Kafka(t testing.TB) *KafkaBroker {
	t.Helper()
	sharedKafka.once.Do(func() {
		if list := os.Getenv("VOUCHERD_TEST_KAFKA_BROKERS"); list != "" {
			sharedKafka.b, sharedKafka.err = externalKafka(list)
			return
		}
		began := time.Now()
		sharedKafka.b, sharedKafka.err = startKafka(3)
		if sharedKafka.err == nil {
			t.Logf("testenv: Kafka broker %s ready in %s", sharedKafka.b.Brokers[0], time.Since(began).Round(time.Millisecond))
			registerCleanup(sharedKafka.b.shutdown)
		}
	})
	if sharedKafka.err != nil {
		t.Fatalf("testenv: shared Kafka: %v", sharedKafka.err)
	}
	return sharedKafka.b
}

// NewKafka starts a broker for this test only, removed at the test's
// cleanup. Its ports and data survive Stop, Kill and Start.
func NewKafka(t testing.TB) *KafkaBroker {
	t.Helper()
	began := time.Now()
	b, err := startKafka(3)
	if err != nil {
		t.Fatalf("testenv: private Kafka: %v", err)
	}
	t.Logf("testenv: private Kafka broker %s ready in %s", b.Brokers[0], time.Since(began).Round(time.Millisecond))
	t.Cleanup(b.shutdown)
	return b
}

// Stop shuts the broker down cleanly (SIGTERM) and waits for it to exit.
func (b *KafkaBroker) Stop(t testing.TB) {
	t.Helper()
	b.mustOwn(t, "Stop")
	if !b.proc.Stop(syscall.SIGTERM, kafkaStopGrace) {
		t.Logf("testenv: Kafka did not stop within %s and was killed\n%s", kafkaStopGrace, localproc.LogTail(b.proc.LogPath))
	}
}

// Kill ends the broker with SIGKILL, as a crash would.
func (b *KafkaBroker) Kill(t testing.TB) {
	t.Helper()
	b.mustOwn(t, "Kill")
	b.proc.Kill()
}

// Pause stops the broker with SIGSTOP: its connections stay open and the
// kernel accepts and buffers what clients send, but nothing is answered,
// so calls to it hang until Resume. (A proxy cannot stand in front of a
// broker: clients connect to the address it advertises.)
func (b *KafkaBroker) Pause(t testing.TB) {
	t.Helper()
	b.mustOwn(t, "Pause")
	if pid := b.proc.PID(); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
}

// Resume continues a broker Pause stopped (SIGCONT).
func (b *KafkaBroker) Resume(t testing.TB) {
	t.Helper()
	b.mustOwn(t, "Resume")
	if pid := b.proc.PID(); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}

// Start starts a stopped or killed broker again with the same ports and data
// directory and waits until it answers metadata requests.
func (b *KafkaBroker) Start(t testing.TB) {
	t.Helper()
	b.mustOwn(t, "Start")
	if b.proc.Running() {
		t.Fatalf("testenv: KafkaBroker.Start: broker %s is already running", b.Brokers[0])
	}
	began := time.Now()
	// Retry for a while: the old process's ports may linger briefly.
	deadline := time.Now().Add(kafkaStartTimeout)
	for {
		err := b.startOnce()
		if err == nil {
			t.Logf("testenv: Kafka broker %s restarted in %s", b.Brokers[0], time.Since(began).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: restart Kafka %s: %s", b.Brokers[0], kafkaFailure(b.proc, err))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (b *KafkaBroker) mustOwn(t testing.TB, method string) {
	t.Helper()
	if b.proc == nil {
		t.Fatalf("testenv: KafkaBroker.%s needs a broker started by NewKafka, not the shared or an external one", method)
	}
}

func (b *KafkaBroker) startOnce() error {
	if err := b.proc.Start(); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
	if err != nil {
		b.proc.Kill()
		return err
	}
	defer cl.Close()
	err = b.proc.WaitReady(context.Background(), kafkaStartTimeout, func(ctx context.Context) error {
		return kafkaproc.ReadyClient(ctx, cl)
	})
	if err != nil {
		b.proc.Kill()
	}
	return err
}

// shutdown stops the broker and removes its files; for Main and t.Cleanup.
func (b *KafkaBroker) shutdown() {
	if b.proc == nil {
		return
	}
	b.proc.Stop(syscall.SIGTERM, kafkaStopGrace)
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}

func externalKafka(list string) (*KafkaBroker, error) {
	var brokers []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			brokers = append(brokers, s)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, fmt.Errorf("VOUCHERD_TEST_KAFKA_BROKERS %q: %w", list, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := kafkaproc.ReadyClient(ctx, cl); err != nil {
		return nil, fmt.Errorf("VOUCHERD_TEST_KAFKA_BROKERS %q does not answer a metadata request: %w", list, err)
	}
	return &KafkaBroker{Brokers: brokers}, nil
}

// startKafka starts a broker on free ports in a new temp dir, trying up to
// tries port pairs in case another process takes a port before the broker
// binds it. Each try formats a fresh data dir, since KRaft records the
// controller's address at format time.
func startKafka(tries int) (*KafkaBroker, error) { return startKafkaWith(tries, nil, nil) }

// NewKafkaSASL starts a broker for this test only, as NewKafka, with a
// SASL_SSL listener (SASLBrokers) besides the PLAINTEXT one (Brokers, for
// the test's own set-up): TLS with the server certificate of certs, then
// SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN as one of users (name: password).
func NewKafkaSASL(t testing.TB, certs *Certs, users map[string]string) *KafkaBroker {
	t.Helper()
	b, err := startKafkaWith(3, certs, users)
	if err != nil {
		t.Fatalf("testenv: private Kafka with SASL_SSL: %v", err)
	}
	t.Cleanup(b.shutdown)
	return b
}

// startKafkaWith is startKafka with a SASL_SSL listener when certs is not
// nil.
func startKafkaWith(tries int, certs *Certs, users map[string]string) (*KafkaBroker, error) {
	home, err := ensureKafkaJars()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "voucherd-kafka-")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	for attempt := 1; ; attempt++ {
		port, err := localproc.FreePort()
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		cport, err := localproc.FreePort()
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		if cport == port {
			continue
		}
		var saslSSL *kafkaproc.SASLSSL
		if certs != nil {
			sport, err := localproc.FreePort()
			if err != nil {
				_ = os.RemoveAll(dir)
				return nil, err
			}
			if sport == port || sport == cport {
				continue
			}
			saslSSL = &kafkaproc.SASLSSL{Port: sport, CertFile: certs.ServerCert, KeyFile: certs.ServerKey, Users: users}
		}
		_ = os.RemoveAll(filepath.Join(dir, "data"))
		ctx, cancel := context.WithTimeout(context.Background(), kafkaStartTimeout)
		cmd, err := kafkaproc.Command(ctx, kafkaproc.Config{
			Dir: dir, Port: port, ControllerPort: cport, Home: home, QuickStart: true, SASLSSL: saslSSL,
		})
		cancel()
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		b := &KafkaBroker{
			Brokers: []string{fmt.Sprintf("127.0.0.1:%d", port)},
			dir:     dir,
			proc: &localproc.Process{
				Name:    "kafka",
				Path:    cmd.Path,
				Args:    cmd.Args[1:],
				LogPath: filepath.Join(dir, "kafka.log"),
			},
		}
		if saslSSL != nil {
			b.SASLBrokers = []string{fmt.Sprintf("127.0.0.1:%d", saslSSL.Port)}
		}
		err = b.startOnce()
		if err == nil {
			return b, nil
		}
		if attempt < tries && strings.Contains(localproc.LogTail(b.proc.LogPath), "Address already in use") {
			continue
		}
		msg := kafkaFailure(b.proc, err)
		_ = os.RemoveAll(dir)
		return nil, errors.New(msg)
	}
}

// ensureKafkaJars returns the jar cache, running scripts/kafka.sh fetch once
// per test binary when the cache is missing. VOUCHERD_KAFKA_HOME overrides
// the cache location, as it does for the script.
func ensureKafkaJars() (string, error) {
	kafkaJars.once.Do(func() {
		home := os.Getenv("VOUCHERD_KAFKA_HOME")
		if home == "" {
			var err error
			if home, err = kafkaproc.DefaultHome(); err != nil {
				kafkaJars.err = err
				return
			}
		}
		kafkaJars.home = home
		if kafkaproc.Installed(home) {
			return
		}
		root, err := repoRoot()
		if err != nil {
			kafkaJars.err = fmt.Errorf("Kafka jars not in %s and %v; %s", home, err, kafkaproc.FetchHint)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), kafkaFetchTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "kafka.sh"), "fetch")
		cmd.Env = append(os.Environ(), "VOUCHERD_KAFKA_HOME="+home)
		if out, err := cmd.CombinedOutput(); err != nil {
			kafkaJars.err = fmt.Errorf("scripts/kafka.sh fetch failed: %v\n%s\n%s", err, strings.TrimSpace(string(out)), kafkaproc.FetchHint)
			return
		}
		if !kafkaproc.Installed(home) {
			kafkaJars.err = fmt.Errorf("scripts/kafka.sh fetch left no complete cache in %s", home)
		}
	})
	return kafkaJars.home, kafkaJars.err
}

// repoRoot walks up from the working directory (a package directory under
// go test) to the directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func kafkaFailure(p *localproc.Process, err error) string {
	return fmt.Sprintf("%v\nkafka log %s (last lines):\n%s\nKafka needs java 17+ and the jars from %s", err, p.LogPath, localproc.LogTail(p.LogPath), kafkaproc.FetchHint)
}

// Topic creates a topic with a unique name on brokers, waits until every
// partition has a leader, and deletes it at the test's cleanup.
func Topic(t testing.TB, brokers []string, partitions int) string {
	t.Helper()
	if partitions <= 0 || partitions > math.MaxInt32 {
		t.Fatalf("testenv: Topic: partitions must be from 1 to %d, got %d", math.MaxInt32, partitions)
	}
	name := topicName(t.Name())
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatalf("testenv: Topic: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, name) //nolint:gosec // G115: bounded above (t.Fatalf ends the test)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("testenv: create topic %s on %v: %v", name, brokers, err)
	}
	t.Cleanup(func() { deleteTopic(t, brokers, name) })

	for {
		details, err := adm.ListTopics(ctx, name)
		if err == nil {
			err = topicReady(details, name, partitions)
		}
		if err == nil {
			return name
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: topic %s not ready: %v", name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func topicReady(details kadm.TopicDetails, name string, partitions int) error {
	d, ok := details[name]
	if !ok {
		return errors.New("not in metadata yet")
	}
	if d.Err != nil {
		return d.Err
	}
	if len(d.Partitions) != partitions {
		return fmt.Errorf("metadata lists %d of %d partitions", len(d.Partitions), partitions)
	}
	for _, p := range d.Partitions {
		if p.Err != nil {
			return p.Err
		}
		if p.Leader < 0 {
			return fmt.Errorf("partition %d has no leader", p.Partition)
		}
	}
	return nil
}

func deleteTopic(t testing.TB, brokers []string, name string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return
	}
	defer cl.Close()
	// Short: a test may leave its private broker stopped, and the broker's
	// files go away with it anyway.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).DeleteTopic(ctx, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Logf("testenv: delete topic %s: %v", name, err)
	}
}

// topicName makes a legal, unique topic name from a test name: letters,
// digits, '.' and '-' only (no '_', which Kafka treats as colliding with '.').
func topicName(testName string) string {
	var sb strings.Builder
	sb.WriteString("test.")
	for _, r := range testName {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-':
			sb.WriteRune(r)
		default:
			sb.WriteByte('-')
		}
		if sb.Len() >= 180 {
			break
		}
	}
	sb.WriteString(".")
	sb.WriteString(randomSuffix(6))
	return sb.String()
}
