package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/voucherd/voucherd/internal/kafkalog"
	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/redisgate"
	"github.com/voucherd/voucherd/internal/tracing"
	"github.com/voucherd/voucherd/internal/voucher"
)

// Config is everything `serve` needs, read from flags whose defaults come
// from VOUCHERD_* environment variables. It is read here and nowhere else.
type Config struct {
	Addr           string
	DatabaseURL    string
	RedisAddrs     []string
	RedisKeyPrefix string
	APIToken       string
	AdminToken     string
	// APIKeys and AdminKeys are name:secret lists; KeysFile holds more
	// keys and is read again on SIGHUP and when it changes (keys.go).
	APIKeys         string
	AdminKeys       string
	KeysFile        string
	ReservationTTL  time.Duration
	ExpiryInterval  time.Duration
	FlashWrites     string
	FlashFallback   bool
	SoldOutTTL      time.Duration
	RedisScanCount  int
	KafkaBrokers    []string
	KafkaTopic      string
	KafkaDLQTopic   string
	KafkaGroup      string
	KafkaPartitions int
	RunConsumer     bool
	MigrateOnStart  bool
	ShutdownTimeout time.Duration
	ReconcileEvery  time.Duration
	ReconcileGrace  time.Duration
	// ReconcileShare is the largest share of its time one voucher's
	// reconciliation spends working (voucher.ServiceConfig.ReconcileShare).
	ReconcileShare float64
	// reconcileFindings is voucher.ServiceConfig.ReconcileFindings (0: its
	// default); set by tests only.
	reconcileFindings int
	// HeartbeatTTL is how long an instance that stopped beating still
	// counts as alive; after it, the holds it took without writing them
	// are fenced and given back.
	HeartbeatTTL time.Duration
	LogFormat    string
	LogLevel     string
	MaxDBConns   int
	// MinDBConns connections are opened at start and kept open, so that a
	// sale's first second does not wait for them; 0 opens them on demand.
	MinDBConns      int
	VoucherCacheTTL time.Duration
	// UnknownCodeLimit and UnknownCodeBlock: look-ups of unknown codes a
	// customer may make per minute, and how long one past it is refused
	// (voucher.ServiceConfig).
	UnknownCodeLimit int
	UnknownCodeBlock time.Duration
	// StaleVoucherMax bounds serving a cached flash voucher while PostgreSQL
	// cannot be read (Kafka mode).
	StaleVoucherMax time.Duration
	ProduceTimeout  time.Duration
	// KafkaLinger is how long the producer waits to fill a batch.
	KafkaLinger time.Duration
	// KafkaSendWhenIdle sends the events gathered while a produce is in
	// flight once it is answered, instead of lingering.
	KafkaSendWhenIdle bool
	// KafkaSessionTimeout is how long the consumer group waits for a crashed
	// consumer before another takes its partitions.
	KafkaSessionTimeout time.Duration
	WriteTimeout        time.Duration
	// RedisTimeout bounds every call to the gate's Redis.
	RedisTimeout time.Duration
	// RedisFlushDelay and RedisPipelines tune the gate's client
	// (redisgate.Config.FlushDelay and Pipelines).
	RedisFlushDelay time.Duration
	RedisPipelines  int
	// RedisCombineTakes makes concurrent takes of one flash voucher share
	// a script call (redisgate.Config.CombineTakes).
	RedisCombineTakes bool
	CombineWrites     bool
	// CombineWriters bounds the combined PostgreSQL writes of one voucher
	// in flight at once (pgstore.CombinerConfig.Writers).
	CombineWriters int
	// CombineRegroup bounds how long a voucher's combining writer waits,
	// after a batch, for its callers to queue again
	// (pgstore.CombinerConfig.Regroup; negative: no wait).
	CombineRegroup time.Duration
	// CombineCohorts splits a hot voucher's callers into two cohorts
	// (pgstore.CombinerConfig.SingleCohort false).
	CombineCohorts bool
	// Hold extension and threshold events.
	MaxHold          time.Duration
	LowStockShare    float64
	KafkaEventsTopic string
	// Tracing configures OpenTelemetry tracing; nil (the default) is off
	// and wraps nothing (tracingFromEnv).
	Tracing *tracing.Config
	// tracingEnvErr is why the OTEL_* variables could not be used; validate
	// reports it.
	tracingEnvErr error
	// PprofAddr, when set, serves net/http/pprof on a listener of its own.
	PprofAddr string

	// --- managed services (tls.go) ---
	// Managed is the credentials and TLS of Redis and Kafka, read from the
	// environment only (managedFromEnv).
	Managed ManagedConfig
	// PIIKey keys the hash that replaces e-mail addresses in logs and
	// spans (internal/pii); empty draws one per process. Environment only
	// (VOUCHERD_PII_KEY or VOUCHERD_PII_KEY_FILE).
	PIIKey string
	// EventKey signs the reservation events (Kafka mode) and is required
	// of them by the consumer (kafkalog.Config.SigningKey); empty signs and
	// checks nothing. Environment only (VOUCHERD_EVENT_KEY or
	// VOUCHERD_EVENT_KEY_FILE).
	EventKey string
	// managedEnvErr is why those variables, VOUCHERD_DATABASE_URL_FILE or
	// VOUCHERD_PII_KEY_FILE could not be used; validate reports it.
	managedEnvErr error
	// --- end managed services ---
	// Access: read keys, the metrics listener and the side doors'
	// checks (access.go).
	Access AccessConfig
	// Events: webhooks, the feed and the events topic (events.go).
	Events EventsConfig

	// clock is the service's clock and the Kafka consumer's event check's
	// (nil: time.Now); set only by tests, which move it to another
	// occurrence of a voucher's windows.
	clock func() time.Time
}

