package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/voucherd/voucherd/internal/httpapi"
	"github.com/voucherd/voucherd/internal/jobs"
	"github.com/voucherd/voucherd/internal/kafkalog"
	"github.com/voucherd/voucherd/internal/live"
	"github.com/voucherd/voucherd/internal/metrics"
	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/redisgate"
	"github.com/voucherd/voucherd/internal/tracing"
	"github.com/voucherd/voucherd/internal/voucher"
)

// App is one voucherd process: the stores, the service, the HTTP server and
// the background jobs. Tests start it on port 0 with Start and end it with
// Close, as `serve` does.
type App struct {
	cfg     Config
	log     *slog.Logger
	store   *pgstore.Store
	gate    *redisgate.Gate
	kafka   *kafkaParts
	svc     *voucher.Service
	api     *httpapi.Server
	keys    *keySource
	metrics *metrics.Metrics
	expiry  *jobs.Expiry
	recon   *jobs.Reconcile
	// liveness beats this instance's heartbeat and settles what dead
	// instances and unknown write outcomes left (flash modes only).
	liveness *jobs.Liveness
	// tracing is nil unless OpenTelemetry tracing is on.
	tracing *tracing.Provider
	live    *live.Hub // live sale view
	// events are the feed, the webhooks and the events topic.
	events *eventsParts
	// notifier publishes threshold events to Kafka; nil without
	// Kafka brokers.
	notifier *kafkalog.Notifier
	server   *http.Server
	pprof    *http.Server // nil unless Config.PprofAddr is set
	// metricsSrv serves /metrics apart from the API; nil unless
	// Config.Access.MetricsAddr is set.
	metricsSrv *http.Server
	metricsLn  net.Listener
	ln         net.Listener
	served     chan error
}

