package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/kafkalog"
	"github.com/voucherd/voucherd/internal/voucher"
)

// heldEvents is an EventLog whose publish of one orderId's event waits
// until release is closed: an instance whose produce is slow.
type heldEvents struct {
	voucher.EventLog
	orderID string
	entered chan struct{} // closed when the publish of orderID starts waiting
	release chan struct{}
	once    sync.Once
}

func (e *heldEvents) PublishReserved(ctx context.Context, ev voucher.ReservedEvent) error {
	if ev.OrderID == e.orderID {
		e.once.Do(func() { close(e.entered) })
		select {
		case <-e.release:
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", voucher.ErrOutcomeUnknown, ctx.Err())
		}
	}
	return e.EventLog.PublishReserved(ctx, ev)
}

// slowReplacement runs req on a second instance of the service (the
// stack's store, gate and log) whose publish of req's event waits: it
// returns once the gate has let the replacement through and its publish
// has started waiting. ack lets the publish go on and returns the
// replacement's answer.
func (s *stack) slowReplacement(req voucher.ReserveRequest) (ack func() (voucher.Reservation, error)) {
	s.t.Helper()
	events := &heldEvents{EventLog: s.app.kafka.events, orderID: req.OrderID,
		entered: make(chan struct{}), release: make(chan struct{})}
	slow, err := voucher.NewService(voucher.ServiceConfig{Store: s.app.store, Gate: s.app.gate, Events: events,
		FlashWrites: voucher.FlashKafka, WriteTimeout: time.Minute, Instance: "slow-instance"})
	require.NoError(s.t, err)
	type answer struct {
		res voucher.Reservation
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := slow.Reserve(context.Background(), req)
		done <- answer{res, err}
	}()
	select {
	case <-events.entered:
	case a := <-done:
		s.t.Fatalf("the replacement was answered before its publish: %+v, %v", a.res, a.err)
	case <-time.After(30 * time.Second):
		s.t.Fatal("the replacement's publish did not start")
	}
	return func() (voucher.Reservation, error) {
		close(events.release)
		select {
		case a := <-done:
			return a.res, a.err
		case <-time.After(time.Minute):
			s.t.Fatal("the replacement was not answered")
			return voucher.Reservation{}, nil
		}
	}
}

// caughtUp waits until the consumer has applied every event acknowledged
// so far.
func (s *stack) caughtUp() {
	s.t.Helper()
	require.Eventually(s.t, func() bool { return s.app.kafka.log.CaughtUp(context.Background()) == nil },
		30*time.Second, 50*time.Millisecond, "the consumer catches up")
}

// requireRows asserts that every order answered 201 has its RESERVED row
// and that the consumer refused no event (a refused event is a dead
// letter: a 201 without a row).
func (s *stack) requireRows(orders ...string) {
	s.t.Helper()
	for _, id := range orders {
		row, err := s.app.store.Order(context.Background(), id)
		require.NoError(s.t, err, "order %s: 201 without a row", id)
		require.Equal(s.t, voucher.StatusReserved, row.Status, "order %s", id)
	}
	require.Zero(s.t, s.app.kafka.consumer.Stats().Rejected, "events dead-lettered")
}

// TestKafkaCampaignReplacementFreesItsCodeOnceAcknowledged is
// docs/faults.md finding 16: in Kafka mode a replacement of a campaign
// order by an order on another code of the campaign is decided in Redis
// before its event is in the log. It freed the replaced order's code there
// at once, so another order could take that code and have its event
// acknowledged and applied first, while PostgreSQL still had the replaced
// order holding the code: the consumer refused it (code_used, dead letter),
// a 201 without a row. The replaced order's code now stays taken in Redis
// until the replacement's event is acknowledged (commit.lua frees it).
func TestKafkaCampaignReplacementFreesItsCodeOnceAcknowledged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStack(t, stackOptions{kafka: true})
	r := s.createCampaign(map[string]any{"codeCount": 5, "totalLimit": 5, "perUserLimit": 1, "flashSale": true})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	id := r.str("id")
	codes := s.campaignCodes(id, 100)
	require.Equal(t, http.StatusCreated, s.reserve(codes[0], 1, "old-1", 100_000).status)
	s.settle(id, 1)
	s.caughtUp()

	// Another instance replaces old-1 by new-1 on codes[1]; its event is
	// slow to reach Kafka.
	ack := s.slowReplacement(voucher.ReserveRequest{Code: codes[1], CustomerID: "1", OrderID: "new-1",
		OrderAmount: 100_000, ReplacesOrderID: "old-1"})
	r = s.reserve(codes[0], 1, "old-1", 100_000)
	require.Equal(t, "ORDER_RELEASED", r.str("error"), "the gate answers for the replaced order: %s", r.raw)

	// Meanwhile another customer presents old-1's code.
	first := s.reserve(codes[0], 2, "other-2", 100_000)
	s.caughtUp()
	res, err := ack()
	require.NoError(t, err)
	require.Equal(t, codes[1], res.VoucherCode)
	// Once the replacement is answered the code is free.
	again := s.reserve(codes[0], 2, "other-2", 100_000)
	require.Equal(t, http.StatusCreated, again.status, string(again.raw))
	s.caughtUp()
	s.requireRows("new-1", "other-2")

	// The code was still the replaced order's in PostgreSQL: Redis refused
	// it until then, and the customer's retry took it.
	require.Equal(t, http.StatusConflict, first.status, string(first.raw))
	require.Equal(t, "ALREADY_USED", first.str("error"), string(first.raw))
	require.Equal(t, "CODE_USED", first.str("reason"), string(first.raw))
	row, err := s.app.store.Order(ctx, "old-1")
	require.NoError(t, err)
	require.Equal(t, voucher.StatusReleased, row.Status)
	gs, err := s.app.gate.Inspect(ctx, id)
	require.NoError(t, err)
	require.Equal(t, map[string]string{codes[0]: "other-2", codes[1]: "new-1"}, gs.Codes)
	st := s.state(id)
	require.Equal(t, 2, st.usedCount)
	s.assertConsistentAfterReconcile(id)
}

