package voucher

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// redisDown is the gate's error when Redis cannot be reached.
func redisDown() error { return Unavailable(errors.New("connection refused"), "redis reserve") }

var lostReply = &Error{Code: CodeUnavailable, OutcomeUnknown: true, Message: "reply lost"}

func reserveReq(orderID string) ReserveRequest {
	return ReserveRequest{Code: "SALE", CustomerID: "7", OrderID: orderID, OrderAmount: 100}
}

// A flash-sync write whose outcome is unknown keeps the gate's use (no
// compensation) and answers OutcomeUnknown; one that provably wrote nothing
// gives the use back and forgets the orderId.
func TestSyncWriteOutcomeDecidesCompensation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := time.Now()
	for _, tc := range []struct {
		name     string
		err      error
		unknown  bool
		releases []ReleaseMode
	}{
		{"outcome unknown", lostReply, true, nil},
		{"not applied", Unavailable(nil, "connection refused"), false, []ReleaseMode{ReleaseForget}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := &fakeGate{decision: GateDecision{Outcome: GateTaken, Remaining: 9}}
			st := &fakeStore{voucher: flashVoucher(), reserveErr: tc.err}
			svc, err := NewService(ServiceConfig{Store: st, Gate: g, Clock: func() time.Time { return clock }})
			require.NoError(t, err)
			_, err = svc.Reserve(ctx, reserveReq("o-1"))
			require.True(t, IsCode(err, CodeUnavailable), "%v", err)
			require.Equal(t, tc.unknown, IsOutcomeUnknown(err))
			require.Equal(t, tc.releases, g.released())

			// Settling: too young first, then fenced and given back.
			n, err := svc.SettleUnknown(ctx)
			require.NoError(t, err)
			require.Zero(t, n)
			svcAt := func(d time.Duration) { svc.cfg.Clock = func() time.Time { return clock.Add(d) } }
			svcAt(2 * settleDelay)
			n, err = svc.SettleUnknown(ctx)
			require.NoError(t, err)
			if !tc.unknown {
				require.Zero(t, n, "nothing to settle")
				return
			}
			require.Equal(t, 1, n)
			require.Equal(t, []string{"o-1"}, st.abandoned)
			require.Equal(t, []ReleaseMode{ReleaseMark}, g.released())
			n, err = svc.SettleUnknown(ctx)
			require.NoError(t, err)
			require.Zero(t, n, "settled once")
		})
	}
}

// A flash-sync replacement whose write ended with an unknown outcome is
// settled without a fence when the store has the replaced order CONFIRMED:
// such a replacement can never be written, so the gate gives the use back
// to the replaced order and a retry is decided afresh
// (REPLACED_ORDER_NOT_HELD), not answered ORDER_RELEASED by a fence. With
// the replaced order still RESERVED, or unknown to the store, it is fenced
// as any other unsettled write.
func TestSettlingAReplacementOfAConfirmedOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := time.Now()
	for _, tc := range []struct {
		name       string
		replaced   Status // "" for no row
		unreplaced []string
		abandoned  []string
		releases   []ReleaseMode
	}{
		{"replaced order confirmed", StatusConfirmed, []string{"new>old"}, nil, nil},
		{"replaced order reserved", StatusReserved, nil, []string{"new"}, []ReleaseMode{ReleaseMark}},
		{"replaced order released", StatusReleased, nil, []string{"new"}, []ReleaseMode{ReleaseMark}},
		{"replaced order unknown", "", nil, []string{"new"}, []ReleaseMode{ReleaseMark}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := &fakeGate{decision: GateDecision{Outcome: GateTaken, Remaining: 9}}
			rows := map[string]Redemption{}
			if tc.replaced != "" {
				rows["old"] = Redemption{OrderID: "old", VoucherCode: "SALE", CustomerID: "7", Status: tc.replaced}
			}
			st := &fakeStore{voucher: flashVoucher(), reserveErr: lostReply, rows: rows}
			svc, err := NewService(ServiceConfig{Store: st, Gate: g, Clock: func() time.Time { return clock }})
			require.NoError(t, err)
			req := reserveReq("new")
			req.ReplacesOrderID = "old"
			_, err = svc.Reserve(ctx, req)
			require.True(t, IsOutcomeUnknown(err), "%v", err)
			require.Empty(t, g.unreplaced, "an unknown outcome keeps the replacement")

			svc.cfg.Clock = func() time.Time { return clock.Add(2 * settleDelay) }
			n, err := svc.SettleUnknown(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.Equal(t, tc.unreplaced, g.unreplaced)
			require.Equal(t, tc.abandoned, st.abandoned)
			require.Equal(t, tc.releases, g.released())
			n, err = svc.SettleUnknown(ctx)
			require.NoError(t, err)
			require.Zero(t, n, "settled once")
		})
	}
}