// NewApp opens the dependencies and wires the service. It does not listen.
func NewApp(ctx context.Context, cfg Config, log *slog.Logger) (_ *App, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg, log, err = redactPII(cfg, log); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			a.closeDeps()
		}
	}()
	if a.tracing, log, err = openTracing(ctx, cfg, log); err != nil {
		return nil, err
	}
	a.log = log
	a.store, err = pgstore.Open(ctx, tracePostgres(pgstore.Config{URL: cfg.DatabaseURL, MaxConns: int32(cfg.MaxDBConns), //nolint:gosec // G115: validate accepted it
		MinConns: int32(cfg.MinDBConns), Combining: pgstore.CombinerConfig{Disabled: !cfg.CombineWrites, Writers: cfg.CombineWriters, Regroup: cfg.CombineRegroup, SingleCohort: !cfg.CombineCohorts}}, a.tracing)) //nolint:gosec // G115: validate accepted it
	if err != nil {
		return nil, fmt.Errorf("open PostgreSQL: %w", err)
	}
	if err := checkPostgres(ctx, a.store); err != nil {
		return nil, err
	}
	if cfg.MigrateOnStart {
		if err := a.store.Migrate(ctx); err != nil {
			return nil, fmt.Errorf("migrate: %w", err)
		}
	}
	var gate voucher.Gate
	if len(cfg.RedisAddrs) > 0 {
		redisTLS, err := cfg.Managed.redisTLS()
		if err != nil {
			return nil, err
		}
		a.gate, err = redisgate.New(traceRedis(redisgate.Config{
			Addrs: cfg.RedisAddrs, KeyPrefix: cfg.RedisKeyPrefix, SoldOutTTL: cfg.SoldOutTTL,
			Timeout: cfg.RedisTimeout, ScanCount: cfg.RedisScanCount,
			FlushDelay: cfg.RedisFlushDelay, Pipelines: cfg.RedisPipelines, CombineTakes: cfg.RedisCombineTakes,
			Username: cfg.Managed.Redis.Username, Password: cfg.Managed.Redis.Password, TLS: redisTLS,
		}, a.tracing))
		if err != nil {
			return nil, fmt.Errorf("redis: open: %w", err)
		}
		gate = a.gate
	}
	counts := metrics.Counts{StatementReruns: a.store.StatementReruns,
		CombinedFlushes:      func() uint64 { return a.store.CombinerStats().Flushes },
		CombinedReservations: func() uint64 { return a.store.CombinerStats().Reservations },
		CombinedFlushSeconds: func() float64 { return a.store.CombinerStats().FlushTime.Seconds() }}
	if a.gate != nil {
		counts.SoldOutHits = a.gate.SoldOutHits
	}
	a.metrics = metrics.New(counts)
	if gate != nil {
		gate = a.metrics.InstrumentGate(gate)
	}
	// --- live sale view ---
	a.live, err = live.NewHub(live.Config{
		// a.svc is set below, before the first watcher can arrive.
		Voucher:  func(ctx context.Context, code string) (voucher.Voucher, error) { return a.svc.Voucher(ctx, code) },
		Released: a.store.ReleasedCount,
		Logger:   log,
	})
	if err != nil {
		return nil, err
	}
	// --- end live sale view ---
	svcCfg := voucher.ServiceConfig{
		Store: a.metrics.InstrumentStore(a.store), Gate: gate, FlashWrites: voucher.FlashWrites(cfg.FlashWrites),
		ReservationTTL: cfg.ReservationTTL, FlashFallback: cfg.FlashFallback,
		VoucherCacheTTL: cfg.VoucherCacheTTL, StaleVoucherMax: cfg.StaleVoucherMax, WriteTimeout: cfg.WriteTimeout,
		Logger: log, Observer: liveObserver{Observer: a.metrics, hub: a.live},
		MaxHold: cfg.MaxHold, LowStockShare: cfg.LowStockShare, HeartbeatTTL: cfg.HeartbeatTTL,
		UnknownCodeLimit: cfg.UnknownCodeLimit, UnknownCodeBlock: cfg.UnknownCodeBlock,
		UnknownCodeLimitPerClient: cfg.Access.UnknownCodeLimitPerClient, UnknownCodeLimitPerKey: cfg.Access.UnknownCodeLimitPerKey,
		ReconcileChunk: cfg.RedisScanCount, ReconcileShare: cfg.ReconcileShare, ReconcileFindings: cfg.reconcileFindings,
		Clock: cfg.clock,
	}
	if len(cfg.KafkaBrokers) > 0 && cfg.LowStockShare >= 0 {
		if a.notifier, err = openNotifier(ctx, cfg, log, a.tracing); err != nil {
			return nil, fmt.Errorf("kafka: open events: %w", err)
		}
		svcCfg.Notifier = a.notifier
	}
	if cfg.FlashWrites == "kafka" {
		a.kafka, err = openKafka(ctx, cfg, a.store, a.metrics, log, a.tracing)
		if err != nil {
			return nil, fmt.Errorf("kafka: open: %w", err)
		}
		svcCfg.Events = a.metrics.InstrumentEvents(a.kafka.events)
	}
	a.svc, err = voucher.NewService(svcCfg)
	if err != nil {
		return nil, err
	}
	if a.events, err = openEvents(ctx, cfg, a.store, a.metrics, log); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	if a.keys, err = newKeySource(cfg, log); err != nil {
		return nil, err
	}
	a.keys.usable = func(ok bool) {
		if ok {
			a.metrics.Access.KeysFileUsable.Set(1)
			return
		}
		a.metrics.Access.KeysFileUsable.Set(0)
		a.metrics.Access.KeysFileErrors.Inc()
	}
	metricsOnAPI := a.metrics.Handler()
	if cfg.Access.MetricsAddr != "" {
		metricsOnAPI = nil
	}
	a.api, err = httpapi.New(httpapi.Config{
		Service: a.svc, Keys: a.keys.ring,
		Logger: log, Metrics: a.metrics, MetricsHandler: metricsOnAPI, Ready: a.ready,
		ReconcileGrace: cfg.ReconcileGrace,
		RateLimits: cfg.Access.rateLimits(func(limit string) {
			a.metrics.Access.RateLimited.WithLabelValues(limit).Inc()
		}),
		Extra: bothRoutes(httpapi.LiveRoutes(a.live), a.events.routes()),
	})
	if err != nil {
		return nil, err
	}
	a.expiry = jobs.NewExpiry(a.svc, jobs.ExpiryConfig{Interval: cfg.ExpiryInterval, Logger: log})
	if a.gate != nil {
		a.liveness = jobs.NewLiveness(a.svc, jobs.LivenessConfig{
			Beat: cfg.HeartbeatTTL / 3, Grace: cfg.ReconcileGrace, Logger: log})
	}
	if a.gate != nil && cfg.ReconcileEvery > 0 {
		a.recon = jobs.NewReconcile(a.svc, jobs.ReconcileConfig{
			Interval: cfg.ReconcileEvery, Grace: cfg.ReconcileGrace, Logger: log,
			OnReport: func(r voucher.ReconcileReport) {
				a.metrics.Drift.WithLabelValues(r.Code).Set(float64(r.Drift))
				if r.BudgetAmount > 0 {
					a.metrics.BudgetRemaining.WithLabelValues(r.Code).Set(float64(max(r.BudgetAmount-r.DatabaseBudgetHeld, 0)))
					a.metrics.BudgetDrift.WithLabelValues(r.Code).Set(float64(r.BudgetDrift))
				}
				var windowDrift int64
				for _, w := range r.Windows {
					windowDrift += w.Drift
				}
				a.metrics.WindowDrift.WithLabelValues(r.Code).Set(float64(windowDrift))
				if r.Repaired {
					a.metrics.DriftRepairs.WithLabelValues("orphan").Add(float64(r.Found.Orphans))
					a.metrics.DriftRepairs.WithLabelValues("abandoned").Add(float64(r.Found.Abandoned))
					a.metrics.DriftRepairs.WithLabelValues("stale").Add(float64(r.Found.Stale))
					a.metrics.DriftRepairs.WithLabelValues("missing").Add(float64(r.Found.Missing))
					a.metrics.DriftRepairs.WithLabelValues("uncommitted").Add(float64(r.Found.Uncommitted))
					a.metrics.DriftRepairs.WithLabelValues("unconfirmed").Add(float64(r.Found.Unconfirmed))
					a.metrics.DriftRepairs.WithLabelValues("restored").Add(float64(r.RestoredCounters))
				}
			},
		})
	}
	return a, nil
}