// The same shape on a flash voucher frees nothing: the replacement passes
// its use to the new order in Redis, so another customer's order takes
// another use, and its event, applied before the replacement's, fits the
// stock and the limits in PostgreSQL too.
func TestKafkaVoucherReplacementWhileItsEventWaits(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{kafka: true})
	code := s.createVoucher(voucherSpec{TotalLimit: 3, PerUserLimit: 1})
	require.Equal(t, http.StatusCreated, s.reserve(code, 1, "old-1", 5000).status)
	s.settle(code, 1)
	s.caughtUp()

	ack := s.slowReplacement(voucher.ReserveRequest{Code: code, CustomerID: "1", OrderID: "new-1",
		OrderAmount: 5000, ReplacesOrderID: "old-1"})
	r := s.reserve(code, 1, "more-1", 5000)
	require.Equal(t, "ALREADY_USED", r.str("error"), "the customer's use passed to new-1: %s", r.raw)
	for c, o := range map[int64]string{2: "other-2", 3: "other-3"} {
		r = s.reserve(code, c, o, 5000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	}
	r = s.reserve(code, 4, "other-4", 5000)
	require.Equal(t, "HELD_OUT", r.str("error"), "the replacement keeps its use: %s", r.raw)
	s.caughtUp()
	_, err := ack()
	require.NoError(t, err)
	s.caughtUp()
	s.requireRows("new-1", "other-2", "other-3")
	st := s.state(code)
	require.Equal(t, 3, st.usedCount)
	require.Equal(t, 1, st.released, "old-1")
	s.assertConsistentAfterReconcile(code)
}

// A code freed by a campaign replacement once its event is acknowledged
// may be taken by another order and confirmed before the consumer applied
// the replaced order's own event, which comes earlier in the log. The
// confirmation writes the new order from Redis (applyUnwritten) only once
// the replaced order is in PostgreSQL or the consumer has caught up: written
// first, it would hold the code there and the replaced order's event would
// be refused (a 201 without a row).
func TestKafkaCodeFreedByReplacementWaitsForTheReplacedOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStack(t, stackOptions{kafka: true, tweak: func(c *Config) { c.RunConsumer = false }})
	r := s.createCampaign(map[string]any{"codeCount": 5, "totalLimit": 5, "perUserLimit": 1, "flashSale": true})
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	id := r.str("id")
	codes := s.campaignCodes(id, 100)

	// Nothing is applied: every event waits in Kafka.
	require.Equal(t, http.StatusCreated, s.reserve(codes[0], 1, "old-1", 100_000).status)
	res := s.replace(codes[1], 1, "new-1", "old-1", 100_000)
	require.Equal(t, http.StatusCreated, res.status, string(res.raw))
	res = s.reserve(codes[0], 2, "other-2", 100_000)
	require.Equal(t, http.StatusCreated, res.status, "the replacement is acknowledged: its old code is free: %s", res.raw)
	c := s.do(http.MethodPost, "/vouchers/"+codes[0]+"/reservations/other-2/confirm", nil)
	require.Equal(t, http.StatusServiceUnavailable, c.status, "old-1 is still to be written: %s", c.raw)

	consumer, err := kafkalog.NewConsumer(kafkaConfig(s.cfg, s.app.log), s.app.store)
	require.NoError(t, err)
	consumer.Start(ctx)
	t.Cleanup(consumer.Stop)
	s.confirmEventually(codes[0], "other-2")
	s.caughtUp()
	require.Zero(t, consumer.Stats().Rejected, "events dead-lettered")
	for id, want := range map[string]voucher.Status{"old-1": voucher.StatusReleased, "new-1": voucher.StatusReserved, "other-2": voucher.StatusConfirmed} {
		row, err := s.app.store.Order(ctx, id)
		require.NoError(t, err, "order %s: 201 without a row", id)
		require.Equal(t, want, row.Status, id)
	}
	require.Equal(t, 2, s.state(id).usedCount)
	s.assertConsistentAfterReconcile(id)
}
