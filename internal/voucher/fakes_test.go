package voucher

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The fakes below stand in for the adapters in pure unit tests of the
// Service. Each embeds its interface, so a call a test did not expect
// panics instead of answering something made up.

// fakeStore answers from its fields: voucher for every code, rows by
// orderId for Redemption, Order and replays of Reserve, holds for Holds.
// reserveErr fails every Reserve.
type fakeStore struct {
	Store
	voucher    Voucher
	reserveErr error
	holds      HoldSummary

	mu        sync.Mutex
	rows      map[string]Redemption
	reserves  int
	abandoned []string
}

func (s *fakeStore) Voucher(context.Context, string) (Voucher, error) { return s.voucher, nil }

func (s *fakeStore) VoucherDefinition(ctx context.Context, code string) (Voucher, error) {
	return s.Voucher(ctx, code)
}

func (s *fakeStore) Reserve(_ context.Context, req ReserveRequest, now time.Time, ttl time.Duration) (Reservation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserves++
	if s.reserveErr != nil {
		return Reservation{}, s.reserveErr
	}
	if row, ok := s.rows[req.OrderID]; ok {
		return Reservation{Redemption: row, Replay: true}, nil
	}
	return Reservation{Redemption: Redemption{OrderID: req.OrderID, VoucherCode: req.Code, CustomerID: req.CustomerID,
		OrderAmount: req.OrderAmount, Status: StatusReserved, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(ttl)}}, nil
}

func (s *fakeStore) Redemption(_ context.Context, code, orderID string) (Redemption, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if row, ok := s.rows[orderID]; ok && row.VoucherCode == code {
		return row, nil
	}
	return Redemption{}, Errorf(CodeReservationNotFound, "no row")
}

func (s *fakeStore) Order(_ context.Context, orderID string) (Redemption, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if row, ok := s.rows[orderID]; ok {
		return row, nil
	}
	return Redemption{}, Errorf(CodeReservationNotFound, "no row")
}

func (s *fakeStore) AbandonOrder(_ context.Context, code string, h Hold, _ time.Time) (Redemption, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abandoned = append(s.abandoned, h.OrderID)
	return Redemption{OrderID: h.OrderID, VoucherCode: code, CustomerID: h.CustomerID, Status: StatusReleased}, true, nil
}

func (s *fakeStore) Holds(context.Context, string) (HoldSummary, error) { return s.holds, nil }

func (s *fakeStore) GateSnapshot(context.Context, string) (Snapshot, error) {
	return Snapshot{Voucher: s.voucher}, nil
}

// fakeGate answers every Reserve with decision, or err when set, and
// records its Reserve calls and what it was given back (Release),
// committed and claimed. It never has the voucher loaded and always grants
// the warm-up lock; Lookup finds nothing.
type fakeGate struct {
	Gate
	decision GateDecision
	err      error

	mu         sync.Mutex
	releases   []ReleaseMode
	unreplaced []string // "orderId>replaces" per Unreplace
	reserves   int
	commits    int
	claims     int
	loads      int
	takeovers  int
	takeOver   *GateTakeOver // TakeOver's answer; nil: GateTakenOver

	rediscounts []string // "orderId=discount" per Rediscount
}

func (g *fakeGate) Unreplace(_ context.Context, _, orderID, replaces string) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unreplaced = append(g.unreplaced, orderID+">"+replaces)
	return true, nil
}

func (g *fakeGate) Rediscount(_ context.Context, _, orderID string, discount int64) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rediscounts = append(g.rediscounts, fmt.Sprintf("%s=%d", orderID, discount))
	return true, nil
}

func (g *fakeGate) Reserve(context.Context, string, int32, Hold) (GateDecision, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reserves++
	return g.decision, g.err
}

func (g *fakeGate) Replace(context.Context, string, Hold, string) (GateDecision, error) {
	return g.decision, g.err
}

