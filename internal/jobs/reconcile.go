package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Reconciler compares Redis with PostgreSQL; voucher.Service implements it.
type Reconciler interface {
	ReconcileAll(ctx context.Context, repair bool, grace, keep time.Duration) ([]voucher.ReconcileReport, error)
}

// ReconcileConfig configures the reconciliation job. Zero values mean
// defaults.
type ReconcileConfig struct {
	// Interval between runs (default 30s).
	Interval time.Duration
	// Grace is how old a Redis hold without a database row must be before
	// it is given back (default 30s).
	Grace time.Duration
	// Keep is how long after its end a voucher is still reconciled
	// (default 24h).
	Keep time.Duration
	// OnReport receives every report, for metrics.
	OnReport func(voucher.ReconcileReport)
	// Logger receives drift and failures.
	Logger *slog.Logger
}

// Reconcile is the background reconciliation job.
type Reconcile struct {
	cfg    ReconcileConfig
	target Reconciler

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewReconcile returns the job; call Start to run it.
func NewReconcile(target Reconciler, cfg ReconcileConfig) *Reconcile {
	if cfg.Interval <= 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 30 * time.Second
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Reconcile{cfg: cfg, target: target}
}

// Start runs reconciliation every interval until Stop or ctx ends.
func (r *Reconcile) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		t := time.NewTicker(r.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := r.runOnce(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Logger.Warn("reconciliation failed", "err", err)
			}
		}
	}()
}

// Stop ends the job and waits for the run in progress.
func (r *Reconcile) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.cancel = nil
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// runOnce reconciles every live flash voucher with repairs on and returns
// the reports.
func (r *Reconcile) runOnce(ctx context.Context) ([]voucher.ReconcileReport, error) {
	reports, err := r.target.ReconcileAll(ctx, true, r.cfg.Grace, r.cfg.Keep)
	for _, rep := range reports {
		if r.cfg.OnReport != nil {
			r.cfg.OnReport(rep)
		}
		if !rep.Consistent() {
			r.cfg.Logger.Warn("reconciliation drift", "code", rep.Code, "drift", rep.Drift,
				"redisRemaining", rep.RedisRemaining, "expectedRemaining", rep.ExpectedRemaining,
				"orphans", rep.Found.Orphans, "abandoned", rep.Found.Abandoned, "stale", rep.Found.Stale, "missing", rep.Found.Missing,
				"uncommitted", rep.Found.Uncommitted, "unconfirmed", rep.Found.Unconfirmed, "inFlight", rep.Found.InFlight,
				"repaired", rep.Repaired, "skipped", rep.Skipped)
		}
		if len(rep.CounterDrifts) > 0 {
			r.cfg.Logger.Error("store counters differ from the held rows", "code", rep.Code, "counters", rep.CounterDrifts)
		}
	}
	return reports, err
}
