package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/kafkalog"
	"github.com/voucherd/voucherd/internal/voucher"
)

// TestStackReplacementKafkaMixRefused: in Kafka mode a replacement of
// several codes naming a flash-sale voucher on either side and a standard
// voucher on either side is refused with 422 NOT_ELIGIBLE, reason
// NOT_STACKABLE, naming the first standard code (of the new order, else
// of the replaced one), as a new stack mixing them is, and changes
// nothing; standard vouchers on both sides are served by the store.
func TestStackReplacementKafkaMixRefused(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true, kafka: true})
	flash := s.createStackable(map[string]any{"discountAmount": 100}, 10, stackable)
	flash2 := s.createStackable(map[string]any{"discountAmount": 100}, 10, stackable)
	std := s.createStackable(map[string]any{"discountAmount": 100, "flashSale": false}, 10, stackable)
	std2 := s.createStackable(map[string]any{"discountAmount": 100, "flashSale": false}, 10, stackable)
	replace := func(orderID, replaces string, codes ...string) response {
		return s.do(http.MethodPost, "/reservations", map[string]any{"customerId": "7", "orderId": orderID,
			"orderAmount": 20000, "codes": codes, "replacesOrderId": replaces})
	}

	// A flash single replaced by a stack of standard vouchers.
	r := s.reserve(flash, 7, "kr-flash", 20000)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	s.settle(flash, 1)
	r = replace("kr-1", "kr-flash", std, std2)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.Equal(t, "NOT_STACKABLE", r.str("reason"), string(r.raw))
	require.Equal(t, std, r.str("failedCode"))

	// A standard single replaced by a stack naming a flash voucher.
	r = s.reserve(std, 7, "kr-std", 20000)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	r = replace("kr-2", "kr-std", flash2, flash)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.Equal(t, "NOT_STACKABLE", r.str("reason"), string(r.raw))
	require.Equal(t, std, r.str("failedCode"), "the replaced order's standard code")

	s.written()
	require.Equal(t, 1, s.state(flash).usedCount, "nothing changed")
	require.Equal(t, 1, s.state(std).usedCount, "nothing changed")
	require.Zero(t, s.state(std2).usedCount)
	require.Zero(t, s.state(flash2).usedCount)
	require.Equal(t, int64(9), s.gateRemaining(flash))
	require.Equal(t, int64(10), s.gateRemaining(flash2))
	r = s.do(http.MethodGet, "/vouchers/"+flash+"/reservations/kr-flash", nil)
	require.Equal(t, "RESERVED", r.str("status"), string(r.raw))
	r = s.do(http.MethodGet, "/vouchers/"+std+"/reservations/kr-std", nil)
	require.Equal(t, "RESERVED", r.str("status"), string(r.raw))

	// Standard vouchers on both sides: the store's transaction.
	r = replace("kr-3", "kr-std", std, std2)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	require.Equal(t, 1, s.state(std).usedCount)
	require.Equal(t, 1, s.state(std2).usedCount)
}

// slowStackReplacement runs req on a second instance of the service (the
// stack's store, gate and log) whose publish of req's event waits: it
// returns once the gate has moved and taken the uses and the publish has
// started waiting. ack lets the publish go on and returns the answer.
func (s *stack) slowStackReplacement(req voucher.StackRequest) (ack func() (voucher.Stack, error)) {
	s.t.Helper()
	events := &heldEvents{EventLog: s.app.kafka.events, orderID: req.OrderID,
		entered: make(chan struct{}), release: make(chan struct{})}
	slow, err := voucher.NewService(voucher.ServiceConfig{Store: s.app.store, Gate: s.app.gate, Events: events,
		FlashWrites: voucher.FlashKafka, WriteTimeout: time.Minute, Instance: "slow-instance"})
	require.NoError(s.t, err)
	type answer struct {
		st  voucher.Stack
		err error
	}
	done := make(chan answer, 1)
	go func() {
		st, err := slow.ReserveStack(context.Background(), req)
		done <- answer{st, err}
	}()
	select {
	case <-events.entered:
	case a := <-done:
		s.t.Fatalf("the replacement was answered before its publish: %+v, %v", a.st, a.err)
	case <-time.After(30 * time.Second):
		s.t.Fatal("the replacement's publish did not start")
	}
	return func() (voucher.Stack, error) {
		close(events.release)
		select {
		case a := <-done:
			return a.st, a.err
		case <-time.After(time.Minute):
			s.t.Fatal("the replacement was not answered")
			return voucher.Stack{}, nil
		}
	}
}

