// Package kafkaproc runs a real Apache Kafka broker as a child process: one
// KRaft node in combined mode (broker and controller), listening on loopback
// only. It is the one implementation behind the throwaway brokers of
// internal/testenv and behind internal/localstack's (`voucherd dev --kafka`,
// `voucherd bench`).
//
// The broker's jars are not vendored: scripts/kafka.sh fetch downloads Kafka
// from Maven Central once into a cache directory (see DefaultHome), and this
// package runs `java -cp <home>/libs/* kafka.Kafka server.properties`. The
// server.properties it writes matches the one of `scripts/kafka.sh start`;
// keep the two in step.
package kafkaproc

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Version is the Apache Kafka version that scripts/kafka.sh fetches by
// default and that DefaultHome names.
const Version = "4.1.2"

// FetchHint tells a developer how to get the broker's jars.
const FetchHint = "run `scripts/kafka.sh fetch` (needs java 17+ and mvn: apt-get install openjdk-17-jre-headless maven)"

// log4jConfig logs WARN and above to stderr; the broker is chatty at INFO.
// scripts/kafka.sh writes the same file into the cache at fetch time.
const log4jConfig = `status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
`

// Config says where and how to run one broker.
type Config struct {
	// Dir holds server.properties and the broker's data (Dir/data). It is
	// formatted on first use and reused as it is afterwards, so a broker
	// started again on the same Dir keeps its topics and offsets. Required.
	Dir string
	// Port is the PLAINTEXT listener on 127.0.0.1 that clients use. Required.
	Port int
	// ControllerPort is the KRaft controller listener on 127.0.0.1. Required.
	ControllerPort int
	// Home is the jar cache written by scripts/kafka.sh fetch; "" means
	// DefaultHome().
	Home string
	// Heap is the JVM's maximum heap (-Xmx); "" means 384m. The
	// distribution's 1 GiB is more than a test or dev broker needs.
	Heap string
	// Java is the java binary; "" means java from PATH.
	Java string
	// QuickStart trades throughput for start-up time: the client JIT only
	// and the serial collector start a broker noticeably faster on a small,
	// busy machine, and run it slower under load. For tests, not benchmarks.
	QuickStart bool
	// SASLSSL, when set, adds a SASL_SSL listener, as managed Kafka services
	// have; the PLAINTEXT listener on Port stays (it carries the broker's
	// own traffic).
	SASLSSL *SASLSSL
}

// SASLSSL is a SASL_SSL listener on 127.0.0.1: TLS with the server's
// certificate, then SASL (SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN enabled).
type SASLSSL struct {
	// Port is the listener's port. Required.
	Port int
	// CertFile and KeyFile are the server's certificate and its unencrypted
	// PKCS #8 key (PEM). Required.
	CertFile, KeyFile string
	// Users may authenticate with any of the three mechanisms: their SCRAM
	// credentials are written when the storage is formatted (KRaft keeps
	// them in its metadata), so a Dir formatted before keeps the users it
	// had then.
	Users map[string]string
}

// DefaultHome returns the cache directory scripts/kafka.sh uses by default:
// ${XDG_CACHE_HOME:-$HOME/.cache}/voucherd/kafka-<Version>. Callers that
// honour VOUCHERD_KAFKA_HOME read it themselves and set Config.Home.
func DefaultHome() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kafkaproc: no cache directory for the Kafka jars: %w", err)
	}
	return filepath.Join(dir, "voucherd", "kafka-"+Version), nil
}

// Installed reports whether home holds a complete fetch (the marker file
// scripts/kafka.sh writes last).
func Installed(home string) bool {
	_, err := os.Stat(filepath.Join(home, ".complete"))
	return err == nil
}