// ready fails while a dependency is down, so a load balancer moves traffic
// to healthy instances.
func (a *App) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := a.store.Ping(ctx); err != nil {
		return httpapi.DependencyDown("postgres", err)
	}
	if a.gate != nil {
		if err := a.gate.Ping(ctx); err != nil {
			return httpapi.DependencyDown("redis", err)
		}
	}
	if a.kafka != nil {
		if err := a.kafka.ping(ctx); err != nil {
			return httpapi.DependencyDown("kafka", err)
		}
	}
	return nil
}

// Start listens on cfg.Addr (port 0 picks a free port) and starts serving
// and the background jobs.
func (a *App) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", a.cfg.Addr, err)
	}
	a.ln = ln
	a.warnAboutTokens()
	a.keys.start()
	handler := a.api.Handler()
	if a.tracing != nil {
		handler = a.tracing.Handler(handler)
	}
	a.server = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	a.server.RegisterOnShutdown(a.live.Close) // live streams would hold Shutdown until its timeout
	if a.cfg.PprofAddr != "" {
		if err := a.startPprof(); err != nil {
			ln.Close()
			return err
		}
	}
	if a.cfg.Access.MetricsAddr != "" {
		if err := a.startMetrics(); err != nil {
			ln.Close()
			if a.pprof != nil {
				_ = a.pprof.Close()
			}
			return err
		}
	}
	// The first heartbeat before the first request: a hold is never taken
	// by an instance the gate does not know alive.
	if a.liveness != nil {
		a.liveness.Start(context.WithoutCancel(ctx))
	}
	a.served = make(chan error, 1)
	go func() { a.served <- a.server.Serve(ln) }()
	a.expiry.Start(context.WithoutCancel(ctx))
	a.events.runner.Start(context.WithoutCancel(ctx))
	if a.recon != nil {
		a.recon.Start(context.WithoutCancel(ctx))
	}
	if a.kafka != nil && a.cfg.RunConsumer {
		a.kafka.startConsumer(context.WithoutCancel(ctx))
	}
	a.log.Info("voucherd serving", "addr", ln.Addr().String(), "flashWrites", a.cfg.FlashWrites,
		"redis", strings.Join(a.cfg.RedisAddrs, ","), "kafka", strings.Join(a.cfg.KafkaBrokers, ","),
		"reservationTTL", a.cfg.ReservationTTL.String(), "version", version)
	return nil
}