// A retry of an order whose use the gate holds (flash-sync replay) or whose
// event is pending (Kafka) answers a 503 with OutcomeUnknown while the
// outcome cannot be settled: a plain 503 would claim that nothing was taken.
func TestRetryOfUnsettledOrderCarriesTheFlag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now()
	hold := Hold{OrderID: "o-1", CustomerID: "7", OrderAmount: 100, ReservedAt: now, ExpiresAt: now.Add(time.Hour)}

	t.Run("flash-sync", func(t *testing.T) {
		t.Parallel()
		g := &fakeGate{decision: GateDecision{Outcome: GateReplay, Hold: hold}}
		st := &fakeStore{voucher: flashVoucher(), reserveErr: Unavailable(nil, "connection refused")}
		svc, err := NewService(ServiceConfig{Store: st, Gate: g})
		require.NoError(t, err)
		_, err = svc.Reserve(ctx, reserveReq("o-1"))
		require.True(t, IsOutcomeUnknown(err), "%v", err)
		require.Empty(t, g.released(), "the replay gives nothing back")
	})
	t.Run("flash-kafka", func(t *testing.T) {
		t.Parallel()
		pending := hold
		pending.Pending = true
		g := &fakeGate{decision: GateDecision{Outcome: GateReplay, Hold: pending}}
		svc, err := NewService(ServiceConfig{Store: &fakeStore{voucher: flashVoucher()}, Gate: g,
			Events: &fakeLog{caughtUpErr: errors.New("consumer behind")}, FlashWrites: FlashKafka})
		require.NoError(t, err)
		_, err = svc.Reserve(ctx, reserveReq("o-1"))
		require.True(t, IsOutcomeUnknown(err), "%v", err)
	})
}

// With the gate down, a retry of an order the store has is answered from
// its row, not with "nothing was taken"; in Kafka mode an order the store
// does not have yet is unknown while the consumer is behind.
func TestGateDownAnswersFromTheRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The store has the row of order "taken" (customer 7) and no other.
	rowStore := func() *fakeStore {
		return &fakeStore{voucher: flashVoucher(), rows: map[string]Redemption{
			"taken": {OrderID: "taken", VoucherCode: "SALE", CustomerID: "7", Status: StatusReserved}}}
	}
	downGate := func() *fakeGate { return &fakeGate{err: redisDown()} }
	syncSvc, err := NewService(ServiceConfig{Store: rowStore(), Gate: downGate()})
	require.NoError(t, err)
	res, err := syncSvc.Reserve(ctx, reserveReq("taken"))
	require.NoError(t, err)
	require.True(t, res.Replay)
	_, err = syncSvc.Reserve(ctx, reserveReq("new"))
	require.True(t, IsCode(err, CodeUnavailable))
	require.False(t, IsOutcomeUnknown(err), "nothing was taken for an order the store does not have")

	kafka, err := NewService(ServiceConfig{Store: rowStore(), Gate: downGate(),
		Events: &fakeLog{caughtUpErr: errors.New("consumer behind")}, FlashWrites: FlashKafka})
	require.NoError(t, err)
	res, err = kafka.Reserve(ctx, reserveReq("taken"))
	require.NoError(t, err)
	require.True(t, res.Replay)
	_, err = kafka.Reserve(ctx, reserveReq("new"))
	require.True(t, IsOutcomeUnknown(err), "its event may still be on its way: %v", err)
}

// An instance counts as dead only after its heartbeat has been missing at
// every look for HeartbeatTTL: a heartbeat lost with Redis's data comes
// back within a beat.
func TestConfirmedDead(t *testing.T) {
	t.Parallel()
	at := time.Now()
	svc, err := NewService(ServiceConfig{Store: &fakeStore{voucher: flashVoucher()}, HeartbeatTTL: 3 * time.Second,
		Clock: func() time.Time { return at }})
	require.NoError(t, err)
	look := func(d time.Duration, alive map[string]bool) map[string]bool {
		return svc.absent.confirmedDead([]string{"a", "b"}, alive, at.Add(d), svc.cfg.HeartbeatTTL)
	}
	require.Empty(t, look(0, nil), "one absent look proves nothing")
	require.Empty(t, look(2*time.Second, map[string]bool{"b": true}))
	require.Equal(t, map[string]bool{"a": true}, look(3*time.Second, map[string]bool{"b": true}))
	require.Empty(t, look(4*time.Second, map[string]bool{"a": true, "b": true}), "beating again")
	require.Empty(t, look(8*time.Second, nil), "absent again: the wait starts over")
	require.Equal(t, map[string]bool{"a": true, "b": true}, look(11*time.Second, nil))
}

