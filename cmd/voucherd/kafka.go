package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/voucherd/voucherd/internal/kafkalog"
	"github.com/voucherd/voucherd/internal/metrics"
	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/tracing"
	"github.com/voucherd/voucherd/internal/voucher"
)

// kafkaParts is the Kafka side of a process: the log (producer, lag and
// watermark checks) and, when this process runs it, the consumer that
// writes reservations to PostgreSQL.
type kafkaParts struct {
	log      *kafkalog.Log
	consumer *kafkalog.Consumer
	events   voucher.EventLog
	metrics  *metrics.Metrics

	stopSampling context.CancelFunc
	sampling     sync.WaitGroup
}

func kafkaConfig(cfg Config, log *slog.Logger) kafkalog.Config {
	return kafkalog.Config{
		Brokers: cfg.KafkaBrokers, Topic: cfg.KafkaTopic, DeadLetterTopic: cfg.KafkaDLQTopic,
		EventsTopic: cfg.KafkaEventsTopic, Group: cfg.KafkaGroup, Partitions: int32(cfg.KafkaPartitions), ProduceTimeout: cfg.ProduceTimeout, //nolint:gosec // G115: Config.checkInt32 accepted it
		Linger: cfg.KafkaLinger, SendWhenIdle: cfg.KafkaSendWhenIdle,
		SessionTimeout: cfg.KafkaSessionTimeout, Logger: log,
		SigningKey: []byte(cfg.EventKey),
	}
}

// openKafka connects the log, creates the topics when absent and, when
// cfg.RunConsumer is set, prepares the consumer (started by startConsumer).
func openKafka(ctx context.Context, cfg Config, store *pgstore.Store, m *metrics.Metrics, log *slog.Logger, tp *tracing.Provider) (*kafkaParts, error) {
	kcfg, err := kafkaSecure(kafkaConfig(cfg, log), cfg)
	if err != nil {
		return nil, err
	}
	kcfg = traceKafka(kcfg, tp)
	l, err := kafkalog.New(kcfg)
	if err != nil {
		return nil, err
	}
	k := &kafkaParts{log: l, events: l, metrics: m}
	ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := l.EnsureTopics(ectx); err != nil {
		l.Close()
		return nil, kafkaStartError(fmt.Errorf("create topics: %w", err))
	}
	if cfg.RunConsumer {
		check, err := eventChecker(cfg, store)
		if err != nil {
			l.Close()
			return nil, err
		}
		kcfg.Check = check
		if k.consumer, err = kafkalog.NewConsumer(kcfg, store); err != nil {
			l.Close()
			return nil, err
		}
	}
	return k, nil
}

// eventChecker is the consumer's check of each event against its voucher,
// with the producers' hold and cache settings (the same configuration):
// a producer may use a definition for up to twice its cache TTL, and for
// StaleVoucherMax more while PostgreSQL cannot be read.
func eventChecker(cfg Config, store *pgstore.Store) (*voucher.EventChecker, error) {
	ttl, stale := cfg.VoucherCacheTTL, cfg.StaleVoucherMax
	if ttl == 0 {
		ttl = voucher.DefaultVoucherCacheTTL
	}
	if stale == 0 {
		stale = voucher.DefaultStaleVoucherMax
	}
	return voucher.NewEventChecker(voucher.EventCheckConfig{
		Store: store, History: store, ReservationTTL: cfg.ReservationTTL, MaxHold: cfg.MaxHold,
		Staleness: 2*max(ttl, 0) + max(stale, 0) + time.Second, CacheTTL: cfg.VoucherCacheTTL,
		Clock: cfg.clock,
	})
}

func (k *kafkaParts) ping(ctx context.Context) error { return k.log.Ping(ctx) }

// openNotifier prepares the producer of threshold events, used
// whenever Kafka brokers are configured, in any write mode. A Kafka that is
// down at start does not stop serving: threshold events are best effort
// (logged and counted in any case), so the topic is only created if it can
// be now. A Kafka that answers and refuses the credentials or certificates
// stops the start (kafkalog.IsConfigError).
func openNotifier(ctx context.Context, cfg Config, log *slog.Logger, tp *tracing.Provider) (*kafkalog.Notifier, error) {
	kcfg, err := kafkaSecure(kafkaConfig(cfg, log), cfg)
	if err != nil {
		return nil, err
	}
	n, err := kafkalog.NewNotifier(traceKafka(kcfg, tp))
	if err != nil {
		return nil, err
	}
	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.EnsureTopic(ectx); kafkalog.IsConfigError(err) {
		// Kafka answered and refused the credentials or certificates:
		// waiting does not fix that, so the start stops and says so.
		n.Close()
		return nil, kafkaStartError(err)
	} else if err != nil {
		log.Warn("could not create the threshold events topic; events are dropped until it exists",
			"topic", cfg.KafkaEventsTopic, "err", err)
	}
	return n, nil
}

