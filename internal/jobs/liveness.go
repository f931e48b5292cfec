package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Liver is what the liveness job drives; voucher.Service implements it.
type Liver interface {
	// Heartbeat tells the gate this instance is alive.
	Heartbeat(ctx context.Context) error
	// SettleUnknown decides this instance's writes whose outcome was
	// unknown and that no retry settled.
	SettleUnknown(ctx context.Context) (int, error)
	// RecoverDead reconciles when another instance's heartbeat is gone.
	RecoverDead(ctx context.Context, grace, keep time.Duration) ([]string, error)
}

// LivenessConfig configures the liveness job. Zero values mean defaults.
type LivenessConfig struct {
	// Beat is the interval between heartbeats (default 1s); it must stay
	// well below the service's HeartbeatTTL.
	Beat time.Duration
	// Interval is the interval between looks for dead instances (default
	// 1s).
	Interval time.Duration
	// Settle is the interval between rounds of settling this instance's
	// writes of unknown outcome (default 250ms): a round with nothing due
	// makes no call, and a short one settles soon after Redis or
	// PostgreSQL answers again.
	Settle time.Duration
	// Grace and Keep are passed to the reconciliation run when an instance
	// is found dead (defaults 30s and 24h, as ReconcileConfig).
	Grace, Keep time.Duration
	// Logger receives failures.
	Logger *slog.Logger
}

// Liveness is the background job that keeps this instance's heartbeat,
// settles its writes of unknown outcome, and recovers the holds of dead
// instances. Each runs on its own so that a slow recovery never delays a
// heartbeat or a settle.
type Liveness struct {
	cfg    LivenessConfig
	target Liver

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewLiveness returns the job; call Start to run it.
func NewLiveness(target Liver, cfg LivenessConfig) *Liveness {
	if cfg.Beat <= 0 {
		cfg.Beat = time.Second
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 250 * time.Millisecond
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
	return &Liveness{cfg: cfg, target: target}
}

// Start beats once, then runs the job until Stop or ctx ends.
func (l *Liveness) Start(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return
	}
	if err := l.target.Heartbeat(ctx); err != nil {
		l.cfg.Logger.Warn("heartbeat failed", "err", err)
	}
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		every(ctx, l.cfg.Beat, func() {
			if err := l.target.Heartbeat(ctx); err != nil && ctx.Err() == nil {
				l.cfg.Logger.Warn("heartbeat failed", "err", err)
			}
		})
	}()
	go func() {
		defer wg.Done()
		every(ctx, l.cfg.Settle, func() {
			if err := l.settleOnce(ctx); err != nil && ctx.Err() == nil {
				l.cfg.Logger.Warn("settling unknown writes failed", "err", err)
			}
		})
	}()
	go func() {
		defer wg.Done()
		every(ctx, l.cfg.Interval, func() {
			if _, err := l.target.RecoverDead(ctx, l.cfg.Grace, l.cfg.Keep); err != nil && ctx.Err() == nil {
				l.cfg.Logger.Warn("recovering dead instances failed", "err", err)
			}
		})
	}()
	go func() {
		wg.Wait()
		close(l.done)
	}()
}

// every calls f every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f()
	}
}

// Stop ends the job and waits for the round in progress.
func (l *Liveness) Stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel = nil
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// runOnce settles this instance's unknown writes, then recovers the holds
// of dead instances.
func (l *Liveness) runOnce(ctx context.Context) error {
	if err := l.settleOnce(ctx); err != nil {
		return err
	}
	_, err := l.target.RecoverDead(ctx, l.cfg.Grace, l.cfg.Keep)
	return err
}

// settleOnce settles this instance's writes of unknown outcome that are
// due.
func (l *Liveness) settleOnce(ctx context.Context) error {
	n, err := l.target.SettleUnknown(ctx)
	if n > 0 {
		l.cfg.Logger.Info("writes of unknown outcome settled", "n", n)
	}
	return err
}
