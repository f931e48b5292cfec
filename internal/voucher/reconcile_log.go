package voucher

import (
	"context"
	"log/slog"
	"time"
)

// passLog times one reconciliation pass's phases for its log line
// ("reconciliation pass", at info level once the pass ends; its start at
// debug level), so that a pass can be set beside what ran
// meanwhile (a bench's slow requests). Not safe for concurrent use.
type passLog struct {
	log   *slog.Logger
	code  string
	start time.Time
	// phase is the name of the phase under way and since when.
	phase      string
	phaseStart time.Time
	attrs      []slog.Attr
}

func newPassLog(ctx context.Context, log *slog.Logger, code string, repair bool) *passLog {
	p := &passLog{log: log, code: code, start: time.Now()}
	p.phaseStart = p.start
	log.LogAttrs(ctx, slog.LevelDebug, "reconciliation pass started", slog.String("code", code), slog.Bool("repair", repair))
	return p
}

// next ends the phase under way, if any, and starts the named one.
func (p *passLog) next(name string) {
	now := time.Now()
	p.end(now)
	p.phase, p.phaseStart = name, now
}

// end records the phase under way as an attribute: when it began after
// the pass's start and how long it took.
func (p *passLog) end(now time.Time) {
	if p.phase == "" {
		return
	}
	p.attrs = append(p.attrs, slog.Group(p.phase,
		slog.Duration("at", p.phaseStart.Sub(p.start)), slog.Duration("took", now.Sub(p.phaseStart))))
	p.phase = ""
}

// done logs the pass's line: its phases, what it found and whether it
// failed.
func (p *passLog) done(ctx context.Context, rep *ReconcileReport, err error) {
	now := time.Now()
	p.end(now)
	attrs := append([]slog.Attr{slog.String("code", p.code), slog.Time("started", p.start),
		slog.Duration("took", now.Sub(p.start)), slog.Bool("repaired", rep.Repaired), slog.Int64("drift", rep.Drift),
		slog.Int("inFlight", len(rep.InFlight)), slog.Int("missing", len(rep.Missing)),
		slog.Int("orphans", len(rep.Orphans)+len(rep.Abandoned)), slog.Int("stale", len(rep.Stale))}, p.attrs...)
	if err != nil {
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	p.log.LogAttrs(ctx, slog.LevelInfo, "reconciliation pass", attrs...)
}