func (c *Config) defaults() error {
	if c.Dir == "" {
		return errors.New("kafkaproc: Config.Dir is required")
	}
	if c.Port <= 0 || c.ControllerPort <= 0 || c.Port == c.ControllerPort {
		return fmt.Errorf("kafkaproc: need two distinct ports, got %d and %d", c.Port, c.ControllerPort)
	}
	if s := c.SASLSSL; s != nil && (s.Port <= 0 || s.Port == c.Port || s.Port == c.ControllerPort || s.CertFile == "" || s.KeyFile == "") {
		return fmt.Errorf("kafkaproc: SASLSSL needs a port of its own (got %d), CertFile and KeyFile", s.Port)
	}
	if c.Home == "" {
		home, err := DefaultHome()
		if err != nil {
			return err
		}
		c.Home = home
	}
	if !Installed(c.Home) {
		return fmt.Errorf("kafkaproc: Kafka %s jars not found in %s; %s", Version, c.Home, FetchHint)
	}
	if c.Heap == "" {
		c.Heap = "384m"
	}
	if c.Java == "" {
		java, err := exec.LookPath("java")
		if err != nil {
			return fmt.Errorf("kafkaproc: java not found on PATH; Kafka needs Java 17 or newer (apt-get install openjdk-17-jre-headless)")
		}
		c.Java = java
	}
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return fmt.Errorf("kafkaproc: %w", err)
	}
	c.Dir = dir
	return nil
}

// Command prepares cfg.Dir (server.properties, log configuration, and the
// KRaft storage format on first use) and returns the broker command, not yet
// started, so that callers can choose its output, process group and
// parent-death signal. The broker runs in the foreground of that process;
// SIGTERM shuts it down cleanly.
func Command(ctx context.Context, cfg Config) (*exec.Cmd, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "data"), 0o755); err != nil {
		return nil, fmt.Errorf("kafkaproc: %w", err)
	}
	props := filepath.Join(cfg.Dir, "server.properties")
	text := serverProperties(cfg)
	if cfg.SASLSSL != nil {
		keystore, err := writeKeystore(cfg)
		if err != nil {
			return nil, err
		}
		text += saslSSLProperties(cfg, keystore)
	}
	if err := os.WriteFile(props, []byte(text), 0o644); err != nil {
		return nil, fmt.Errorf("kafkaproc: write server.properties: %w", err)
	}
	log4j := filepath.Join(cfg.Home, "log4j2.properties")
	if _, err := os.Stat(log4j); err != nil {
		log4j = filepath.Join(cfg.Dir, "log4j2.properties")
		if err := os.WriteFile(log4j, []byte(log4jConfig), 0o644); err != nil {
			return nil, fmt.Errorf("kafkaproc: write log4j2.properties: %w", err)
		}
	}
	classpath := filepath.Join(cfg.Home, "libs", "*")
	common := []string{"-cp", classpath, "-Djava.awt.headless=true", "-Dlog4j2.configurationFile=" + log4j}

	if !Formatted(cfg.Dir) {
		// A short-lived tool: a small heap and the quick JIT tier start it
		// faster than the broker settings would.
		args := append([]string{"-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"}, common...)
		args = append(args, "kafka.tools.StorageTool", "format", "--standalone", "-t", clusterID(), "-c", props)
		if cfg.SASLSSL != nil {
			for _, name := range slices.Sorted(maps.Keys(cfg.SASLSSL.Users)) {
				for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
					args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", mech, name, cfg.SASLSSL.Users[name]))
				}
			}
		}
		out, err := exec.CommandContext(ctx, cfg.Java, args...).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("kafkaproc: format %s: %v\n%s", cfg.Dir, err, strings.TrimSpace(string(out)))
		}
	}

	args := []string{"-Xmx" + cfg.Heap, "-Xms128m", "-XX:+UseG1GC"}
	if cfg.QuickStart {
		args = []string{"-Xmx" + cfg.Heap, "-Xms128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}
	}
	args = append(args, common...)
	args = append(args, "kafka.Kafka", props)
	return exec.Command(cfg.Java, args...), nil
}

// Formatted reports whether the broker's storage in dir (Config.Dir) is
// formatted already; Command formats it when it is not.
func Formatted(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "data", "meta.properties"))
	return err == nil
}

// serverProperties is a single-node combined-mode configuration. Topic
// auto-creation is off: voucherd creates its topics with the partition count
// it wants, and a mistyped topic name should fail instead of creating one.
func serverProperties(cfg Config) string {
	return fmt.Sprintf(`# Written by voucherd's kafkaproc: one KRaft node in combined mode, loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:%[2]d
listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
advertised.listeners=PLAINTEXT://127.0.0.1:%[1]d
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=%[3]s
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
`, cfg.Port, cfg.ControllerPort, filepath.Join(cfg.Dir, "data"))
}

