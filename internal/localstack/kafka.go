package localstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
	// Port is the clients' port on 127.0.0.1. Required.
	Port int
	// ControllerPort is the KRaft controller's port on 127.0.0.1. Required.
	ControllerPort int
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

// StartKafka starts a broker and waits until it answers a metadata request.
// A broker that does not become ready is killed.
func StartKafka(ctx context.Context, cfg KafkaConfig) (*Kafka, error) {
	if cfg.Dir == "" || cfg.Port <= 0 || cfg.ControllerPort <= 0 {
		return nil, errors.New("localstack: KafkaConfig needs Dir, Port and ControllerPort")
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
	if err := portFree(cfg.Port); err != nil {
		return nil, err
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
		return nil, fmt.Errorf("%w; see %s", err, k.proc.LogPath)
	}
	return k, nil
}

// Stop shuts the broker down cleanly (SIGTERM) and waits for it; it is
// killed after 30 s. It returns false when it had to be killed.
func (k *Kafka) Stop() bool { return k.proc.Stop(syscall.SIGTERM, kafkaStopGrace) }

// PID returns the broker's process id, 0 when it is not running.
func (k *Kafka) PID() int { return k.proc.PID() }
