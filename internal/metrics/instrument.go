package metrics

import (
	"context"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// dependencyFailed reports whether err counts as a dependency error: rule
// answers (OUT_OF_STOCK, ORDER_CONFLICT, ...) are the dependency working.
func dependencyFailed(err error) error {
	switch voucher.CodeOf(err) {
	case voucher.CodeUnavailable, voucher.CodeInternal:
		return err
	}
	return nil
}

// Store times the store calls of the request path; the other methods pass
// through unchanged.
type Store struct {
	voucher.Store
	m *Metrics
}

// InstrumentStore wraps s so that its latencies and failures are observed.
func (m *Metrics) InstrumentStore(s voucher.Store) *Store { return &Store{Store: s, m: m} }

func (s *Store) observe(op string, start time.Time, err error) {
	s.m.ObserveDependency("postgres", op, time.Since(start), dependencyFailed(err))
}

// Reserve implements voucher.Store.
func (s *Store) Reserve(ctx context.Context, r voucher.ReserveRequest, now time.Time, ttl time.Duration) (voucher.Reservation, error) {
	start := time.Now()
	res, err := s.Store.Reserve(ctx, r, now, ttl)
	s.observe("reserve", start, err)
	return res, err
}

// Confirm implements voucher.Store.
func (s *Store) Confirm(ctx context.Context, code, orderID string, now time.Time) (voucher.Redemption, error) {
	start := time.Now()
	r, err := s.Store.Confirm(ctx, code, orderID, now)
	s.observe("confirm", start, err)
	return r, err
}

// Release implements voucher.Store.
func (s *Store) Release(ctx context.Context, code, orderID string, now time.Time) (voucher.Redemption, bool, error) {
	start := time.Now()
	r, released, err := s.Store.Release(ctx, code, orderID, now)
	s.observe("release", start, err)
	return r, released, err
}

// ExpireDue implements voucher.Store.
func (s *Store) ExpireDue(ctx context.Context, now time.Time, limit int) ([]voucher.Redemption, error) {
	start := time.Now()
	rs, err := s.Store.ExpireDue(ctx, now, limit)
	s.observe("expire", start, err)
	return rs, err
}

// ApplyReserved implements voucher.Store.
func (s *Store) ApplyReserved(ctx context.Context, events []voucher.ReservedEvent) ([]voucher.ApplyResult, error) {
	start := time.Now()
	rs, err := s.Store.ApplyReserved(ctx, events)
	s.observe("apply_batch", start, err)
	return rs, err
}

// Extend implements voucher.Store.
func (s *Store) Extend(ctx context.Context, code, orderID string, until, now time.Time, maxHold time.Duration) (voucher.Redemption, error) {
	start := time.Now()
	r, err := s.Store.Extend(ctx, code, orderID, until, now, maxHold)
	s.observe("extend", start, err)
	return r, err
}

// Holds implements voucher.Store.
func (s *Store) Holds(ctx context.Context, code string) (voucher.HoldSummary, error) {
	start := time.Now()
	h, err := s.Store.Holds(ctx, code)
	s.observe("holds", start, err)
	return h, err
}

// Validate implements voucher.Store.
func (s *Store) Validate(ctx context.Context, r voucher.ValidateRequest, now time.Time) (voucher.StoreValidation, error) {
	start := time.Now()
	v, err := s.Store.Validate(ctx, r, now)
	s.observe("validate", start, err)
	return v, err
}

// Order implements voucher.Store; it answers the refusals of vouchers
// their cached definition refuses, so it is timed.
func (s *Store) Order(ctx context.Context, orderID string) (voucher.Redemption, error) {
	start := time.Now()
	r, err := s.Store.Order(ctx, orderID)
	s.observe("order", start, err)
	return r, err
}

// Voucher implements voucher.Store.
func (s *Store) Voucher(ctx context.Context, code string) (voucher.Voucher, error) {
	start := time.Now()
	v, err := s.Store.Voucher(ctx, code)
	s.observe("voucher", start, err)
	return v, err
}

// VoucherDefinition implements voucher.Store; the definition cache reads
// it on the request path, so it is timed.
func (s *Store) VoucherDefinition(ctx context.Context, code string) (voucher.Voucher, error) {
	start := time.Now()
	v, err := s.Store.VoucherDefinition(ctx, code)
	s.observe("voucher_definition", start, err)
	return v, err
}

// Gate times the gate calls of the request path; the other methods pass
// through unchanged.
type Gate struct {
	voucher.Gate
	m *Metrics
}

// InstrumentGate wraps g so that its latencies and failures are observed.
func (m *Metrics) InstrumentGate(g voucher.Gate) *Gate { return &Gate{Gate: g, m: m} }

// Reserve implements voucher.Gate. A decision the gate made without
// calling Redis (GateDecision.Local) is not a Redis call and is not
// observed as one.
func (g *Gate) Reserve(ctx context.Context, code string, perUserLimit int32, hold voucher.Hold) (voucher.GateDecision, error) {
	start := time.Now()
	d, err := g.Gate.Reserve(ctx, code, perUserLimit, hold)
	if !d.Local {
		g.m.ObserveDependency("redis", "reserve", time.Since(start), err)
	}
	return d, err
}

// Validate implements voucher.Gate.
func (g *Gate) Validate(ctx context.Context, code string, perUserLimit int32, orderID, customerID, campaignCode string, q voucher.TakeLimits) (voucher.GateDecision, error) {
	start := time.Now()
	d, err := g.Gate.Validate(ctx, code, perUserLimit, orderID, customerID, campaignCode, q)
	g.m.ObserveDependency("redis", "validate", time.Since(start), err)
	return d, err
}

// Replace implements voucher.Gate.
func (g *Gate) Replace(ctx context.Context, code string, hold voucher.Hold, replaces string) (voucher.GateDecision, error) {
	start := time.Now()
	d, err := g.Gate.Replace(ctx, code, hold, replaces)
	g.m.ObserveDependency("redis", "replace", time.Since(start), err)
	return d, err
}

// Release implements voucher.Gate.
func (g *Gate) Release(ctx context.Context, code, orderID string, mode voucher.ReleaseMode) (bool, error) {
	start := time.Now()
	ok, err := g.Gate.Release(ctx, code, orderID, mode)
	g.m.ObserveDependency("redis", "release", time.Since(start), err)
	return ok, err
}

// Commit implements voucher.Gate.
func (g *Gate) Commit(ctx context.Context, code string, hold voucher.Hold) (bool, error) {
	start := time.Now()
	ok, err := g.Gate.Commit(ctx, code, hold)
	g.m.ObserveDependency("redis", "commit", time.Since(start), err)
	return ok, err
}

// TakeOver implements voucher.Gate.
func (g *Gate) TakeOver(ctx context.Context, code string, hold voucher.Hold, fencer string) (voucher.GateTakeOver, error) {
	start := time.Now()
	r, err := g.Gate.TakeOver(ctx, code, hold, fencer)
	g.m.ObserveDependency("redis", "takeover", time.Since(start), err)
	return r, err
}

// Events times the Kafka produce of reservations.
type Events struct {
	voucher.EventLog
	m *Metrics
}

// InstrumentEvents wraps e so that produce latencies and failures are
// observed.
func (m *Metrics) InstrumentEvents(e voucher.EventLog) *Events { return &Events{EventLog: e, m: m} }

// PublishReserved implements voucher.EventLog.
func (e *Events) PublishReserved(ctx context.Context, ev voucher.ReservedEvent) error {
	start := time.Now()
	err := e.EventLog.PublishReserved(ctx, ev)
	e.m.ObserveDependency("kafka", "produce", time.Since(start), err)
	return err
}

// admin returns the wrapped store's administration side.
func (s *Store) admin() (voucher.AdminStore, error) {
	a, ok := s.Store.(voucher.AdminStore)
	if !ok {
		return nil, voucher.Errorf(voucher.CodeInternal, "the store does not support administration")
	}
	return a, nil
}

// ListVouchers implements voucher.AdminStore.
func (s *Store) ListVouchers(ctx context.Context, f voucher.VoucherFilter, now time.Time) (voucher.VoucherPage, error) {
	a, err := s.admin()
	if err != nil {
		return voucher.VoucherPage{}, err
	}
	start := time.Now()
	p, err := a.ListVouchers(ctx, f, now)
	s.observe("list_vouchers", start, err)
	return p, err
}

// ListRedemptions implements voucher.AdminStore.
func (s *Store) ListRedemptions(ctx context.Context, f voucher.RedemptionFilter) (voucher.RedemptionPage, error) {
	a, err := s.admin()
	if err != nil {
		return voucher.RedemptionPage{}, err
	}
	start := time.Now()
	p, err := a.ListRedemptions(ctx, f)
	s.observe("list_redemptions", start, err)
	return p, err
}

// Audit implements voucher.AdminStore.
func (s *Store) Audit(ctx context.Context, code string, p voucher.PageRequest) (voucher.AuditPage, error) {
	a, err := s.admin()
	if err != nil {
		return voucher.AuditPage{}, err
	}
	start := time.Now()
	page, err := a.Audit(ctx, code, p)
	s.observe("audit", start, err)
	return page, err
}

// RecordAudit implements voucher.AdminStore.
func (s *Store) RecordAudit(ctx context.Context, e voucher.AuditEntry) error {
	a, err := s.admin()
	if err != nil {
		return err
	}
	start := time.Now()
	err = a.RecordAudit(ctx, e)
	s.observe("record_audit", start, err)
	return err
}