// writeKeystore writes the PEM key store of the SASL_SSL listener (the key,
// then the certificate) into cfg.Dir and returns its path.
func writeKeystore(cfg Config) (string, error) {
	var pem []byte
	for _, f := range []string{cfg.SASLSSL.KeyFile, cfg.SASLSSL.CertFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("kafkaproc: SASL_SSL key store: %w", err)
		}
		pem = append(pem, b...)
	}
	path := filepath.Join(cfg.Dir, "keystore.pem")
	if err := os.WriteFile(path, pem, 0o600); err != nil {
		return "", fmt.Errorf("kafkaproc: %w", err)
	}
	return path, nil
}

// saslSSLProperties adds the SASL_SSL listener to serverProperties: later
// keys in a properties file win, so the listener lists are given again.
func saslSSLProperties(cfg Config, keystore string) string {
	var plain strings.Builder
	for _, name := range slices.Sorted(maps.Keys(cfg.SASLSSL.Users)) {
		fmt.Fprintf(&plain, ` user_%s="%s"`, name, cfg.SASLSSL.Users[name])
	}
	return fmt.Sprintf(`# SASL_SSL listener for clients.
listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d,SASL_SSL://127.0.0.1:%[3]d
advertised.listeners=PLAINTEXT://127.0.0.1:%[1]d,SASL_SSL://127.0.0.1:%[3]d
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required%[5]s;
ssl.keystore.type=PEM
ssl.keystore.location=%[4]s
ssl.client.auth=none
`, cfg.Port, cfg.ControllerPort, cfg.SASLSSL.Port, keystore, plain.String())
}

// clusterID returns a random cluster id as `kafka-storage.sh random-uuid`
// prints it (16 random bytes, URL-safe base64 without padding), without
// starting a JVM for it. Like Kafka's Uuid.randomUuid it avoids a leading
// '-', which command-line parsers take for a flag.
func clusterID() string {
	for {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			panic(fmt.Sprintf("kafkaproc: crypto/rand: %v", err))
		}
		id := base64.RawURLEncoding.EncodeToString(b)
		if id[0] != '-' {
			return id
		}
	}
}

// Ready returns nil once the broker at addr answers a metadata request that
// lists at least one broker.
func Ready(ctx context.Context, addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	return ReadyClient(ctx, cl)
}

// ReadyClient is Ready with an existing client, for callers that poll.
func ReadyClient(ctx context.Context, cl *kgo.Client) error {
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	if len(md.Brokers) == 0 {
		return errors.New("metadata lists no broker yet")
	}
	return nil
}

// Process is a broker started by Start.
type Process struct {
	// Addr is the client address, "127.0.0.1:<port>".
	Addr string

	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	err  error
}

// Start prepares cfg.Dir, starts the broker with its output on out (nil
// discards it) and waits until it answers metadata requests or ctx ends.
// A broker that fails to become ready is killed.
func Start(ctx context.Context, cfg Config, out io.Writer) (*Process, error) {
	cmd, err := Command(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("kafkaproc: start java: %w", err)
	}
	p := &Process{Addr: fmt.Sprintf("127.0.0.1:%d", cfg.Port), cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()

	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr))
	if err != nil {
		p.Kill()
		return nil, err
	}
	defer cl.Close()
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = ReadyClient(attempt, cl)
		cancel()
		if err == nil {
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("kafkaproc: broker exited before it was ready: %v", p.Err())
		case <-ctx.Done():
			p.Kill()
			return nil, fmt.Errorf("kafkaproc: broker not ready: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Done is closed when the broker process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the broker's exit error once Done is closed.
func (p *Process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Stop asks the broker to shut down (SIGTERM) and waits up to grace before
// killing it. It returns false when the broker had to be killed.
func (p *Process) Stop(grace time.Duration) bool {
	select {
	case <-p.done:
		return true
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
		p.Kill()
		return false
	}
}

// Kill ends the broker with SIGKILL and waits for it to exit.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}
