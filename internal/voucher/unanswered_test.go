package voucher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// voidGate is fakeGate with Void answering from stored (orderId -> hold),
// or voidErr.
type voidGate struct {
	fakeGate
	stored  map[string]Hold
	voidErr error
	voided  []string
}

func (g *voidGate) Lookup(_ context.Context, _ string, orderID string) (Hold, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.stored[orderID]
	return s, ok, nil
}

func (g *voidGate) Void(_ context.Context, _ string, h Hold) (Hold, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.voidErr != nil {
		return Hold{}, false, g.voidErr
	}
	if s, ok := g.stored[h.OrderID]; ok {
		return s, true, nil
	}
	g.voided = append(g.voided, h.OrderID)
	return Hold{}, false, nil
}

// A take the gate did not answer is answered a plain 503 and remembered;
// past the bound, or for a take that surely did not run, it is not
// remembered, and past the bound the answer says the outcome is unknown.
func TestUnansweredTakeAnswers(t *testing.T) {
	t.Parallel()
	unanswered := Unavailable(fmt.Errorf("%w: %w", ErrGateUnanswered, context.DeadlineExceeded), "redis reserve SALE")
	refused := Unavailable(errors.New("connection refused"), "redis reserve SALE")
	for _, tc := range []struct {
		name       string
		mode       FlashWrites
		gateErr    error
		full       bool
		remembered bool
		unknown    bool
	}{
		{"sync/unanswered", FlashSync, unanswered, false, true, false},
		{"kafka/unanswered", FlashKafka, unanswered, false, true, false},
		{"sync/refused", FlashSync, refused, false, false, false},
		{"sync/unanswered past the bound", FlashSync, unanswered, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &fakeStore{voucher: flashVoucher(), rows: map[string]Redemption{}}
			cfg := ServiceConfig{Store: st, Gate: &fakeGate{err: tc.gateErr}, FlashWrites: tc.mode}
			if tc.mode == FlashKafka {
				cfg.Events = &fakeLog{}
			}
			svc, err := NewService(cfg)
			require.NoError(t, err)
			if tc.full {
				svc.unanswered.n = maxUnanswered
			}
			_, err = svc.Reserve(context.Background(), reserveReq("o-1"))
			require.True(t, IsCode(err, CodeUnavailable), "%v", err)
			require.Equal(t, tc.unknown, IsOutcomeUnknown(err), "%v", err)
			svc.unanswered.mu.Lock()
			_, remembered := svc.unanswered.m[orderKey{"SALE", "o-1"}]
			svc.unanswered.mu.Unlock()
			require.Equal(t, tc.remembered, remembered)
		})
	}
}