// TestStackReplacementKafkaConfirmRace: in Kafka mode, from the gate's
// move of a replaced stack's uses until the replacement is written, the
// replaced stack cannot be confirmed (RESERVATION_RELEASED), neither
// through a member whose code the new stack keeps nor through one it
// drops (its use held by a transit hold meanwhile, never free); once the
// event is acknowledged the replacement is written, the replaced stack
// released whole, and the gate agrees with PostgreSQL. A stack confirmed
// first is not replaced (REPLACED_ORDER_NOT_HELD), nothing moved.
func TestStackReplacementKafkaConfirmRace(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true, kafka: true})
	a := s.createStackableAs("A", map[string]any{"discountAmount": 1000}, 10, stackable)
	b := s.createStackableAs("B", map[string]any{"discountAmount": 500}, 1, stackable)
	c := s.createStackableAs("C", map[string]any{"discountAmount": 200}, 10, stackable)
	d := s.createStackableAs("D", map[string]any{"discountAmount": 200}, 1, stackable)
	agree := func(codes ...string) {
		t.Helper()
		s.written()
		for _, code := range codes {
			st := s.state(code)
			require.Equal(t, int64(st.totalLimit-st.usedCount), s.gateRemaining(code), "gate and PostgreSQL agree on %s", code)
			s.assertConsistent(code)
		}
	}
	stackReq := func(orderID, replaces string, codes ...string) voucher.StackRequest {
		return voucher.StackRequest{CustomerID: "7", OrderID: orderID, OrderAmount: 20000, Codes: codes, ReplacesOrderID: replaces}
	}

	for _, tc := range []struct {
		name   string
		before []string // the replaced stack's codes
		after  []string // the new stack's codes
	}{
		{"a code kept, one dropped", []string{a, b}, []string{a, c}},
		{"every code dropped", []string{b, d}, []string{a, c}},
	} {
		old, next := "cr-old-"+tc.name[:1], "cr-new-"+tc.name[:1]
		r := s.reserveStack("7", old, 20000, tc.before...)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		ack := s.slowStackReplacement(stackReq(next, old, tc.after...))
		// The uses are moved in the gate; the event waits.
		r = s.do(http.MethodPost, "/reservations/"+old+"/confirm", nil)
		require.Equal(t, "RESERVATION_RELEASED", r.str("error"), "%s: confirm while the replacement is pending: %s", tc.name, r.raw)
		for _, code := range []string{b, d} {
			if code == tc.before[0] || code == tc.before[1] {
				r = s.reserve(code, 9, "cr-other-"+tc.name[:1]+code, 20000)
				require.Equal(t, "HELD_OUT", r.str("error"), "%s: the dropped use of %s is never free: %s", tc.name, code, r.raw)
			}
		}
		st, err := ack()
		require.NoError(t, err, tc.name)
		require.Len(t, st.Items, 2)
		r = s.do(http.MethodGet, "/reservations/"+old, nil)
		require.Equal(t, "RELEASED", r.str("status"), "%s: %s", tc.name, r.raw)
		r = s.do(http.MethodGet, "/reservations/"+next, nil)
		require.Equal(t, "RESERVED", r.str("status"), "%s: %s", tc.name, r.raw)
		agree(a, b, c, d)
		r = s.do(http.MethodDelete, "/reservations/"+next, nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		agree(a, b, c, d)
	}

	// Confirmed first: the replacement is refused and nothing moves.
	r := s.reserveStack("7", "cr-c1", 20000, a, b)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	r = s.do(http.MethodPost, "/reservations/cr-c1/confirm", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	r = s.do(http.MethodPost, "/reservations", map[string]any{"customerId": "7", "orderId": "cr-c2",
		"orderAmount": 20000, "codes": []string{a, c}, "replacesOrderId": "cr-c1"})
	require.Equal(t, "REPLACED_ORDER_NOT_HELD", r.str("error"), string(r.raw))
	agree(a, b, c, d)
	r = s.do(http.MethodGet, "/reservations/cr-c1", nil)
	require.Equal(t, "CONFIRMED", r.str("status"), string(r.raw))
	require.Zero(t, s.app.kafka.consumer.Stats().Rejected, "no event dead-lettered")
}

// TestStackReplacementKafkaBeforeConsumer: in Kafka mode with the
// consumer off, a stack replacing a stack, and a stack replacing a
// single, that the consumer has not written: the replaced order is
// written from the gate first, and the acknowledged replacement is written
// from the gate too (the replaced order released in its transaction), so
// PostgreSQL and the gate agree at once; the consumer's later apply of
// every event changes nothing and refuses none.
func TestStackReplacementKafkaBeforeConsumer(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true, kafka: true, tweak: func(c *Config) { c.RunConsumer = false }})
	a := s.createStackableAs("A", map[string]any{"discountAmount": 1000}, 10, stackable)
	b := s.createStackableAs("B", map[string]any{"discountAmount": 500}, 10, stackable)
	c := s.createStackableAs("C", map[string]any{"discountAmount": 200}, 10, stackable)
	replace := func(orderID, replaces string, codes ...string) response {
		return s.do(http.MethodPost, "/reservations", map[string]any{"customerId": "7", "orderId": orderID,
			"orderAmount": 20000, "codes": codes, "replacesOrderId": replaces})
	}
	agree := func() {
		t.Helper()
		for _, code := range []string{a, b, c} {
			st := s.state(code)
			require.Equal(t, int64(st.totalLimit-st.usedCount), s.gateRemaining(code), "gate and PostgreSQL agree on %s", code)
		}
	}

	r := s.reserveStack("7", "bc-1", 20000, a, b)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	require.Zero(t, s.state(a).reserved, "the consumer is off")
	r = replace("bc-2", "bc-1", a, c)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	r = s.do(http.MethodGet, "/reservations/bc-1", nil)
	require.Equal(t, "RELEASED", r.str("status"), "the replaced stack, written from the gate, is released: %s", r.raw)
	st, err := s.app.store.Stack(t.Context(), "bc-2")
	require.NoError(t, err, "the replacement is in PostgreSQL before its event is applied")
	require.Equal(t, voucher.StatusReserved, st.Status())
	require.Equal(t, 1, s.state(a).usedCount)
	require.Equal(t, 0, s.state(b).usedCount)
	require.Equal(t, 1, s.state(c).usedCount)
	agree()
	r = replace("bc-2", "bc-1", a, c)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"), "a replay: %s", r.raw)

	// A single replaced by a stack, the single unwritten too.
	r = s.reserve(b, 7, "bc-s", 20000)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	r = replace("bc-3", "bc-s", b, a)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	r = s.do(http.MethodGet, "/vouchers/"+b+"/reservations/bc-s", nil)
	require.Equal(t, "RELEASED", r.str("status"), string(r.raw))
	require.Equal(t, 1, s.state(b).usedCount, "B's use is taken over")
	require.Equal(t, 2, s.state(a).usedCount)
	agree()
	r = s.do(http.MethodPost, "/reservations/bc-3/confirm", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))

	// The consumer now applies the four events: they change nothing.
	consumer, err := kafkalog.NewConsumer(kafkaConfig(s.cfg, s.app.log), s.app.store)
	require.NoError(t, err)
	consumer.Start(context.Background())
	t.Cleanup(consumer.Stop)
	require.Eventually(t, func() bool { return consumer.Stats().AlreadyApplied >= 4 }, 30*time.Second, 100*time.Millisecond)
	require.Zero(t, consumer.Stats().Rejected, "no event dead-lettered")
	s.caughtUp()
	require.Equal(t, 1, s.state(b).usedCount)
	require.Equal(t, 2, s.state(a).usedCount)
	require.Equal(t, 1, s.state(c).usedCount)
	agree()
	for _, code := range []string{a, b, c} {
		s.assertConsistent(code)
	}
}

