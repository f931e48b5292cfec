package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/kafkalog"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// TestKafkaStackBeforeConsumerApplied: in Kafka mode, with the consumer
// off, a stack answered 201 is known at once from the gate's record of
// it: its replay and ORDER_CONFLICT, PART_OF_STACK on every per-code route
// of each member, GET, and extend, DELETE and confirm of the whole stack
// (written from the gate first, all members in one transaction). The
// consumer's later apply of each stack's one event changes nothing.
func TestKafkaStackBeforeConsumerApplied(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true, kafka: true, tweak: func(c *Config) { c.RunConsumer = false }})
	a := s.createStackableAs("A", map[string]any{"discountAmount": 1000}, 10, stackable)
	b := s.createStackableAs("B", map[string]any{"discountPercent": 10}, 10, stackable)

	r := s.reserveStack("7", "sk-1", 20000, a, b)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	require.Equal(t, map[string]int64{a: 1000, b: 1900}, r.items())
	first := r.body
	require.Zero(t, s.state(a).reserved, "the consumer is off; nothing is in PostgreSQL yet")
	require.Equal(t, int64(9), s.gateRemaining(a))
	require.Equal(t, int64(9), s.gateRemaining(b))

	r = s.reserveStack("7", "sk-1", 20000, a, b)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	require.Equal(t, first, r.body, "a replay answers the stack from the gate")
	for _, codes := range [][]string{{a}, {b, a}} {
		r = s.reserveStack("7", "sk-1", 20000, codes...)
		require.Equal(t, "ORDER_CONFLICT", r.str("error"), "%v: %s", codes, r.raw)
	}
	r = s.reserveStack("8", "sk-1", 20000, a, b)
	require.Equal(t, "ORDER_CONFLICT", r.str("error"), string(r.raw))
	for _, code := range []string{a, b} {
		r = s.reserve(code, 7, "sk-1", 20000)
		require.Equal(t, "ORDER_CONFLICT", r.str("error"), "a single of the stack's orderId with %s: %s", code, r.raw)
	}
	for code, orderID := range map[string]string{a: "sk-1", b: voucher.StackMemberOrderID("sk-1", 2)} {
		for _, call := range []struct{ method, suffix string }{
			{http.MethodGet, ""}, {http.MethodDelete, ""}, {http.MethodPost, "/confirm"},
		} {
			r = s.do(call.method, "/vouchers/"+code+"/reservations/"+orderID+call.suffix, nil)
			require.Equal(t, http.StatusConflict, r.status, "%s %s %s: %s", call.method, orderID, call.suffix, r.raw)
			require.Equal(t, "PART_OF_STACK", r.str("error"))
		}
		r = s.do(http.MethodPost, "/vouchers/"+code+"/reservations/"+orderID+"/extend", map[string]any{"seconds": 60})
		require.Equal(t, "PART_OF_STACK", r.str("error"), string(r.raw))
	}
	require.Zero(t, s.state(a).reserved, "no per-code route wrote a member alone")
	require.Zero(t, s.state(b).reserved, "no per-code route wrote a member alone")

	r = s.do(http.MethodGet, "/reservations/sk-1", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "RESERVED", r.str("status"))
	require.Equal(t, map[string]int64{a: 1000, b: 1900}, r.items())
	expires := r.str("expiresAt")
	r = s.do(http.MethodPost, "/reservations/sk-1/extend", map[string]any{"seconds": 3000})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Greater(t, r.str("expiresAt"), expires)
	require.Equal(t, 1, s.state(a).reserved, "the extension wrote the stack from the gate, whole")
	require.Equal(t, 1, s.state(b).reserved, "the extension wrote the stack from the gate, whole")

	r = s.reserveStack("7", "sk-2", 20000, a, b)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	r = s.do(http.MethodDelete, "/reservations/sk-2", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "RELEASED", r.str("status"))
	require.Equal(t, int64(9), s.gateRemaining(a), "DELETE gave both uses back to the gate")
	require.Equal(t, int64(9), s.gateRemaining(b), "DELETE gave both uses back to the gate")
	r = s.reserveStack("7", "sk-2", 20000, a, b)
	require.Equal(t, "ORDER_RELEASED", r.str("error"), string(r.raw))

	r = s.reserveStack("7", "sk-3", 20000, b, a)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	r = s.do(http.MethodPost, "/reservations/sk-3/confirm", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "CONFIRMED", r.str("status"))

	// The consumer now applies the three stacks' events: they change nothing.
	consumer, err := kafkalog.NewConsumer(kafkaConfig(s.cfg, s.app.log), s.app.store)
	require.NoError(t, err)
	consumer.Start(context.Background())
	t.Cleanup(consumer.Stop)
	require.Eventually(t, func() bool { return consumer.Stats().AlreadyApplied >= 3 }, 30*time.Second, 100*time.Millisecond)
	require.Zero(t, consumer.Stats().Rejected, "no stack event dead-lettered")
	for _, code := range []string{a, b} {
		st := s.state(code)
		require.Equal(t, 1, st.reserved, code)
		require.Equal(t, 1, st.confirmed, code)
		require.Equal(t, 1, st.released, code)
		require.Equal(t, 2, st.usedCount, code)
		s.assertConsistent(code)
	}
}