func (a *App) warnAboutTokens() {
	api, admin := a.keys.ring.Names()
	for _, t := range []struct {
		name  string
		names []string
	}{{"VOUCHERD_API_TOKEN", api}, {"VOUCHERD_ADMIN_TOKEN", admin}} {
		if len(t.names) == 0 {
			a.log.Warn("!!! " + t.name + " is not set (nor any key of its role): its routes accept requests from loopback clients only, without authentication. Set it before exposing voucherd.")
		}
	}
	a.log.Info("API keys loaded", "api", api, "admin", admin, "read", a.keys.ring.ReadNames())
}

// Addr is the address the server listens on.
func (a *App) Addr() string { return a.ln.Addr().String() }

// Wait blocks until the server stops by itself (an error) or ctx ends.
func (a *App) Wait(ctx context.Context) error {
	select {
	case err := <-a.served:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
		return nil
	}
}

// Close shuts down gracefully within cfg.ShutdownTimeout: /readyz fails,
// the listener closes, in-flight requests finish, then the consumer commits,
// the producer flushes, jobs stop and connections close.
func (a *App) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	if a.pprof != nil {
		_ = a.pprof.Close()
	}
	if a.metricsSrv != nil {
		_ = a.metricsSrv.Close()
	}
	if a.server != nil {
		a.api.Drain()
		if err := a.server.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
	}
	if a.expiry != nil {
		a.expiry.Stop()
	}
	if a.recon != nil {
		a.recon.Stop()
	}
	if a.keys != nil {
		a.keys.close()
	}
	if a.liveness != nil {
		a.liveness.Stop()
	}
	a.closeDeps()
	a.log.Info("voucherd stopped")
	return errors.Join(errs...)
}

func (a *App) closeDeps() {
	if a.live != nil {
		a.live.Close()
	}
	if a.events != nil {
		a.events.close()
	}
	if a.kafka != nil {
		a.kafka.close()
	}
	if a.notifier != nil {
		a.notifier.Close()
	}
	if a.gate != nil {
		a.gate.Close()
	}
	if a.store != nil {
		a.store.Close()
	}
	closeTracing(a.tracing, a.log)
}

// newLogger builds the process logger: JSON in production, text in dev.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format must be json or text, not %q", format)
}

// --- live sale view ---

// liveObserver sends each observation to the metrics and reservation
// outcomes also to the live hub.
type liveObserver struct {
	voucher.Observer
	hub *live.Hub
}

// Reserved implements voucher.Observer.
func (o liveObserver) Reserved(voucherCode string, mode voucher.Mode, code voucher.ErrorCode, replay bool, d time.Duration) {
	o.Observer.Reserved(voucherCode, mode, code, replay, d)
	o.hub.Reserved(voucherCode, mode, code, replay, d)
}

// --- end live sale view ---

// startPprof serves net/http/pprof on Config.PprofAddr, on a mux of its own
// so that the API never exposes it.
func (a *App) startPprof() error {
	ln, err := net.Listen("tcp", a.cfg.PprofAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (pprof): %w", a.cfg.PprofAddr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	a.pprof = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = a.pprof.Serve(ln) }()
	a.log.Warn("profiler serving; keep it off the network", "addr", ln.Addr().String())
	return nil
}

// startMetrics serves /metrics on Config.Access.MetricsAddr, on a mux of its
// own: the serving port then has no /metrics.
func (a *App) startMetrics() error {
	ln, err := net.Listen("tcp", a.cfg.Access.MetricsAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (metrics): %w", a.cfg.Access.MetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metrics.Handler())
	a.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, MaxHeaderBytes: maxHeaderBytes}
	a.metricsLn = ln
	go func() { _ = a.metricsSrv.Serve(ln) }()
	a.log.Info("metrics serving", "addr", ln.Addr().String())
	return nil
}

// MetricsAddr is the address of the metrics listener, "" without one.
func (a *App) MetricsAddr() string {
	if a.metricsLn == nil {
		return ""
	}
	return a.metricsLn.Addr().String()
}