// TestStackReplacementKafkaEventRefused: a replacing stack's event that
// the store refuses (a new member's orderId fenced before it is applied)
// changes nothing in PostgreSQL, the replaced stack's release included;
// reconciliation then moves every use back to the replaced stack (the
// kept code's from its new member, the dropped code's from its transit
// hold), gives the fenced member's back, and the replaced stack can be
// confirmed.
func TestStackReplacementKafkaEventRefused(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true, kafka: true})
	a := s.createStackableAs("A", map[string]any{"discountAmount": 1000}, 10, stackable)
	b := s.createStackableAs("B", map[string]any{"discountAmount": 500}, 10, stackable)
	c := s.createStackableAs("C", map[string]any{"discountAmount": 200}, 10, stackable)
	r := s.reserveStack("7", "er-old", 20000, a, b)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	s.written()

	ack := s.slowStackReplacement(voucher.StackRequest{CustomerID: "7", OrderID: "er-new", OrderAmount: 20000,
		Codes: []string{a, c}, ReplacesOrderID: "er-old"})
	member := voucher.StackMemberOrderID("er-new", 2)
	h, found, err := s.app.gate.Lookup(t.Context(), c, member)
	require.NoError(t, err)
	require.True(t, found)
	_, inserted, err := s.app.store.AbandonOrder(t.Context(), c, h, time.Now())
	require.NoError(t, err)
	require.True(t, inserted)
	_, _ = ack() // the event is acknowledged; the store refuses it whole
	require.Eventually(t, func() bool { return s.app.kafka.consumer.Stats().Rejected >= 1 }, 30*time.Second, 100*time.Millisecond)
	s.caughtUp()

	r = s.do(http.MethodGet, "/reservations/er-old", nil)
	require.Equal(t, "RESERVED", r.str("status"), "the refused event released nothing: %s", r.raw)
	require.Equal(t, 1, s.state(a).usedCount)
	require.Equal(t, 1, s.state(b).usedCount)
	require.Zero(t, s.state(c).usedCount)
	for range 2 {
		for _, code := range []string{a, b, c} {
			_, err := s.app.svc.Reconcile(t.Context(), code, true, 0)
			require.NoError(t, err)
		}
	}
	require.Equal(t, int64(9), s.gateRemaining(a))
	require.Equal(t, int64(9), s.gateRemaining(b))
	require.Equal(t, int64(10), s.gateRemaining(c))
	for code, orderID := range map[string]string{a: "er-old", b: voucher.StackMemberOrderID("er-old", 2)} {
		h, found, err := s.app.gate.Lookup(t.Context(), code, orderID)
		require.NoError(t, err)
		require.True(t, found && !h.Released, "the use of %s is back with the replaced stack: %+v", code, h)
		s.assertConsistent(code)
	}
	s.assertConsistent(c)
	r = s.do(http.MethodPost, "/reservations/er-old/confirm", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
}
