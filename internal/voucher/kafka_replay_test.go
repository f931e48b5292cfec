package voucher

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// claimGate is fakeGate with the gate's claim of one stack, claim, whose
// members hold nothing; it counts the gate's Lookups of them.
type claimGate struct {
	*fakeGate
	claim StackRecord

	mu      sync.Mutex
	lookups int
}

func (g *claimGate) OrderOwner(_ context.Context, orderID string) (OrderOwner, error) {
	if orderID != g.claim.OrderID {
		return OrderOwner{}, nil
	}
	rec := g.claim
	return OrderOwner{Stack: &rec}, nil
}

func (g *claimGate) Lookup(context.Context, string, string) (Hold, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lookups++
	return Hold{}, false, nil
}

// kafkaReplayCase is a Kafka-mode retry of an order whose first attempt
// left a pending hold or claim age old, with the consumer caught up or not
// (caughtUp), and the answer it gets.
type kafkaReplayCase struct {
	name     string
	age      time.Duration
	caughtUp error
	want     ErrorCode
	unknown  bool
}

// kafkaReplayCases: a hold or claim older than any produce is decided at
// once; a young one is asked about again until the client's patience
// (young) runs out.
var kafkaReplayCases = []kafkaReplayCase{
	{name: "old, consumer caught up", age: time.Minute, want: CodeOrderReleased},
	{name: "old, consumer behind", age: time.Minute, caughtUp: errors.New("consumer behind"), want: CodeUnavailable, unknown: true},
	{name: "young", want: CodeUnavailable, unknown: true},
}

// run calls reserve with the case's patience and checks its answer, and
// that calls, the gate reads it made, were one when the case is old and
// more when it is young.
func (tc kafkaReplayCase) run(t *testing.T, reserve func(context.Context) error, calls func() int) {
	t.Helper()
	ctx := context.Background()
	if tc.age == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
	}
	err := reserve(ctx)
	require.True(t, IsCode(err, tc.want), "%v", err)
	require.Equal(t, tc.unknown, IsOutcomeUnknown(err), "%v", err)
	if tc.age > 0 {
		require.Equal(t, 1, calls(), "the gate is read once: no polls")
	} else {
		require.Greater(t, calls(), 1, "a young attempt is asked about again")
	}
}

// A Kafka-mode replay of a stack whose claim holds nothing in the gate
// asks the gate again for about a second while the claim is young (its
// attempt may still be taking), and answers at once once the claim is past
// any produce (the attempt died, or Redis lost its holds): waiting cannot
// change it, and a client that waits less than the polls would never get
// an answer. ORDER_RELEASED once the consumer has caught up, its first
// member fenced in the store first, else 503 with the outcome unknown.
func TestKafkaStackReplayOfAStrandedClaim(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range kafkaReplayCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			claim := StackRecord{OrderID: "o-1", CustomerID: "7", OrderAmount: 100, Codes: []string{"SALE"},
				At: now.Add(-tc.age).Truncate(time.Millisecond)}
			g := &claimGate{fakeGate: &fakeGate{}, claim: claim}
			st := &fakeStore{voucher: flashVoucher()}
			svc, err := NewService(ServiceConfig{Store: &stackFakeStore{fakeStore: st}, Gate: g,
				Events: &fakeLog{caughtUpErr: tc.caughtUp}, FlashWrites: FlashKafka})
			require.NoError(t, err)
			tc.run(t, func(ctx context.Context) error {
				_, err := svc.ReserveStack(ctx, StackRequest{CustomerID: "7", OrderID: "o-1", OrderAmount: 100, Codes: []string{"SALE"}})
				return err
			}, func() int {
				g.mu.Lock()
				defer g.mu.Unlock()
				return g.lookups
			})
			if tc.want == CodeOrderReleased {
				require.Equal(t, []string{StackMemberOrderID("o-1", 1)}, st.abandoned, "its first member fenced in the store")
			} else {
				require.Empty(t, st.abandoned)
			}
		})
	}
}