// TestKafkaStackMixedAndDeadLettered: in Kafka mode a stack of a flash-sale
// voucher and a standard one is refused (NOT_STACKABLE, the standard
// code), taking nothing, while a stack of standard vouchers is served by
// the store; a stack's event that the store refuses is dead-lettered
// whole, and reconciliation gives every member's gate hold back.
func TestKafkaStackMixedAndDeadLettered(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true, kafka: true, tweak: func(c *Config) { c.RunConsumer = false }})
	a := s.createStackableAs("A", map[string]any{"discountAmount": 1000}, 10, stackable)
	b := s.createStackableAs("B", map[string]any{"discountAmount": 500}, 10, stackable)
	s.opts.flash = false
	std1 := s.createStackableAs("C", map[string]any{"discountAmount": 100}, 10, stackable)
	std2 := s.createStackableAs("D", map[string]any{"discountAmount": 100}, 10, stackable)
	s.opts.flash = true

	r := s.reserveStack("7", "mx-1", 20000, a, std1)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.Equal(t, "NOT_STACKABLE", r.str("reason"))
	require.Equal(t, std1, r.str("failedCode"))
	require.Equal(t, int64(10), s.gateRemaining(a), "the refused mix took nothing")
	r = s.reserveStack("7", "mx-1", 20000, std1, std2)
	require.Equal(t, http.StatusCreated, r.status, "standard vouchers are stacked by the store: %s", r.raw)
	require.Equal(t, 1, s.state(std1).reserved)

	r = s.reserveStack("7", "dl-1", 20000, a, b)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	// Member 2's orderId is fenced in the store before the consumer
	// applies the event (as reconciliation fences an orphan hold): the
	// event is refused whole.
	member := voucher.StackMemberOrderID("dl-1", 2)
	h, found, err := s.app.gate.Lookup(t.Context(), b, member)
	require.NoError(t, err)
	require.True(t, found)
	_, inserted, err := s.app.store.AbandonOrder(t.Context(), b, h, time.Now())
	require.NoError(t, err)
	require.True(t, inserted)

	consumer, err := kafkalog.NewConsumer(kafkaConfig(s.cfg, s.app.log), s.app.store)
	require.NoError(t, err)
	consumer.Start(context.Background())
	t.Cleanup(consumer.Stop)
	require.Eventually(t, func() bool { return consumer.Stats().Rejected >= 1 }, 30*time.Second, 100*time.Millisecond)
	s.caughtUp()
	require.Zero(t, s.state(a).usedCount, "no member of the refused event was written")
	require.Zero(t, s.state(b).usedCount, "no member of the refused event was written")
	for _, code := range []string{a, b} {
		_, err := s.app.svc.Reconcile(t.Context(), code, true, 0)
		require.NoError(t, err)
		require.Equal(t, int64(10), s.gateRemaining(code), "reconciliation gave %s's hold back", code)
		s.assertConsistent(code)
	}
	r = s.reserveStack("7", "dl-1", 20000, a, b)
	require.Equal(t, "ORDER_RELEASED", r.str("error"), "a retry of the refused stack: %s", r.raw)
}

