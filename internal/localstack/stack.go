package localstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// StackConfig says where to run a developer's stack: PostgreSQL and Redis,
// and Kafka when asked, each keeping its data in a folder of Dir.
type StackConfig struct {
	// Dir holds the servers' folders (postgres, redis, kafka). Required.
	Dir string
	// PostgresPort and RedisPort are the servers' ports on 127.0.0.1.
	// Required.
	PostgresPort, RedisPort int
	// Kafka also starts a broker.
	Kafka bool
	// KafkaPort is the broker's port on 127.0.0.1, its controller's the
	// port after it. Required with Kafka.
	KafkaPort int
}

// Stack is the servers StartStack started.
type Stack struct {
	// DatabaseURL connects to the database "voucherd" as the user
	// "voucherd".
	DatabaseURL string
	// RedisAddrs is the Redis server's address.
	RedisAddrs []string
	// KafkaBrokers is the broker's address; empty without Kafka.
	KafkaBrokers []string

	stops []func() // in the order the servers started
}

// stackFolders are the folders of Dir that StartStack fills and
// ResetStack deletes.
var stackFolders = []string{"postgres", "redis", "kafka"}

// StartStack starts PostgreSQL (with the database voucherd), Redis with
// its writes kept in an append-only file and, with cfg.Kafka, a Kafka
// broker, each on its port of 127.0.0.1 with its data in a folder of
// cfg.Dir, so that a stack started again on the same Dir has its data
// back. On failure it stops what it started.
func StartStack(ctx context.Context, cfg StackConfig) (_ *Stack, err error) {
	if cfg.Dir == "" {
		return nil, errors.New("localstack: StackConfig needs Dir")
	}
	s := &Stack{}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	pg, err := StartPostgres(ctx, PostgresConfig{Dir: filepath.Join(cfg.Dir, "postgres"), Port: cfg.PostgresPort, Database: "voucherd"})
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, func() { pg.Stop() })
	s.DatabaseURL = pg.URL
	redis, err := StartRedis(ctx, RedisConfig{Dir: filepath.Join(cfg.Dir, "redis"), Port: cfg.RedisPort, AppendOnly: true})
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, func() { redis.Stop() })
	s.RedisAddrs = []string{redis.Addr}
	if !cfg.Kafka {
		return s, nil
	}
	k, err := StartKafka(ctx, KafkaConfig{Dir: filepath.Join(cfg.Dir, "kafka"), Port: cfg.KafkaPort, ControllerPort: cfg.KafkaPort + 1})
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, func() { k.Stop() })
	s.KafkaBrokers = []string{k.Addr}
	return s, nil
}

// Stop stops the servers, the last started first, each after the one
// started after it has exited (each is killed when it takes longer than
// its grace: 15 s, Kafka 30 s).
func (s *Stack) Stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}

// ResetStack deletes the data StartStack keeps in dir, and only that: the
// servers' folders, whatever else dir holds. The stack must be stopped.
func ResetStack(dir string) error {
	for _, sub := range stackFolders {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return fmt.Errorf("localstack: reset %s: %w", dir, err)
		}
	}
	return nil
}
