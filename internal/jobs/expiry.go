// Package jobs runs voucherd's background work inside `voucherd serve`: the
// expiry of RESERVED holds, the reconciliation of Redis with PostgreSQL, and
// the liveness of the instance (heartbeat, writes of unknown outcome, holds
// of dead instances).
// Each job has Start, Stop and a runOnce that tests call directly.
package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Expirer releases reservations past their expiry. voucher.Service
// implements it: the store releases, then the gate gets the uses back.
type Expirer interface {
	ExpireDue(ctx context.Context, limit int) (int, error)
}

// ExpiryConfig configures the expiry job. Zero values mean defaults.
type ExpiryConfig struct {
	// Interval between sweeps (default 1s).
	Interval time.Duration
	// BatchSize is the most rows one transaction releases (default 500).
	BatchSize int
	// Logger receives failures.
	Logger *slog.Logger
}

// Expiry is the background job that releases expired reservations. Any
// number of instances may run it at once: the store releases each row once.
type Expiry struct {
	cfg    ExpiryConfig
	target Expirer

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewExpiry returns the job; call Start to run it.
func NewExpiry(target Expirer, cfg ExpiryConfig) *Expiry {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Expiry{cfg: cfg, target: target}
}

// Start runs the sweep every interval until Stop or ctx ends.
func (e *Expiry) Start(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancel != nil {
		return
	}
	ctx, e.cancel = context.WithCancel(ctx)
	e.done = make(chan struct{})
	go func() {
		defer close(e.done)
		t := time.NewTicker(e.cfg.Interval)
		defer t.Stop()
		for {
			if _, err := e.runOnce(ctx); err != nil && ctx.Err() == nil {
				e.cfg.Logger.Warn("expiry sweep failed", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the job and waits for the sweep in progress.
func (e *Expiry) Stop() {
	e.mu.Lock()
	cancel, done := e.cancel, e.done
	e.cancel = nil
	e.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// runOnce releases everything due, batch after batch, and returns how many
// reservations it released.
func (e *Expiry) runOnce(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := e.target.ExpireDue(ctx, e.cfg.BatchSize)
		total += n
		if err != nil || n < e.cfg.BatchSize {
			if total > 0 {
				e.cfg.Logger.Info("expired reservations released", "count", total)
			}
			return total, err
		}
	}
}