// startConsumer runs the consumer and samples its lag and counters into the
// metrics every second.
func (k *kafkaParts) startConsumer(ctx context.Context) {
	if k.consumer == nil {
		return
	}
	k.consumer.Start(ctx)
	sctx, cancel := context.WithCancel(ctx)
	k.stopSampling = cancel
	k.sampling.Add(1)
	go func() {
		defer k.sampling.Done()
		var last kafkalog.Stats
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			if lag, err := k.log.Lag(sctx); err == nil {
				k.metrics.ConsumerLag.Set(float64(lag))
			}
			st := k.consumer.Stats()
			k.metrics.ConsumerApplied.WithLabelValues("applied").Add(float64(st.Applied - last.Applied))
			k.metrics.ConsumerApplied.WithLabelValues("already_applied").Add(float64(st.AlreadyApplied - last.AlreadyApplied))
			k.metrics.ConsumerApplied.WithLabelValues("rejected").Add(float64(st.Rejected - last.Rejected))
			k.metrics.ConsumerApplied.WithLabelValues("undecodable").Add(float64(st.Undecodable - last.Undecodable))
			k.metrics.ConsumerApplied.WithLabelValues("failed_attempt").Add(float64(st.Failures - last.Failures))
			var mismatched uint64
			for reason, n := range st.Mismatched {
				k.metrics.ConsumerMismatches.WithLabelValues(reason).Add(float64(n - last.Mismatched[reason]))
				mismatched += n - last.Mismatched[reason]
			}
			k.metrics.ConsumerApplied.WithLabelValues("mismatched").Add(float64(mismatched))
			k.metrics.DeadLetters.Add(float64(st.Rejected - last.Rejected + st.Undecodable - last.Undecodable + mismatched))
			last = st
		}
	}()
}

// close stops the consumer (it commits the batch in hand), then flushes
// the producer.
func (k *kafkaParts) close() {
	if k.stopSampling != nil {
		k.stopSampling()
		k.sampling.Wait()
	}
	if k.consumer != nil {
		k.consumer.Stop()
	}
	k.log.Close()
}

// runConsume runs only the consumer: for deployments that scale writers
// apart from the API, and for fault tests that kill the consumer alone.
func runConsume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	fs := newFlagSet("consume", "", stderr)
	// consume serves no HTTP and always runs the consumer.
	registerServeFlagsExcept(fs, &cfg, "addr", "consumer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(cfg.KafkaBrokers) == 0 {
		return fmt.Errorf("consume needs VOUCHERD_KAFKA_BROKERS")
	}
	if err := cfg.checkInt32(); err != nil {
		return err
	}
	if cfg.tracingEnvErr != nil {
		return cfg.tracingEnvErr
	}
	if cfg.managedEnvErr != nil {
		return cfg.managedEnvErr
	}
	if err := cfg.Managed.load(); err != nil {
		return err
	}
	log, err := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return err
	}
	if cfg, log, err = redactPII(cfg, log); err != nil {
		return err
	}
	tp, log, err := openTracing(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeTracing(tp, log)
	store, err := pgstore.Open(ctx, tracePostgres(pgstore.Config{URL: cfg.DatabaseURL, MaxConns: int32(cfg.MaxDBConns)}, tp)) //nolint:gosec // G115: Config.checkInt32 accepted it
	if err != nil {
		return err
	}
	defer store.Close()
	if err := checkPostgres(ctx, store); err != nil {
		return err
	}
	if cfg.MigrateOnStart {
		if err := store.Migrate(ctx); err != nil {
			return err
		}
	}
	cfg.RunConsumer = true
	k, err := openKafka(ctx, cfg, store, metrics.New(metrics.Counts{StatementReruns: store.StatementReruns}), log, tp)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	k.startConsumer(context.WithoutCancel(ctx))
	log.Info("voucherd consumer running", "topic", cfg.KafkaTopic, "group", cfg.KafkaGroup)
	<-ctx.Done()
	log.Info("consumer stopping")
	k.close()
	return nil
}