// stepStore answers the reservations of a standard voucher with the errors
// of steps in turn (nil: a reservation).
type stepStore struct {
	Store
	mu    sync.Mutex
	steps []error
}

func (s *stepStore) Voucher(context.Context, string) (Voucher, error) {
	v := flashVoucher()
	v.FlashSale = false
	return v, nil
}

func (s *stepStore) VoucherDefinition(ctx context.Context, code string) (Voucher, error) {
	return s.Voucher(ctx, code)
}

func (s *stepStore) Reserve(_ context.Context, req ReserveRequest, _ time.Time, _ time.Duration) (Reservation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.steps[0]
	s.steps = s.steps[1:]
	if err != nil {
		return Reservation{}, err
	}
	return Reservation{Redemption: Redemption{OrderID: req.OrderID, VoucherCode: req.Code, CustomerID: req.CustomerID, Status: StatusReserved}}, nil
}

// In standard mode a retry of an order whose write ended with an unknown
// outcome keeps the flag on every 503 until the store answers, and only
// for that order.
func TestStandardRetryOfUnknownOrderCarriesTheFlag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	down := Unavailable(errors.New("connection refused"), "postgres")
	st := &stepStore{steps: []error{lostReply, down, down, nil, down, down}}
	svc, err := NewService(ServiceConfig{Store: st})
	require.NoError(t, err)

	_, err = svc.Reserve(ctx, reserveReq("o-1"))
	require.True(t, IsOutcomeUnknown(err), "%v", err)
	for range 2 {
		_, err = svc.Reserve(ctx, reserveReq("o-1"))
		require.True(t, IsCode(err, CodeUnavailable), "%v", err)
		require.True(t, IsOutcomeUnknown(err), "a retry that cannot reach the store settles nothing: %v", err)
	}
	res, err := svc.Reserve(ctx, reserveReq("o-1"))
	require.NoError(t, err)
	require.Equal(t, "o-1", res.OrderID)

	_, err = svc.Reserve(ctx, reserveReq("o-1"))
	require.False(t, IsOutcomeUnknown(err), "settled by the 201: %v", err)
	_, err = svc.Reserve(ctx, reserveReq("o-2"))
	require.True(t, IsCode(err, CodeUnavailable))
	require.False(t, IsOutcomeUnknown(err), "another order's 503 took nothing: %v", err)
}

// In flash-sync mode, with Redis down, a retry of an order whose write on
// this instance ended with an unknown outcome (not settled yet) keeps the
// flag; a new order's 503 does not carry it.
func TestGateDownRetryOfUnsettledOrderCarriesTheFlag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := &fakeGate{decision: GateDecision{Outcome: GateTaken, Remaining: 9}}
	svc, err := NewService(ServiceConfig{Store: &fakeStore{voucher: flashVoucher(), reserveErr: lostReply}, Gate: g})
	require.NoError(t, err)
	_, err = svc.Reserve(ctx, reserveReq("o-1"))
	require.True(t, IsOutcomeUnknown(err), "%v", err)

	g.err = redisDown() // Redis goes down
	_, err = svc.Reserve(ctx, reserveReq("o-1"))
	require.True(t, IsCode(err, CodeUnavailable), "%v", err)
	require.True(t, IsOutcomeUnknown(err), "%v", err)
	_, err = svc.Reserve(ctx, reserveReq("o-2"))
	require.True(t, IsCode(err, CodeUnavailable), "%v", err)
	require.False(t, IsOutcomeUnknown(err), "%v", err)
}

func (s *stepStore) ResolveCode(ctx context.Context, code, orderID string) (Resolution, error) {
	return resolveByReads(ctx, s, nil, code, orderID)
}

// StackOf: this fake holds no stacks.
func (*stepStore) StackOf(context.Context, string) (string, bool, error) { return "", false, nil }