func (g *fakeGate) Release(_ context.Context, _, _ string, mode ReleaseMode) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.releases = append(g.releases, mode)
	return true, nil
}

func (g *fakeGate) Commit(context.Context, string, Hold) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.commits++
	return true, nil
}

func (g *fakeGate) TakeOver(context.Context, string, Hold, string) (GateTakeOver, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.takeovers++
	if g.takeOver != nil {
		return *g.takeOver, nil
	}
	return GateTakenOver, nil
}

func (g *fakeGate) ClaimOrder(_ context.Context, _, code string, _ time.Time) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.claims++
	return code, nil
}

func (g *fakeGate) ClaimStack(_ context.Context, _ string, rec StackRecord, _ time.Time) (OrderOwner, error) {
	return OrderOwner{Stack: &rec}, nil
}

func (g *fakeGate) UnclaimStack(context.Context, string, StackRecord) error { return nil }

func (g *fakeGate) OrderOwner(context.Context, string) (OrderOwner, error) { return OrderOwner{}, nil }

func (g *fakeGate) Lookup(context.Context, string, string) (Hold, bool, error) {
	return Hold{}, false, nil
}

func (g *fakeGate) Loaded(context.Context, string) (bool, error) { return false, nil }

func (g *fakeGate) Lock(context.Context, string, time.Duration) (func(), bool, error) {
	return func() {}, true, nil
}

func (g *fakeGate) Load(context.Context, Snapshot) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.loads++
	return true, nil
}

func (g *fakeGate) released() []ReleaseMode {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]ReleaseMode(nil), g.releases...)
}

// fakeLog publishes into a slice, failing with publishErr when set, and
// answers CaughtUp with caughtUpErr.
type fakeLog struct {
	publishErr  error
	caughtUpErr error

	mu        sync.Mutex
	published []ReservedEvent
}

func (l *fakeLog) PublishReserved(_ context.Context, e ReservedEvent) error {
	if l.publishErr != nil {
		return l.publishErr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.published = append(l.published, e)
	return nil
}

func (l *fakeLog) CaughtUp(context.Context) error { return l.caughtUpErr }

// voucherReader is the part of Store a fake answers ResolveCode from.
type voucherReader interface {
	Voucher(ctx context.Context, code string) (Voucher, error)
}

// orderReader is implemented by the fakes that keep rows by orderId.
type orderReader interface {
	Order(ctx context.Context, orderID string) (Redemption, error)
}

// resolveByReads answers ResolveCode as the store's one statement does,
// from a fake's Voucher read and, for a fake that keeps rows (orders), its
// Order read:
// a voucher (no campaign codes), and orderID's row when there is one.
func resolveByReads(ctx context.Context, st voucherReader, orders orderReader, code, orderID string) (Resolution, error) {
	v, err := st.Voucher(ctx, code)
	switch {
	case IsCode(err, CodeVoucherNotFound):
		return Resolution{}, nil
	case err != nil:
		return Resolution{}, err
	}
	res := Resolution{Voucher: v, Found: true}
	if orders != nil && orderID != "" {
		row, err := orders.Order(ctx, orderID)
		switch {
		case err == nil:
			res.Order, res.HasOrder = row, true
		case !IsCode(err, CodeReservationNotFound):
			return Resolution{}, err
		}
	}
	return res, nil
}

func (s *fakeStore) ResolveCode(ctx context.Context, code, orderID string) (Resolution, error) {
	return resolveByReads(ctx, s, s, code, orderID)
}

// StackOf: the fake store holds no stacks.
func (s *fakeStore) StackOf(context.Context, string) (string, bool, error) { return "", false, nil }

// VoucherStacking: no voucher of the fake store is stackable.
func (s *fakeStore) VoucherStacking(context.Context, string) (Stacking, error) {
	return Stacking{}, nil
}

// StacksOf: the fake store holds no stacks.
func (s *fakeStore) StacksOf(context.Context, []string) ([]string, error) { return nil, nil }