// TestKafkaStackRetryOfAFencedMember: a member of an earlier attempt of a
// stack fenced in the store (a RELEASED row of its orderId, as the settle
// or reconciliation writes for an unacknowledged member) after Redis lost
// that attempt's holds and claim: a retry of the stack, which the gate
// knows nothing of, is ORDER_RELEASED and takes nothing, since the
// consumer would refuse its event whole. A member's orderId held by
// another order is ORDER_CONFLICT with that member's code.
func TestKafkaStackRetryOfAFencedMember(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true, kafka: true})
	a := s.createStackableAs("A", map[string]any{"discountAmount": 1000}, 10, stackable)
	b := s.createStackableAs("B", map[string]any{"discountAmount": 500}, 10, stackable)
	c := s.createStackableAs("C", map[string]any{"discountAmount": 500}, 10, stackable)

	now := time.Now()
	member := voucher.StackMemberOrderID("fx-1", 2)
	_, inserted, err := s.app.store.AbandonOrder(t.Context(), b, voucher.Hold{OrderID: member, CustomerID: "7",
		OrderAmount: 19000, DiscountAmount: 500, ReservedAt: now, ExpiresAt: now.Add(time.Hour)}, now)
	require.NoError(t, err)
	require.True(t, inserted, "the fence is written")
	owner, err := s.app.gate.OrderOwner(t.Context(), "fx-1")
	require.NoError(t, err)
	require.Zero(t, owner, "the gate knows nothing of the order")

	r := s.reserveStack("7", "fx-1", 20000, a, b)
	require.Equal(t, http.StatusConflict, r.status, string(r.raw))
	require.Equal(t, "ORDER_RELEASED", r.str("error"), string(r.raw))

	// Another customer's single of a member's orderId.
	r = s.reserve(c, 8, voucher.StackMemberOrderID("fx-2", 2), 20000)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	r = s.reserveStack("7", "fx-2", 20000, a, b)
	require.Equal(t, "ORDER_CONFLICT", r.str("error"), string(r.raw))
	require.Equal(t, b, r.str("failedCode"), string(r.raw))

	s.caughtUp()
	for _, code := range []string{a, b} {
		require.Equal(t, int64(10), s.gateRemaining(code), "the refused retries took nothing from %s", code)
		require.Zero(t, s.state(code).usedCount, code)
		s.assertConsistent(code)
	}
	r = s.reserveStack("7", "fx-3", 20000, a, b)
	require.Equal(t, http.StatusCreated, r.status, "a new orderId is served: %s", r.raw)
}

