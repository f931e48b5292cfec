// Package pgstore is the PostgreSQL adapter of voucherd: it implements
// voucher.Store with pgx (a pgxpool, no ORM), owns the schema (embedded
// numbered migrations) and the stored functions (one file each), and
// translates driver errors into *voucher.Error once, in interpretError.
//
// Every state change of a redemption (reserve, confirm, release, expiry, the
// Kafka consumer's batch) is one call of a plpgsql function defined in
// functions/: one round trip, one implicit transaction, and the same lock
// order everywhere (redemption rows, then customer counters, then voucher
// rows), so that they never deadlock and the hot voucher row is locked last
// and for as short a time as possible.
package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Defaults of Config.
const (
	DefaultMaxConns        = 16
	DefaultConnectTimeout  = 5 * time.Second
	DefaultApplicationName = "voucherd"
)

// Config configures a Store. Zero values mean the defaults.
type Config struct {
	// URL is a PostgreSQL connection URL or DSN; required.
	URL string
	// MaxConns bounds the pool (default DefaultMaxConns). On a hot voucher
	// more connections only queue on the row lock inside the server.
	MaxConns int32
	// MinConns is the number of idle connections kept open (default 0).
	MinConns int32
	// ConnectTimeout bounds establishing one connection (default 5s).
	ConnectTimeout time.Duration
	// StatementTimeout, when positive, is set as the server's
	// statement_timeout for every connection (default: the server's).
	StatementTimeout time.Duration
	// ApplicationName is shown in pg_stat_activity (default "voucherd").
	ApplicationName string
	// Combining configures the write combining of Reserve (combiner.go),
	// on by default: concurrent reservations of one voucher are written
	// together, one transaction per batch.
	Combining CombinerConfig
	// Tracer, when set, is called by pgx for every statement besides the
	// store's own statement counter (tracing).
	Tracer pgx.QueryTracer
	// BatchContext, when set, wraps the context of each combined write: it
	// gets the contexts of the reservations the write carries and returns
	// the context to write with and a function called once the write is
	// done. Tracing uses it to link the write to every request it carries.
	BatchContext func(ctx context.Context, carried []context.Context) (context.Context, func())
}

func (c Config) withDefaults() (Config, error) {
	if c.URL == "" {
		return c, errors.New("pgstore: Config.URL is required")
	}
	if c.MaxConns < 0 || c.MinConns < 0 {
		return c, errors.New("pgstore: Config.MaxConns and MinConns must be >= 0")
	}
	if c.ConnectTimeout < 0 || c.StatementTimeout < 0 {
		return c, errors.New("pgstore: Config timeouts must be >= 0")
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MinConns > c.MaxConns {
		return c, fmt.Errorf("pgstore: Config.MinConns %d is above MaxConns %d", c.MinConns, c.MaxConns)
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.ApplicationName == "" {
		c.ApplicationName = DefaultApplicationName
	}
	var err error
	c.Combining, err = c.Combining.withDefaults()
	return c, err
}

// Store is the PostgreSQL implementation of voucher.Store. It is safe for
// concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	queries *atomic.Int64
	comb    *combiner // nil when combining is disabled
	reads   orderReads
	reruns  atomic.Uint64
	flushes flushCounts
	// batchContext is Config.BatchContext.
	batchContext func(ctx context.Context, carried []context.Context) (context.Context, func())
}

var _ voucher.Store = (*Store)(nil)

// Open creates the connection pool. It does not connect: the first query (or
// Ping) does, so a service can start while the database is still coming up.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("pgstore: parse URL: %w", err)
	}
	pcfg.MaxConns = cfg.MaxConns
	pcfg.MinConns = cfg.MinConns
	pcfg.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	pcfg.ConnConfig.RuntimeParams["application_name"] = cfg.ApplicationName
	if cfg.StatementTimeout > 0 {
		pcfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10)
	}
	counter := new(atomic.Int64)
	pcfg.ConnConfig.Tracer = queryCounter{n: counter}
	if cfg.Tracer != nil {
		pcfg.ConnConfig.Tracer = multitracer.New(queryCounter{n: counter}, cfg.Tracer)
	}

	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: create pool: %w", err)
	}
	s := &Store{pool: pool, queries: counter, batchContext: cfg.BatchContext}
	if !cfg.Combining.Disabled {
		s.comb = newCombiner(cfg.Combining, s.writeBatch)
	}
	return s, nil
}

// acquire takes a connection for a write whose failure must be classified
// (interpretWriteError): a failure here is marked notSent.
func (s *Store) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, notSent{err}
	}
	return conn, nil
}

// Close closes the pool, waiting for the connections in use to be returned.
func (s *Store) Close() { s.pool.Close() }

// Pool returns the underlying pool, for tests and the benchmark's checks.
// Statements sent through it are counted by Queries too.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Queries returns the number of SQL statements sent so far through the pool,
// including BEGIN and COMMIT (not pings). It lets tests assert that a feature
// does not multiply database load.
func (s *Store) Queries() int64 { return s.queries.Load() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return interpretError(err)
	}
	return nil
}

// queryCounter counts statements; pgx calls it for every Query, QueryRow and
// Exec on a pool connection.
type queryCounter struct{ n *atomic.Int64 }

func (c queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

//go:embed queries/*.sql
var queryFS embed.FS

// mustQuery returns the text of queries/name.sql; a missing file is a build
// mistake, caught when the package initialises.
func mustQuery(name string) string {
	b, err := queryFS.ReadFile("queries/" + name + ".sql")
	if err != nil {
		panic(fmt.Sprintf("pgstore: query %s: %v", name, err))
	}
	return string(b)
}

var (
	qVoucherInsert        = mustQuery("voucher_insert")
	qVoucherGet           = mustQuery("voucher_get")
	qVoucherDefinition    = mustQuery("voucher_definition")
	qVoucherLock          = mustQuery("voucher_lock")
	qVoucherMaxHeld       = mustQuery("voucher_max_customer_held")
	qVoucherUpdate        = mustQuery("voucher_update")
	qReserve              = mustQuery("reserve")
	qReserveBatch         = mustQuery("reserve_batch")
	qReplace              = mustQuery("replace")
	qValidate             = mustQuery("validate")
	qConfirm              = mustQuery("confirm")
	qRelease              = mustQuery("release")
	qExpire               = mustQuery("expire")
	qRedemptionGet        = mustQuery("redemption_get")
	qRedemptionsOfVoucher = mustQuery("redemptions_of_voucher")
	qApplyReserved        = mustQuery("apply_reserved")
	qApplyReplace         = mustQuery("apply_replace")
	qFlashVouchers        = mustQuery("flash_vouchers")
	qExtend               = mustQuery("extend")
	qVoucherHolds         = mustQuery("voucher_holds")
	qInvariants           = mustQuery("invariants")
)