// envOr returns the environment variable or def.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
		fmt.Fprintf(os.Stderr, "voucherd: ignoring %s=%q: not a Go duration (like 15m or 30s)\n", name, v)
	}
	return def
}

func envBool(name string, def bool) bool {
	if v := os.Getenv(name); v != "" {
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
		fmt.Fprintf(os.Stderr, "voucherd: ignoring %s=%q: not a boolean\n", name, v)
	}
	return def
}

// defaultReconcileShare is the default of --reconcile-share: a tenth of
// one core for a voucher of any size.
const defaultReconcileShare = 0.1

func envFloat(name string, def float64) float64 {
	if v := os.Getenv(name); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
		fmt.Fprintf(os.Stderr, "voucherd: ignoring %s=%q: not a number\n", name, v)
	}
	return def
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
		fmt.Fprintf(os.Stderr, "voucherd: ignoring %s=%q: not an integer\n", name, v)
	}
	return def
}

// listFlag is a comma-separated list flag.
type listFlag struct{ v *[]string }

func (l listFlag) String() string {
	if l.v == nil {
		return ""
	}
	return strings.Join(*l.v, ",")
}

func (l listFlag) Set(s string) error {
	*l.v = splitList(s)
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Defaults of the gate's Redis client: rueidis's own (writes at once, one
// connection per CPU up to 4 to a single node). One connection with writes
// held back 20µs shares writes between concurrent calls, but measured
// side by side it served fewer contended Kafka-mode takes per second and
// no more flash-sync ones (docs/benchmarks-log.md).
const (
	defaultRedisFlushDelay = 0
	defaultRedisPipelines  = 0
)

// defaultDatabaseURL is the URL `voucherd dev` serves on; serve uses it only
// when nothing else is configured.
const defaultDatabaseURL = "postgres://voucherd@127.0.0.1:55432/voucherd?sslmode=disable"

// registerServeFlags binds cfg to flags on fs with environment defaults.
func registerServeFlags(fs *flag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.Addr, "addr", envOr("VOUCHERD_ADDR", "127.0.0.1:8080"), "listen address (VOUCHERD_ADDR)")
	dbURL, dbURLErr := databaseURLFromEnv(os.Getenv, defaultDatabaseURL)
	fs.StringVar(&cfg.DatabaseURL, "database-url", dbURL, "PostgreSQL URL, or VOUCHERD_DATABASE_URL_FILE naming a file that holds it (VOUCHERD_DATABASE_URL)")
	cfg.RedisAddrs = splitList(os.Getenv("VOUCHERD_REDIS_ADDR"))
	fs.Var(listFlag{&cfg.RedisAddrs}, "redis-addr", "Redis address, or a comma-separated list of Cluster nodes; empty disables flash mode (VOUCHERD_REDIS_ADDR)")
	fs.StringVar(&cfg.RedisKeyPrefix, "redis-key-prefix", envOr("VOUCHERD_REDIS_KEY_PREFIX", ""), "prefix of every Redis key (VOUCHERD_REDIS_KEY_PREFIX)")
	cfg.APIToken = os.Getenv("VOUCHERD_API_TOKEN")
	cfg.AdminToken = os.Getenv("VOUCHERD_ADMIN_TOKEN")
	cfg.APIKeys = os.Getenv("VOUCHERD_API_KEYS")
	cfg.AdminKeys = os.Getenv("VOUCHERD_ADMIN_KEYS")
	fs.StringVar(&cfg.KeysFile, "keys-file", envOr("VOUCHERD_KEYS_FILE", ""), "file of named API keys, one \"api|admin|read NAME SECRET\" a line, read again on SIGHUP and on change (VOUCHERD_KEYS_FILE)")
	fs.DurationVar(&cfg.ReservationTTL, "reservation-ttl", envDuration("VOUCHERD_RESERVATION_TTL", 15*time.Minute), "how long a RESERVED hold lasts (VOUCHERD_RESERVATION_TTL)")
	fs.DurationVar(&cfg.MaxHold, "max-hold", envDuration("VOUCHERD_MAX_HOLD", 0), "longest total time a reservation may stay RESERVED when extended, from its creation; at least the reservation TTL; 0 means 1h, or the reservation TTL if longer (VOUCHERD_MAX_HOLD)")
	fs.Float64Var(&cfg.LowStockShare, "low-stock-share", envFloat("VOUCHERD_LOW_STOCK_SHARE", 0.1), "share of totalLimit below which free uses emit VoucherLowStock; negative disables threshold events (VOUCHERD_LOW_STOCK_SHARE)")
	fs.DurationVar(&cfg.ExpiryInterval, "expiry-interval", envDuration("VOUCHERD_EXPIRY_INTERVAL", time.Second), "how often expired holds are released (VOUCHERD_EXPIRY_INTERVAL)")
	fs.StringVar(&cfg.FlashWrites, "flash-writes", envOr("VOUCHERD_FLASH_WRITES", "sync"), "how flash reservations reach PostgreSQL: sync or kafka (VOUCHERD_FLASH_WRITES)")
	fs.BoolVar(&cfg.FlashFallback, "flash-fallback", envBool("VOUCHERD_FLASH_FALLBACK", false), "when Redis is down, reserve flash vouchers through PostgreSQL directly (sync mode only) (VOUCHERD_FLASH_FALLBACK)")
	fs.IntVar(&cfg.RedisScanCount, "redis-scan-count", envInt("VOUCHERD_REDIS_SCAN_COUNT", redisgate.DefaultScanCount), "entries of a flash voucher's Redis hashes read or written per call when reconciliation reads or counts the whole voucher and when a warm-up loads it; each call holds Redis for a time proportional to it (VOUCHERD_REDIS_SCAN_COUNT)")
	fs.DurationVar(&cfg.SoldOutTTL, "soldout-ttl", envDuration("VOUCHERD_SOLDOUT_TTL", time.Second), "how long a sold-out answer is cached in process; negative disables (VOUCHERD_SOLDOUT_TTL)")
	cfg.KafkaBrokers = splitList(os.Getenv("VOUCHERD_KAFKA_BROKERS"))
	fs.Var(listFlag{&cfg.KafkaBrokers}, "kafka-brokers", "Kafka bootstrap brokers, comma-separated (VOUCHERD_KAFKA_BROKERS)")
	fs.StringVar(&cfg.KafkaTopic, "kafka-topic", envOr("VOUCHERD_KAFKA_TOPIC", "voucherd.reservations"), "reservation events topic (VOUCHERD_KAFKA_TOPIC)")
	fs.StringVar(&cfg.KafkaDLQTopic, "kafka-dlq-topic", envOr("VOUCHERD_KAFKA_DLQ_TOPIC", "voucherd.reservations.dlq"), "dead-letter topic (VOUCHERD_KAFKA_DLQ_TOPIC)")
	fs.StringVar(&cfg.KafkaEventsTopic, "kafka-events-topic", envOr("VOUCHERD_KAFKA_EVENTS_TOPIC", "voucherd.events"), "threshold events topic (VoucherLowStock, VoucherSoldOut), used whenever Kafka brokers are set (VOUCHERD_KAFKA_EVENTS_TOPIC)")
	fs.StringVar(&cfg.KafkaGroup, "kafka-group", envOr("VOUCHERD_KAFKA_GROUP", "voucherd-writer"), "consumer group (VOUCHERD_KAFKA_GROUP)")
	fs.IntVar(&cfg.KafkaPartitions, "kafka-partitions", envInt("VOUCHERD_KAFKA_PARTITIONS", 3), "partitions of the topics when voucherd creates them (VOUCHERD_KAFKA_PARTITIONS)")
	fs.BoolVar(&cfg.RunConsumer, "consumer", envBool("VOUCHERD_CONSUMER", true), "run the Kafka consumer inside serve in kafka mode (VOUCHERD_CONSUMER)")
	fs.DurationVar(&cfg.KafkaSessionTimeout, "kafka-session-timeout", envDuration("VOUCHERD_KAFKA_SESSION_TIMEOUT", kafkalog.DefaultSessionTimeout), "how long the consumer group waits for a crashed consumer before another takes over (VOUCHERD_KAFKA_SESSION_TIMEOUT)")
	fs.DurationVar(&cfg.ProduceTimeout, "produce-timeout", envDuration("VOUCHERD_PRODUCE_TIMEOUT", 2*time.Second), "how long a reservation waits for Kafka's ack (VOUCHERD_PRODUCE_TIMEOUT)")
	fs.DurationVar(&cfg.KafkaLinger, "kafka-linger", envDuration("VOUCHERD_KAFKA_LINGER", kafkalog.DefaultLinger), "how long the Kafka producer waits to fill a batch; negative sends at once (VOUCHERD_KAFKA_LINGER)")
	fs.BoolVar(&cfg.KafkaSendWhenIdle, "kafka-send-when-idle", envBool("VOUCHERD_KAFKA_SEND_WHEN_IDLE", false), "instead of lingering, send the reservation events gathered while a produce awaits its acknowledgement as soon as it is answered, and an event at once when none is in flight (VOUCHERD_KAFKA_SEND_WHEN_IDLE)")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", envDuration("VOUCHERD_WRITE_TIMEOUT", 5*time.Second), "bound on one durable write (VOUCHERD_WRITE_TIMEOUT)")
	fs.DurationVar(&cfg.RedisTimeout, "redis-timeout", envDuration("VOUCHERD_REDIS_TIMEOUT", redisgate.DefaultTimeout), "bound on one call to Redis; a reservation whose call ran out answers 503 (VOUCHERD_REDIS_TIMEOUT)")
	fs.BoolVar(&cfg.CombineWrites, "combine-writes", envBool("VOUCHERD_COMBINE_WRITES", true), "write concurrent reservations of one voucher in one PostgreSQL transaction (VOUCHERD_COMBINE_WRITES)")
	fs.DurationVar(&cfg.CombineRegroup, "combine-regroup", envDuration("VOUCHERD_COMBINE_REGROUP", pgstore.DefaultRegroup), "longest wait of a voucher's combining writer, after a batch, for its next cohort to queue (as many reservations as that batch held, or half of a hot voucher's callers; at most as long as the batch's write took); negative: the next batch goes at once (VOUCHERD_COMBINE_REGROUP)")
	fs.BoolVar(&cfg.CombineCohorts, "combine-cohorts", envBool("VOUCHERD_COMBINE_COHORTS", true), "split the callers of a hot voucher (64 or more seen together) into two cohorts of half, written one while the other comes back: more reservations a second on one voucher, more PostgreSQL CPU per reservation; needs regrouping (VOUCHERD_COMBINE_COHORTS)")
	fs.IntVar(&cfg.CombineWriters, "combine-writers", envInt("VOUCHERD_COMBINE_WRITERS", 1), "combined PostgreSQL writes of one voucher in flight at once; more than 1 starts another batch while one commits, at more CPU per reservation (VOUCHERD_COMBINE_WRITERS)")
	fs.DurationVar(&cfg.RedisFlushDelay, "redis-flush-delay", envDuration("VOUCHERD_REDIS_FLUSH_DELAY", defaultRedisFlushDelay), "how long the Redis client may wait after writing a batch of pipelined commands before writing the next, so that concurrent requests share writes (fewer system calls here and in Redis, at most this much latency per call); 0 writes at once (VOUCHERD_REDIS_FLUSH_DELAY)")
	fs.IntVar(&cfg.RedisPipelines, "redis-pipelines", envInt("VOUCHERD_REDIS_PIPELINES", defaultRedisPipelines), "connections per Redis node carrying the pipelined commands (a power of two); fewer put more commands in each write; 0 is the client's default (one per CPU up to 4 to a single node, 1 to each node of a cluster) (VOUCHERD_REDIS_PIPELINES)")
	fs.BoolVar(&cfg.RedisCombineTakes, "redis-combine-takes", envBool("VOUCHERD_REDIS_COMBINE_TAKES", true), "make the takes of one flash voucher that arrive while one of its Redis scripts runs share the next script call (one call and round trip per batch instead of per take); each is still answered as a call of its own (VOUCHERD_REDIS_COMBINE_TAKES)")
	fs.BoolVar(&cfg.MigrateOnStart, "migrate", envBool("VOUCHERD_MIGRATE", true), "apply migrations at start (VOUCHERD_MIGRATE)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", envDuration("VOUCHERD_SHUTDOWN_TIMEOUT", 15*time.Second), "graceful shutdown bound (VOUCHERD_SHUTDOWN_TIMEOUT)")
	fs.DurationVar(&cfg.ReconcileEvery, "reconcile-interval", envDuration("VOUCHERD_RECONCILE_INTERVAL", 30*time.Second), "how often flash vouchers are reconciled; 0 disables (VOUCHERD_RECONCILE_INTERVAL)")
	fs.Float64Var(&cfg.ReconcileShare, "reconcile-share", envFloat("VOUCHERD_RECONCILE_SHARE", defaultReconcileShare), "the largest share of its time reconciling one flash voucher spends working, pausing between chunks of VOUCHERD_REDIS_SCAN_COUNT orders for the rest, so that it takes at most this share of one core across voucherd, Redis and PostgreSQL; 1 never pauses (VOUCHERD_RECONCILE_SHARE)")
	fs.DurationVar(&cfg.ReconcileGrace, "reconcile-grace", envDuration("VOUCHERD_RECONCILE_GRACE", 30*time.Second), "age after which a Redis hold without a database row is released; a live instance's hold, which it settles itself, a grace period after reconciliation first saw it so (VOUCHERD_RECONCILE_GRACE)")
	fs.DurationVar(&cfg.HeartbeatTTL, "heartbeat-ttl", envDuration("VOUCHERD_HEARTBEAT_TTL", voucher.DefaultHeartbeatTTL), "how long an instance that stopped beating (every third of this) counts as alive before the Redis holds it did not write are fenced and given back (VOUCHERD_HEARTBEAT_TTL)")
	fs.DurationVar(&cfg.VoucherCacheTTL, "voucher-cache-ttl", envDuration("VOUCHERD_VOUCHER_CACHE_TTL", time.Second), "how long voucher definitions are cached in process (VOUCHERD_VOUCHER_CACHE_TTL)")
	fs.IntVar(&cfg.UnknownCodeLimit, "unknown-code-limit", envInt("VOUCHERD_UNKNOWN_CODE_LIMIT", voucher.DefaultUnknownCodeLimit), "look-ups of voucher codes that do not exist a customer may make per minute before its reservations and validations answer 429; negative disables (VOUCHERD_UNKNOWN_CODE_LIMIT)")
	fs.DurationVar(&cfg.UnknownCodeBlock, "unknown-code-block", envDuration("VOUCHERD_UNKNOWN_CODE_BLOCK", voucher.DefaultUnknownCodeBlock), "how long a customer past the unknown-code limit is refused (VOUCHERD_UNKNOWN_CODE_BLOCK)")
	fs.DurationVar(&cfg.StaleVoucherMax, "stale-voucher-max", envDuration("VOUCHERD_STALE_VOUCHER_MAX", voucher.DefaultStaleVoucherMax), "Kafka mode: how long a flash voucher's cached definition is used while PostgreSQL cannot be read; negative disables (VOUCHERD_STALE_VOUCHER_MAX)")
	fs.StringVar(&cfg.PprofAddr, "pprof-addr", envOr("VOUCHERD_PPROF_ADDR", ""), "serve Go's profiler (net/http/pprof) on this address, apart from the API; empty (the default) disables it; never expose it beyond the host (VOUCHERD_PPROF_ADDR)")
	fs.StringVar(&cfg.LogFormat, "log-format", envOr("VOUCHERD_LOG_FORMAT", "json"), "json or text (VOUCHERD_LOG_FORMAT)")
	fs.StringVar(&cfg.LogLevel, "log-level", envOr("VOUCHERD_LOG_LEVEL", "info"), "debug, info, warn or error (VOUCHERD_LOG_LEVEL)")
	fs.IntVar(&cfg.MaxDBConns, "db-max-conns", envInt("VOUCHERD_DB_MAX_CONNS", 32), "PostgreSQL pool size (VOUCHERD_DB_MAX_CONNS)")
	fs.IntVar(&cfg.MinDBConns, "db-min-conns", envInt("VOUCHERD_DB_MIN_CONNS", wholePool), "PostgreSQL connections opened at start and kept open; -1 the whole pool, 0 on demand (VOUCHERD_DB_MIN_CONNS)")
	// The OTEL_* variables are read here too, with no flags: they are the
	// standard names every OpenTelemetry deployment already sets.
	cfg.Tracing, cfg.tracingEnvErr = tracingFromEnv(os.Getenv)
	// Credentials and TLS of the dependencies: environment only (tls.go).
	var managedErr error
	cfg.Managed, managedErr = managedFromEnv(os.Getenv)
	var piiErr, eventKeyErr error
	cfg.PIIKey, piiErr = secretEnv(os.Getenv, "VOUCHERD_PII_KEY")
	cfg.EventKey, eventKeyErr = secretEnv(os.Getenv, "VOUCHERD_EVENT_KEY")
	cfg.managedEnvErr = errors.Join(dbURLErr, managedErr, piiErr, eventKeyErr)
	registerAccessFlags(fs, &cfg.Access)
	registerEventsFlags(fs, &cfg.Events)
}

// registerServeFlagsExcept is registerServeFlags without the named flags: a
// subcommand that sets some settings itself leaves their flags out, so that
// its help lists only what it honours. The left-out fields still get their
// defaults, which the subcommand then overrides.
func registerServeFlagsExcept(fs *flag.FlagSet, cfg *Config, skip ...string) {
	all := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	registerServeFlags(all, cfg)
	all.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(skip, f.Name) {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
}

// envOnlyHelp is the part of the serve-like subcommands' help that flags
// cannot show: the settings read only from the environment.
const envOnlyHelp = `
Environment only (no flags, so that secrets stay out of process listings):
  VOUCHERD_API_TOKEN    bearer token of the reservation routes (unset: loopback clients only)
  VOUCHERD_ADMIN_TOKEN  bearer token of voucher administration (unset: loopback clients only)
  VOUCHERD_READ_KEYS    name:secret list of read keys (live view, GET /vouchers/{code}, /metrics)
  OTEL_TRACES_EXPORTER  otlp turns OpenTelemetry tracing on (default none); the exporter reads
                        OTEL_EXPORTER_OTLP_* and the SDK OTEL_TRACES_SAMPLER(_ARG), OTEL_SERVICE_NAME
  VOUCHERD_PII_KEY      key (16 bytes or more; or VOUCHERD_PII_KEY_FILE) of the hash that replaces
                        e-mail addresses in logs and spans (unset: a random key per process)
  VOUCHERD_EVENT_KEY    Kafka mode: key (32 bytes or more; or VOUCHERD_EVENT_KEY_FILE) that signs the
                        reservation events; the consumer then refuses unsigned ones (unset: no signatures)
` + managedEnvHelp

// managedEnvHelp is the part of envOnlyHelp that `consume` reads too: the
// credentials and TLS of the dependencies (tls.go).
const managedEnvHelp = `
Managed services, environment only (README.md, "Managed services"); a *_FILE names a file holding the value:
  VOUCHERD_DATABASE_URL_FILE          the PostgreSQL URL, instead of VOUCHERD_DATABASE_URL
  VOUCHERD_REDIS_USERNAME             Redis ACL user (needs a password)
  VOUCHERD_REDIS_PASSWORD             Redis password (alone: the default user)
  VOUCHERD_REDIS_PASSWORD_FILE        or a file holding it
  VOUCHERD_REDIS_TLS                  true connects to Redis with TLS (default false)
  VOUCHERD_REDIS_CA_FILE              PEM CA the server must chain to (default: the system's roots)
  VOUCHERD_REDIS_CERT_FILE            client certificate (PEM), with VOUCHERD_REDIS_KEY_FILE
  VOUCHERD_REDIS_KEY_FILE             its key
  VOUCHERD_REDIS_SERVER_NAME          name the server's certificate must carry (default: the host)
  VOUCHERD_KAFKA_TLS                  true connects every Kafka client with TLS (default false)
  VOUCHERD_KAFKA_CA_FILE              as for Redis
  VOUCHERD_KAFKA_CERT_FILE            as for Redis
  VOUCHERD_KAFKA_KEY_FILE             as for Redis
  VOUCHERD_KAFKA_SERVER_NAME          as for Redis
  VOUCHERD_KAFKA_SASL_MECHANISM       PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: no SASL)
  VOUCHERD_KAFKA_SASL_USERNAME        the SASL user
  VOUCHERD_KAFKA_SASL_PASSWORD        its password
  VOUCHERD_KAFKA_SASL_PASSWORD_FILE   or a file holding it
`

// validate checks combinations flags cannot express alone.
func (c *Config) validate() error {
	if c.tracingEnvErr != nil {
		return c.tracingEnvErr
	}
	if err := c.checkInt32(); err != nil {
		return err
	}
	if c.managedEnvErr != nil {
		return c.managedEnvErr
	}
	if err := c.Managed.load(); err != nil {
		return err
	}
	if err := c.validateAccess(); err != nil {
		return err
	}
	if err := c.Events.validate(c.KafkaBrokers); err != nil {
		return err
	}
	switch c.FlashWrites {
	case "sync", "kafka":
	default:
		return fmt.Errorf("--flash-writes must be sync or kafka, not %q", c.FlashWrites)
	}
	if c.FlashWrites == "kafka" && len(c.KafkaBrokers) == 0 {
		return fmt.Errorf("--flash-writes=kafka needs VOUCHERD_KAFKA_BROKERS")
	}
	if c.FlashWrites == "kafka" && len(c.RedisAddrs) == 0 {
		return fmt.Errorf("--flash-writes=kafka needs VOUCHERD_REDIS_ADDR")
	}
	if c.FlashWrites == "kafka" && c.FlashFallback {
		return fmt.Errorf("--flash-fallback works only with --flash-writes=sync: in kafka mode PostgreSQL lags the gate")
	}
	if c.ReservationTTL <= 0 {
		return fmt.Errorf("--reservation-ttl must be positive")
	}
	if c.MaxHold < 0 || (c.MaxHold > 0 && c.MaxHold < c.ReservationTTL) {
		return fmt.Errorf("--max-hold (%s) must not be shorter than --reservation-ttl (%s)", c.MaxHold, c.ReservationTTL)
	}
	if c.LowStockShare > 1 {
		return fmt.Errorf("--low-stock-share must be at most 1")
	}
	if c.ReconcileShare < 0 || c.ReconcileShare > 1 {
		return fmt.Errorf("--reconcile-share must be between 0 and 1 (0 and 1: no pause)")
	}
	if c.HeartbeatTTL == 0 {
		c.HeartbeatTTL = voucher.DefaultHeartbeatTTL
	}
	if c.HeartbeatTTL < 300*time.Millisecond {
		return fmt.Errorf("--heartbeat-ttl must be at least 300ms")
	}
	if c.MaxDBConns <= 0 {
		return fmt.Errorf("--db-max-conns must be positive")
	}
	if c.MinDBConns == wholePool {
		c.MinDBConns = c.MaxDBConns
	}
	if c.MinDBConns < 0 || c.MinDBConns > c.MaxDBConns {
		return fmt.Errorf("--db-min-conns must be -1 (the whole pool) or between 0 and --db-max-conns (%d), not %d", c.MaxDBConns, c.MinDBConns)
	}
	return nil
}

// wholePool is the --db-min-conns that opens every connection of the pool at
// start (the default): measured on the normal-load benchmark, a pool opened
// on demand made the first second's reservations wait for new connections
// (p99 of the whole run 138-170 ms against 41-57 ms; BENCHMARKS.md).
const wholePool = -1