// TestKafkaStrandedStackClaimFencedBeforeItIsAnswered: a retry of a stack
// whose claim in the gate is past any produce and whose members hold
// nothing (its attempt died before its takes, or Redis lost them) is
// answered ORDER_RELEASED with the stack fenced in PostgreSQL first, so
// that the claim's event, should it still land (an instance that resumes),
// takes nothing.
func TestKafkaStrandedStackClaimFencedBeforeItIsAnswered(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStack(t, stackOptions{flash: true, kafka: true})
	a := s.createStackableAs("A", map[string]any{"discountAmount": 1000}, 10, stackable)
	b := s.createStackableAs("B", map[string]any{"discountAmount": 500}, 10, stackable)

	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	rec := voucher.StackRecord{OrderID: "st-1", CustomerID: "7", OrderAmount: 20000, Codes: []string{a, b}, At: at}
	owner, err := s.app.gate.ClaimStack(ctx, "st-1", rec, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.NotNil(t, owner.Stack, "claimed")
	s.caughtUp()

	r := s.reserveStack("7", "st-1", 20000, a, b)
	require.Equal(t, http.StatusConflict, r.status, string(r.raw))
	require.Equal(t, "ORDER_RELEASED", r.str("error"), string(r.raw))
	row, err := s.app.store.Redemption(ctx, a, "st-1")
	require.NoError(t, err, "the first member is fenced")
	require.Equal(t, voucher.StatusReleased, row.Status)

	// The claim's event lands now: the consumer refuses it whole.
	e := voucher.EventFromHold(a, voucher.Hold{OrderID: "st-1", CustomerID: "7", OrderAmount: 20000, DiscountAmount: 1000,
		ReservedAt: at, ExpiresAt: at.Add(2 * time.Hour)})
	e.StackCustomerID = "7"
	e.Members = []voucher.StackEventMember{
		{Code: a, CustomerID: "7", OrderID: "st-1", OrderAmount: 20000, DiscountAmount: 1000},
		{Code: b, CustomerID: "7", OrderID: voucher.StackMemberOrderID("st-1", 2), OrderAmount: 19000, DiscountAmount: 500},
	}
	require.NoError(t, s.app.kafka.log.PublishReserved(ctx, e))
	s.caughtUp()
	for _, code := range []string{a, b} {
		require.Zero(t, s.state(code).usedCount, "the late event took nothing from %s", code)
		require.Equal(t, int64(10), s.gateRemaining(code), code)
		s.assertConsistent(code)
	}
	r = s.reserveStack("7", "st-1", 20000, a, b)
	require.Equal(t, "ORDER_RELEASED", r.str("error"), "the answer stands: %s", r.raw)
	r = s.reserveStack("7", "st-2", 20000, a, b)
	require.Equal(t, http.StatusCreated, r.status, "a new orderId is served: %s", r.raw)
}

// TestKafkaStackThroughPostgresOutage: a Kafka-mode stack of flash-sale
// vouchers is served while PostgreSQL is down (the gate and the log), and
// the consumer writes it whole once PostgreSQL is back.
func TestKafkaStackThroughPostgresOutage(t *testing.T) {
	t.Parallel()
	srv := testenv.NewPostgres(t)
	s := newStack(t, stackOptions{flash: true, kafka: true, databaseURL: srv.NewDatabase(t).URL})
	a := s.createStackableAs("A", map[string]any{"discountAmount": 1000}, 10, stackable)
	b := s.createStackableAs("B", map[string]any{"discountPercent": 10}, 10, stackable)
	r := s.reserveStack("7", "po-1", 20000, a, b)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	// The definitions are read again once their cache expires (with the
	// stacking setting, which the outage then serves stale).
	time.Sleep(1100 * time.Millisecond)
	r = s.reserveStack("7", "po-2", 20000, a, b)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	s.written()

	srv.Stop(t)
	r = s.reserveStack("7", "po-down", 20000, a, b)
	require.Equal(t, http.StatusCreated, r.status, "PostgreSQL down: %s", r.raw)
	require.Equal(t, map[string]int64{a: 1000, b: 1900}, r.items())
	r = s.reserveStack("7", "po-down", 20000, a, b)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"), "a replay from the gate: %s", r.raw)
	srv.Start(t)

	s.settle(a, 3)
	s.settle(b, 3)
	st, err := s.app.store.Stack(t.Context(), "po-down")
	require.NoError(t, err)
	require.Equal(t, voucher.StatusReserved, st.Status())
	require.Len(t, st.Items, 2)
	for _, code := range []string{a, b} {
		s.assertConsistent(code)
	}
}