// A Kafka-mode retry of a single reservation whose hold is still pending
// asks the gate again for about a second while the hold is young (its
// first attempt may be waiting for Kafka's acknowledgement), and decides at
// once when the hold is older than any produce: fenced and ORDER_RELEASED
// once the consumer has caught up, else 503 with the outcome unknown.
func TestKafkaReplayOfAnOldPendingHold(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range kafkaReplayCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			at := now.Add(-tc.age)
			hold := Hold{OrderID: "o-1", CustomerID: "7", OrderAmount: 100, ReservedAt: at, ExpiresAt: at.Add(time.Hour), Pending: true}
			g := &fakeGate{decision: GateDecision{Outcome: GateReplay, Hold: hold}}
			st := &fakeStore{voucher: flashVoucher()}
			svc, err := NewService(ServiceConfig{Store: st, Gate: g, Events: &fakeLog{caughtUpErr: tc.caughtUp}, FlashWrites: FlashKafka})
			require.NoError(t, err)
			tc.run(t, func(ctx context.Context) error {
				_, err := svc.Reserve(ctx, reserveReq("o-1"))
				return err
			}, func() int {
				g.mu.Lock()
				defer g.mu.Unlock()
				return g.reserves
			})
			if tc.want == CodeOrderReleased {
				require.Equal(t, []string{"o-1"}, st.abandoned, "fenced in the store")
			} else {
				require.Empty(t, st.abandoned)
			}
		})
	}
}

// An old pending hold of another instance is taken over in the gate before
// the retry fences it, so that its writer cannot make it durable in
// between; a hold its writer made durable first, or one that left the
// gate, is not fenced, and the retry's outcome stays unknown. This
// instance's own hold is fenced without a takeover.
func TestKafkaOrphanFenceTakesAnotherWritersHoldOverFirst(t *testing.T) {
	t.Parallel()
	at := time.Now().Add(-time.Minute)
	for _, tc := range []struct {
		name     string
		owner    string
		answer   GateTakeOver
		takeover bool
		fenced   bool
	}{
		{name: "taken over", owner: "writer", answer: GateTakenOver, takeover: true, fenced: true},
		{name: "made durable by its writer first", owner: "writer", answer: GateHoldDurable, takeover: true},
		{name: "gone from the gate", owner: "writer", answer: GateHoldGone, takeover: true},
		{name: "this instance's", owner: "fencer", fenced: true},
		{name: "no owner (an instance of the previous release)", fenced: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hold := Hold{OrderID: "o-1", CustomerID: "7", OrderAmount: 100, ReservedAt: at, ExpiresAt: at.Add(time.Hour),
				Pending: true, Owner: tc.owner}
			answer := tc.answer
			g := &fakeGate{decision: GateDecision{Outcome: GateReplay, Hold: hold}, takeOver: &answer}
			st := &fakeStore{voucher: flashVoucher()}
			svc, err := NewService(ServiceConfig{Store: st, Gate: g, Events: &fakeLog{}, FlashWrites: FlashKafka, Instance: "fencer"})
			require.NoError(t, err)
			_, err = svc.Reserve(context.Background(), reserveReq("o-1"))
			require.Equal(t, tc.takeover, g.takeovers == 1, "TakeOver asked")
			if tc.fenced {
				require.True(t, IsCode(err, CodeOrderReleased), "%v", err)
				require.Equal(t, []string{"o-1"}, st.abandoned, "fenced in the store")
				require.Equal(t, []ReleaseMode{ReleaseMark}, g.releases, "given back in the gate")
				return
			}
			require.True(t, IsCode(err, CodeUnavailable) && IsOutcomeUnknown(err), "%v", err)
			require.Empty(t, st.abandoned, "not fenced")
			require.Empty(t, g.releases)
		})
	}
}
