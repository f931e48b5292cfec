package localstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/voucherd/voucherd/internal/kafkaproc"
	"github.com/voucherd/voucherd/internal/localproc"
)

// kafkaStopGrace is how long a broker may take to shut down cleanly.
const kafkaStopGrace = 30 * time.Second

// KafkaConfig says where and how to run one Kafka broker (kafkaproc: a
// single KRaft node, broker and controller in one process).
type KafkaConfig struct {
	// Dir holds the broker's configuration, data and log (Dir/kafka.log).
	// A broker started again on Dir keeps its topics and offsets. Required.
	Dir string
	// Port is the clients' port on 127.0.0.1, ControllerPort the KRaft
	// controller's. Both 0 lets StartKafka choose two free ports, and
	// choose again when another process takes one first.
	Port, ControllerPort int
	// Home is the jar cache of scripts/kafka.sh fetch; "" means
	// kafkaproc.DefaultHome().
	Home string
	// StartTimeout bounds a start until the broker answers a metadata
	// request; 0 means 60s.
	StartTimeout time.Duration
}

// Kafka is a broker started by StartKafka.
type Kafka struct {
	// Addr is the clients' "127.0.0.1:port".
	Addr string

	proc *localproc.Process
}

// kafkaPortTries is how many pairs of free ports StartKafka tries when it
// chooses the ports and another process takes one before the broker binds
// it.
const kafkaPortTries = 3

// StartKafka starts a broker and waits until it answers a metadata request.
// A broker that does not become ready is killed.
func StartKafka(ctx context.Context, cfg KafkaConfig) (*Kafka, error) {
	if cfg.Dir == "" || cfg.Port < 0 || cfg.ControllerPort < 0 || (cfg.Port == 0) != (cfg.ControllerPort == 0) {
		return nil, errors.New("localstack: KafkaConfig needs Dir, and Port and ControllerPort both set or both 0")
	}
	if cfg.Home == "" {
		home, err := kafkaproc.DefaultHome()
		if err != nil {
			return nil, err
		}
		cfg.Home = home
	}
	if !kafkaproc.Installed(cfg.Home) {
		return nil, fmt.Errorf("Kafka is not fetched yet: %s", kafkaproc.FetchHint)
	}
	if cfg.Port > 0 {
		return startKafkaOn(ctx, cfg)
	}
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		fresh := !kafkaproc.Formatted(cfg.Dir)
		on := cfg
		on.Port, on.ControllerPort = ports[0], ports[1]
		k, err := startKafkaOn(ctx, on)
		var taken *portTakenError
		if err == nil || attempt == kafkaPortTries || !errors.As(err, &taken) {
			return k, err
		}
		if fresh {
			// The storage was formatted for the controller port just
			// given up; the next ports need a storage of their own.
			if err := os.RemoveAll(filepath.Join(cfg.Dir, "data")); err != nil {
				return nil, err
			}
		}
	}
}

// startKafkaOn is StartKafka on cfg's ports. A broker whose log says an
// address is in use fails with a *portTakenError.
func startKafkaOn(ctx context.Context, cfg KafkaConfig) (*Kafka, error) {
	for _, port := range []int{cfg.Port, cfg.ControllerPort} {
		if err := portFree(port); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	cmd, err := kafkaproc.Command(ctx, kafkaproc.Config{Dir: cfg.Dir, Port: cfg.Port, ControllerPort: cfg.ControllerPort, Home: cfg.Home})
	if err != nil {
		return nil, err
	}
	k := &Kafka{
		Addr: "127.0.0.1:" + strconv.Itoa(cfg.Port),
		proc: &localproc.Process{Name: "kafka", Path: cmd.Path, Args: cmd.Args[1:], Env: cmd.Env,
			LogPath: filepath.Join(cfg.Dir, "kafka.log")},
	}
	if err := k.proc.Start(); err != nil {
		return nil, err
	}
	err = k.proc.WaitReady(ctx, orDefault(cfg.StartTimeout), func(ctx context.Context) error { return kafkaproc.Ready(ctx, k.Addr) })
	if err != nil {
		k.proc.Kill()
		err = fmt.Errorf("%w; see %s", err, k.proc.LogPath)
		if strings.Contains(localproc.LogTail(k.proc.LogPath), "Address already in use") {
			err = &portTakenError{err: fmt.Errorf("one of the broker's ports %d and %d is taken: %w", cfg.Port, cfg.ControllerPort, err)}
		}
		return nil, err
	}
	return k, nil
}

// Stop shuts the broker down cleanly (SIGTERM) and waits for it; it is
// killed after 30 s. It returns false when it had to be killed.
func (k *Kafka) Stop() bool { return k.proc.Stop(syscall.SIGTERM, kafkaStopGrace) }

// PID returns the broker's process id, 0 when it is not running.
func (k *Kafka) PID() int { return k.proc.PID() }