// The settle decides each remembered call once it is a second old.
func TestSettleUnanswered(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	at := now().Truncate(time.Millisecond)
	hold := func(id string, at time.Time) Hold {
		return Hold{OrderID: id, CustomerID: "7", ReservedAt: at, ExpiresAt: at.Add(time.Hour), Owner: "i1"}
	}
	replacement := hold("repl", at)
	replacement.Replaces = "old"
	g := &voidGate{stored: map[string]Hold{
		"ran":      hold("ran", at),                      // this attempt's take ran: given back
		"written":  hold("written", at),                  // a retry wrote its row: stands
		"retried":  hold("retried", at.Add(time.Second)), // another attempt's hold: left alone
		"released": {OrderID: "released", Released: true},
		"repl":     replacement, // a replacement's take ran: undone
		// A lost event's orderId taken again later (the gate lost the
		// first hold): that take's, left alone.
		"evt-again": hold("evt-again", at.Add(2*time.Second)),
	}}
	st := &fakeStore{voucher: flashVoucher(), rows: map[string]Redemption{
		"written": {OrderID: "written", VoucherCode: "SALE", CustomerID: "7", Status: StatusReserved},
		"gone":    {OrderID: "gone", VoucherCode: "SALE", CustomerID: "7", Status: StatusReleased},
		"evt":     {OrderID: "evt", VoucherCode: "SALE", CustomerID: "7", Status: StatusReserved},
	}}
	events := &fakeLog{caughtUpErr: Unavailable(nil, "consumer behind")}
	d := &deps{cfg: ServiceConfig{Clock: now, WriteTimeout: time.Second}, store: st, gate: g, events: events,
		log: slog.New(slog.DiscardHandler), unanswered: newUnansweredTakes()}
	for _, id := range []string{"never", "ran", "written", "retried", "released", "repl"} {
		h := hold(id, at)
		if id == "repl" {
			h = replacement
		}
		require.True(t, d.unanswered.remember("SALE", h, now()))
	}
	require.True(t, d.unanswered.rememberRelease("SALE", "", "gone", now()))
	require.True(t, d.unanswered.rememberEvent("SALE", hold("evt", at), now()))
	require.True(t, d.unanswered.rememberEvent("SALE", hold("evt-again", at), now()))
	var fenced []string
	fence := func(_ context.Context, _ string, h Hold) (bool, error) {
		fenced = append(fenced, h.OrderID)
		return h.OrderID == "evt", nil
	}

	n, err := d.settleUnanswered(context.Background(), fence)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is due before a second")

	clock.Add(int64(time.Second))
	n, err = d.settleUnanswered(context.Background(), fence)
	require.Error(t, err, "the consumer is behind: the lost event waits")
	require.Equal(t, 7, n)
	require.Equal(t, []string{"never"}, g.voided)
	require.ElementsMatch(t, []ReleaseMode{ReleaseForget, ReleaseMark}, g.released(), "ran forgotten, gone marked released")
	require.Equal(t, []string{"repl>old"}, g.unreplaced)
	require.Empty(t, fenced)

	events.caughtUpErr = nil
	n, err = d.settleUnanswered(context.Background(), fence)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []string{"evt"}, fenced, "a later take of evt-again's orderId is not fenced")
	require.Equal(t, 1, g.commits, "the event landed: its hold is made durable")

	// A gate that does not answer keeps the attempt for the next round.
	require.True(t, d.unanswered.remember("SALE", hold("later", at), now()))
	clock.Add(int64(time.Second))
	g.voidErr = Unavailable(nil, "redis void")
	n, err = d.settleUnanswered(context.Background(), fence)
	require.Error(t, err)
	require.Zero(t, n)
	g.voidErr = nil
	n, err = d.settleUnanswered(context.Background(), fence)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// A retry that finds the hold of its order's unanswered take claims it,
// so that the settle leaves it alone; only that attempt's take is claimed.
func TestUnansweredClaim(t *testing.T) {
	t.Parallel()
	u := newUnansweredTakes()
	at := time.Now().Truncate(time.Millisecond)
	h := Hold{OrderID: "o-1", ReservedAt: at}
	require.True(t, u.remember("SALE", h, at))
	require.True(t, u.remember("SALE", h, at), "the same attempt once")
	require.True(t, u.rememberEvent("SALE", h, at))
	require.Equal(t, 2, u.n)
	require.False(t, u.claim("SALE", "o-1", at.Add(time.Millisecond)))
	require.True(t, u.claim("SALE", "o-1", at))
	require.False(t, u.claim("SALE", "o-1", at), "a lost event is not a take to claim")
	require.Equal(t, 1, u.n)
	require.Len(t, u.due(at.Add(time.Second), time.Second), 1)
	require.Zero(t, u.n)
}

// In Kafka mode a retry that finds the pending hold of this instance's
// unanswered take publishes its event (nothing was published for it) and
// answers 201.
func TestKafkaRetryCompletesUnansweredTake(t *testing.T) {
	t.Parallel()
	at := time.Now().Truncate(time.Millisecond)
	h := Hold{OrderID: "o-1", CustomerID: "7", OrderAmount: 100, DiscountAmount: 1,
		ReservedAt: at, ExpiresAt: at.Add(time.Hour), Pending: true, Owner: "i1"}
	st := &fakeStore{voucher: flashVoucher(), rows: map[string]Redemption{}}
	g := &fakeGate{decision: GateDecision{Outcome: GateReplay, Hold: h}}
	events := &fakeLog{}
	svc, err := NewService(ServiceConfig{Store: st, Gate: g, Events: events, FlashWrites: FlashKafka, Instance: "i1"})
	require.NoError(t, err)
	require.True(t, svc.unanswered.remember("SALE", h, time.Now()))

	res, err := svc.Reserve(context.Background(), reserveReq("o-1"))
	require.NoError(t, err)
	require.Equal(t, StatusReserved, res.Status)
	require.True(t, res.ExpiresAt.Equal(h.ExpiresAt), "answered from the hold the take stored")
	require.Len(t, events.published, 1)
	require.Equal(t, 1, g.commits)
	require.Zero(t, svc.unanswered.n, "claimed: the settle leaves it alone")
}
