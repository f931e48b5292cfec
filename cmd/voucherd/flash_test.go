package main

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/kafkalog"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// flashSale sends n reservations from distinct customers at a voucher and
// returns how many were answered 201 and the count of other answers by
// error code.
func (s *stack) flashSale(code string, n, width int, prefix string) (int64, map[string]int64) {
	var created atomic.Int64
	codes := make([]atomic.Int64, 9)
	names := []string{"OUT_OF_STOCK", "UNAVAILABLE", "ALREADY_USED", "ORDER_CONFLICT", "ORDER_RELEASED", "INTERNAL", "OTHER", "TRANSPORT", "HELD_OUT"}
	parallel(n, width, func(i int) {
		r := s.reserve(code, int64(1_000_000+i), fmt.Sprintf("%s-%d", prefix, i), 100)
		if r.status == http.StatusCreated {
			created.Add(1)
			return
		}
		for j, name := range names {
			if r.str("error") == name {
				codes[j].Add(1)
				return
			}
		}
		codes[6].Add(1)
	})
	out := map[string]int64{}
	for j, name := range names {
		if v := codes[j].Load(); v > 0 {
			out[name] = v
		}
	}
	return created.Load(), out
}

func TestFlashSaleExactlyTotalLimit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts func(t *testing.T) stackOptions
	}{
		{"flash-sync", func(*testing.T) stackOptions { return stackOptions{flash: true} }},
		{"flash-kafka", func(*testing.T) stackOptions { return stackOptions{kafka: true} }},
		{"flash-sync-redis-cluster", func(t *testing.T) stackOptions {
			return stackOptions{flash: true, redisAddrs: testenv.NewRedisCluster(t).Addrs}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, c.opts(t))
			code := s.createVoucher(voucherSpec{TotalLimit: 1000})
			created, others := s.flashSale(code, 5000, 128, "fs")
			require.EqualValues(t, 1000, created, "answers other than 201: %v", others)
			require.Equal(t, map[string]int64{"HELD_OUT": 4000}, others, "every use is RESERVED")
			s.settle(code, 1000)
			st := s.state(code)
			require.Equal(t, 1000, st.usedCount)
			require.Equal(t, 1000, st.reserved)
			gs, err := s.app.gate.Inspect(context.Background(), code)
			require.NoError(t, err)
			require.True(t, gs.Loaded)
			require.Zero(t, gs.Remaining)
			s.assertConsistent(code)
		})
	}
}

func TestDatabaseFailureAfterGateGivesUseBack(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true})
	ctx := context.Background()
	code := s.createVoucher(voucherSpec{TotalLimit: 10})
	// A trigger makes the database refuse every redemption of this voucher,
	// after the gate has already taken the use.
	_, err := s.db.Exec(ctx, `
		CREATE FUNCTION fail_insert() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'injected failure' USING ERRCODE = '08006'; END $$;
		CREATE TRIGGER fail_insert BEFORE INSERT ON voucher_redemption
		FOR EACH ROW WHEN (NEW.voucher_code = '`+code+`') EXECUTE FUNCTION fail_insert();`)
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		r := s.reserve(code, int64(i+1), fmt.Sprintf("dbf-%d", i), 100)
		require.Equal(t, http.StatusServiceUnavailable, r.status, string(r.raw))
		require.Equal(t, "UNAVAILABLE", r.str("error"))
	}
	gs, err := s.app.gate.Inspect(ctx, code)
	require.NoError(t, err)
	require.EqualValues(t, 10, gs.Remaining, "the gate kept uses the database never wrote")
	require.Zero(t, gs.Held())
	require.Zero(t, s.state(code).reserved)

	// Once the database works again the same orderIds go through: a 503
	// took nothing.
	_, err = s.db.Exec(ctx, `DROP TRIGGER fail_insert ON voucher_redemption`)
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		require.Equal(t, http.StatusCreated, s.reserve(code, int64(i+1), fmt.Sprintf("dbf-%d", i), 100).status)
	}
	s.assertConsistent(code)
}

func TestRedisFlushedMidSaleThenWarmedAgain(t *testing.T) {
	t.Parallel()
	redis := testenv.NewRedis(t)
	s := newStack(t, stackOptions{flash: true, redisAddrs: []string{redis.Addr},
		tweak: func(c *Config) { c.SoldOutTTL = -1 }})
	code := s.createVoucher(voucherSpec{TotalLimit: 300})
	ctx := context.Background()
	var violations atomic.Int64
	stopSampling := s.sampleOversell(code, &violations)

	first, _ := s.flashSale(code, 200, 32, "a")
	// Redis loses everything (a flush, or a restart without persistence).
	require.NoError(t, s.app.gate.Forget(ctx, code))
	second, _ := s.flashSale(code, 600, 32, "b")
	stopSampling()

	// The gate was reloaded from PostgreSQL (remaining = total - held), so
	// the sale continued and stopped exactly at the limit.
	require.EqualValues(t, 300, first+second)
	require.Zero(t, violations.Load(), "held exceeded totalLimit at some moment")
	// The database never had to refuse a gate winner (which would show as a
	// compensation): the reloaded gate was exact.
	require.Zero(t, testutil.ToFloat64(s.app.metrics.Compensations.WithLabelValues("flash-sync")))
	s.assertConsistent(code)
}

func TestRedisDownFlashAnswers503StandardWorks(t *testing.T) {
	t.Parallel()
	redis := testenv.NewRedis(t)
	s := newStack(t, stackOptions{flash: true, redisAddrs: []string{redis.Addr}})
	flash := s.createVoucher(voucherSpec{TotalLimit: 10})
	no := false
	standard := s.createVoucher(voucherSpec{TotalLimit: 10, Flash: &no})
	require.Equal(t, http.StatusCreated, s.reserve(flash, 1, "rd-1", 100).status)

	redis.Stop(t)
	for i := 2; i < 6; i++ {
		r := s.reserve(flash, int64(i), fmt.Sprintf("rd-%d", i), 100)
		require.Equal(t, http.StatusServiceUnavailable, r.status, string(r.raw))
		require.Equal(t, "UNAVAILABLE", r.str("error"))
		require.Equal(t, http.StatusCreated, s.reserve(standard, int64(i), fmt.Sprintf("st-%d", i), 100).status)
	}
	r := s.doToken(http.MethodGet, "/readyz", nil, "")
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, 1, s.state(flash).reserved, "a flash reservation was taken while Redis was down")

	redis.Start(t)
	require.Eventually(t, func() bool {
		return s.reserve(flash, 9, "rd-9", 100).status == http.StatusCreated
	}, 10*time.Second, 100*time.Millisecond)
	// Redis came back empty: the voucher was loaded again from PostgreSQL.
	s.assertConsistent(flash)
	s.assertConsistent(standard)
}

func TestWarmupRacingFirstRequestsLoadsOnce(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true})
	ctx := context.Background()
	for round := 0; round < 5; round++ {
		code := s.createVoucher(voucherSpec{TotalLimit: 50})
		// Take some uses, then drop the gate's copy so that the next
		// requests and explicit warm-ups race to load it.
		created, _ := s.flashSale(code, 20, 20, fmt.Sprintf("w%d", round))
		require.EqualValues(t, 20, created)
		require.NoError(t, s.app.gate.Forget(ctx, code))
		var loads atomic.Int64
		parallel(60, 60, func(i int) {
			if i%3 == 0 {
				r := s.do(http.MethodPost, "/vouchers/"+code+"/warmup", nil)
				if r.status == http.StatusOK && r.body["loadedByThisCall"] == true {
					loads.Add(1)
				}
				return
			}
			s.reserve(code, int64(5000+i), fmt.Sprintf("w%d-late-%d", round, i), 100)
		})
		require.LessOrEqual(t, loads.Load(), int64(1), "the voucher was loaded more than once")
		r := s.do(http.MethodPost, "/vouchers/"+code+"/warmup", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, map[string]any{"code": code, "inRedis": true, "loadedByThisCall": false}, r.body,
			"a warm-up of a loaded voucher says it is in Redis")
		s.assertConsistent(code)
		st := s.state(code)
		require.Equal(t, 50, st.usedCount, "uses lost or doubled across the reload")
	}
}

func TestReleaseAndExpiryReturnUseInBothStores(t *testing.T) {
	t.Parallel()
	for _, m := range modes[1:] {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			opts := m.opts
			opts.ttl = 2 * time.Second
			s := newStack(t, opts)
			code := s.createVoucher(voucherSpec{TotalLimit: 3})
			for i := 1; i <= 3; i++ {
				require.Equal(t, http.StatusCreated, s.reserve(code, int64(i), fmt.Sprintf("re-%d", i), 100).status)
			}
			s.settle(code, 3)
			require.Equal(t, http.StatusOK, s.do(http.MethodPost, "/vouchers/"+code+"/reservations/re-3/confirm", nil).status)
			require.Equal(t, http.StatusOK, s.do(http.MethodDelete, "/vouchers/"+code+"/reservations/re-1", nil).status)
			gs, err := s.app.gate.Inspect(context.Background(), code)
			require.NoError(t, err)
			require.EqualValues(t, 1, gs.Remaining)
			require.True(t, gs.Orders["re-1"].Released)
			// re-2 expires; its use comes back in both stores.
			require.Eventually(t, func() bool {
				gs, err := s.app.gate.Inspect(context.Background(), code)
				return err == nil && gs.Remaining == 2 && s.state(code).released == 2
			}, 10*time.Second, 100*time.Millisecond)
			for _, id := range []string{"re-1", "re-2"} {
				r := s.reserve(code, 1, id, 100)
				if id == "re-2" {
					r = s.reserve(code, 2, id, 100)
				}
				require.Equal(t, "ORDER_RELEASED", r.str("error"), id)
			}
			s.assertConsistent(code)
		})
	}
}

func TestKafkaStoppedDuringSale(t *testing.T) {
	t.Parallel()
	broker := testenv.NewKafka(t)
	s := newStack(t, stackOptions{kafka: true, tweak: func(c *Config) {
		c.KafkaBrokers = broker.Brokers
		c.KafkaTopic = testenv.Topic(t, broker.Brokers, 3)
		c.KafkaDLQTopic = testenv.Topic(t, broker.Brokers, 1)
		c.ProduceTimeout = time.Second
		c.ReconcileGrace = 2 * time.Second
	}})
	code := s.createVoucher(voucherSpec{TotalLimit: 100})
	first, _ := s.flashSale(code, 40, 20, "k1")
	require.EqualValues(t, 40, first)
	s.settle(code, 40)

	broker.Stop(t)
	var unavailable atomic.Int64
	parallel(20, 10, func(i int) {
		r := s.reserve(code, int64(7000+i), fmt.Sprintf("k2-%d", i), 100)
		require.NotEqual(t, http.StatusCreated, r.status, "a reservation was answered 201 without Kafka")
		if r.str("error") == "UNAVAILABLE" {
			unavailable.Add(1)
		}
	})
	require.EqualValues(t, 20, unavailable.Load())
	// Nothing was produced, so the gate gave every use back (an unknown
	// outcome keeps the hold pending until reconciliation; with the broker
	// down from the start nothing left the producer).
	gs, err := s.app.gate.Inspect(context.Background(), code)
	require.NoError(t, err)
	require.EqualValues(t, 60, gs.Remaining+int64(len(pendingOrders(gs.Orders))), "uses leaked in the gate")

	broker.Start(t)
	// A client keeps its orderId through 503s and starts a new attempt when
	// told ORDER_RELEASED: an attempt whose outcome stayed unknown while the
	// broker came back may be fenced by reconciliation (docs/faults.md,
	// finding 8).
	var last response
	orderID, attempts := "k3-first", 0
	require.Eventually(t, func() bool {
		last = s.reserve(code, 8000, orderID, 100)
		if last.str("error") == "ORDER_RELEASED" {
			attempts++
			orderID = fmt.Sprintf("k3-first-%d", attempts)
		}
		return last.status == http.StatusCreated
	}, 60*time.Second, 250*time.Millisecond, "last answer: %s", &last.raw)
	// Holds whose produce outcome was unknown stay pending until
	// reconciliation finds no row for them once the consumer caught up.
	s.settle(code, 41)
	time.Sleep(2 * time.Second)
	s.reconcile(code)
	rest, _ := s.flashSale(code, 200, 20, "k3")
	s.settle(code, 100)
	st := s.state(code)
	// Every held row was answered 201, except the unknown-outcome ones whose
	// event did reach Kafka after all: those 503s stand, as their message
	// says, and a retry with the same orderId returns them. (The others
	// reconciliation fenced with a RELEASED row.)
	var late int
	require.NoError(t, s.db.QueryRow(context.Background(), `SELECT count(*) FROM voucher_redemption
		WHERE voucher_code = $1 AND order_id LIKE 'k2-%' AND status <> 'RELEASED'`, code).Scan(&late))
	require.Equal(t, 100, st.reserved, "the sale did not continue to exactly totalLimit")
	require.Equal(t, 100, int(first+rest+1)+late, "201 answers plus late unknown outcomes differ from held rows")
	s.assertConsistentAfterReconcile(code)
	if late > 0 {
		var id string
		require.NoError(t, s.db.QueryRow(context.Background(), `SELECT order_id FROM voucher_redemption
			WHERE voucher_code = $1 AND order_id LIKE 'k2-%' AND status <> 'RELEASED' LIMIT 1`, code).Scan(&id))
		var n int
		_, err := fmt.Sscanf(id, "k2-%d", &n)
		require.NoError(t, err, "order id %q", id)
		r := s.reserve(code, int64(7000+n), id, 100)
		require.Equal(t, http.StatusCreated, r.status, "a late unknown outcome is not returned on retry: %s", r.raw)
	}
}

func TestKafkaConfirmAndReleaseBeforeConsumerApplied(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{kafka: true, tweak: func(c *Config) { c.RunConsumer = false }})
	code := s.createVoucher(voucherSpec{TotalLimit: 5})
	require.Equal(t, http.StatusCreated, s.reserve(code, 1, "early-1", 100).status)
	require.Equal(t, http.StatusCreated, s.reserve(code, 2, "early-2", 100).status)
	require.Zero(t, s.state(code).reserved, "the consumer is off; nothing should be in PostgreSQL yet")

	r := s.do(http.MethodPost, "/vouchers/"+code+"/reservations/early-1/confirm", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "CONFIRMED", r.str("status"))
	r = s.do(http.MethodDelete, "/vouchers/"+code+"/reservations/early-2", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "RELEASED", r.str("status"))

	// Now the consumer catches up on both events: they change nothing.
	consumer, err := kafkalog.NewConsumer(kafkaConfig(s.cfg, s.app.log), s.app.store)
	require.NoError(t, err)
	consumer.Start(context.Background())
	t.Cleanup(consumer.Stop)
	require.Eventually(t, func() bool { return consumer.Stats().AlreadyApplied >= 2 }, 30*time.Second, 100*time.Millisecond)
	st := s.state(code)
	require.Equal(t, 1, st.confirmed)
	require.Equal(t, 1, st.released)
	require.Equal(t, 1, st.usedCount)
	s.assertConsistent(code)
}

func TestKafkaRedisLostBeforeConsumerAppliedAnswers503NotFound(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{kafka: true, tweak: func(c *Config) { c.RunConsumer = false }})
	code := s.createVoucher(voucherSpec{TotalLimit: 5})
	require.Equal(t, http.StatusCreated, s.reserve(code, 1, "lost-1", 100).status)
	// Redis loses the voucher while its event still waits in Kafka.
	require.NoError(t, s.app.gate.Forget(context.Background(), code))

	// The reservation stands (its event is in Kafka): not a 404, and nothing
	// is changed.
	for _, req := range []struct{ method, path string }{
		{http.MethodGet, "/vouchers/" + code + "/reservations/lost-1"},
		{http.MethodPost, "/vouchers/" + code + "/reservations/lost-1/confirm"},
		{http.MethodDelete, "/vouchers/" + code + "/reservations/lost-1"},
	} {
		r := s.do(req.method, req.path, nil)
		require.Equal(t, http.StatusServiceUnavailable, r.status, "%s %s: %s", req.method, req.path, r.raw)
		require.Equal(t, "UNAVAILABLE", r.str("error"))
	}
	require.Zero(t, s.state(code).reserved)

	consumer, err := kafkalog.NewConsumer(kafkaConfig(s.cfg, s.app.log), s.app.store)
	require.NoError(t, err)
	consumer.Start(context.Background())
	t.Cleanup(consumer.Stop)
	require.Eventually(t, func() bool {
		return s.do(http.MethodPost, "/vouchers/"+code+"/reservations/lost-1/confirm", nil).status == http.StatusOK
	}, 30*time.Second, 200*time.Millisecond)
	// The row is committed before the consumer commits its offset; until
	// the offset is committed the service still (rightly) counts the event
	// as unapplied. Wait for that, then an unknown orderId is a plain 404.
	require.Eventually(t, func() bool {
		return s.app.kafka.log.CaughtUp(context.Background()) == nil
	}, 30*time.Second, 100*time.Millisecond)
	r := s.do(http.MethodPost, "/vouchers/"+code+"/reservations/never/confirm", nil)
	require.Equal(t, http.StatusNotFound, r.status, string(r.raw))
	st := s.state(code)
	require.Equal(t, 1, st.confirmed)
	require.Equal(t, 1, st.usedCount)
}

// TestKafkaConfirmAfterRedisLostMarksTheGateFirst: a confirmation of an
// order whose voucher Redis lost loads the voucher and marks the order
// confirmed in Redis before PostgreSQL confirms it. Confirmed in
// PostgreSQL alone, a load that read the order RESERVED just before could
// write it as held afterwards, and a replacement take over the confirmed
// order (the fault suite's kafka budget seed 228974: the replaced order
// stayed CONFIRMED, its customer held one use more than the gate knew).
func TestKafkaConfirmAfterRedisLostMarksTheGateFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStack(t, stackOptions{kafka: true})
	code := s.createVoucher(voucherSpec{TotalLimit: 5})
	require.Equal(t, http.StatusCreated, s.reserve(code, 1, "mark-1", 100).status)
	s.settle(code, 1)
	// The load waits for the consumer's offset, committed after the row
	// (503 until then: TestKafkaRedisLostBeforeConsumerAppliedAnswers503NotFound).
	require.Eventually(t, func() bool {
		return s.app.kafka.log.CaughtUp(ctx) == nil
	}, 30*time.Second, 50*time.Millisecond)
	require.NoError(t, s.app.gate.Forget(ctx, code))

	r := s.do(http.MethodPost, "/vouchers/"+code+"/reservations/mark-1/confirm", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	h, found, err := s.app.gate.Lookup(ctx, code, "mark-1")
	require.NoError(t, err)
	require.True(t, found, "the confirmation loaded the voucher into Redis")
	require.True(t, h.Confirmed, "and marked the order confirmed there")

	rep := s.replace(code, 1, "mark-2", "mark-1", 100)
	require.Equal(t, http.StatusConflict, rep.status, string(rep.raw))
	require.Equal(t, "REPLACED_ORDER_NOT_HELD", rep.str("error"))
	st := s.state(code)
	require.Equal(t, 1, st.confirmed)
	require.Equal(t, 1, st.usedCount)
	s.assertConsistentAfterReconcile(code)
}

func TestKafkaWarmupRefusedWhileConsumerLags(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{kafka: true, tweak: func(c *Config) { c.RunConsumer = false }})
	hot := s.createVoucher(voucherSpec{TotalLimit: 5})
	require.Equal(t, http.StatusCreated, s.reserve(hot, 1, "lag-1", 100).status)

	// Another voucher created now cannot be loaded: an event is unapplied.
	next := s.createVoucher(voucherSpec{TotalLimit: 5})
	r := s.do(http.MethodPost, "/vouchers/"+next+"/warmup", nil)
	require.Equal(t, http.StatusServiceUnavailable, r.status, string(r.raw))
	require.Contains(t, r.str("message"), "behind")

	consumer, err := kafkalog.NewConsumer(kafkaConfig(s.cfg, s.app.log), s.app.store)
	require.NoError(t, err)
	consumer.Start(context.Background())
	t.Cleanup(consumer.Stop)
	require.Eventually(t, func() bool {
		r := s.do(http.MethodPost, "/vouchers/"+next+"/warmup", nil)
		return r.status == http.StatusOK && r.body["loadedByThisCall"] == true && r.body["inRedis"] == true
	}, 30*time.Second, 200*time.Millisecond)
	require.Equal(t, http.StatusCreated, s.reserve(next, 2, "lag-2", 100).status)
}

// TestKafkaFencedReplacementReleasesTheReplacedOrder is docs/faults.md
// finding 14: a replacement's pending hold whose produce outcome was
// unknown, with no row and the consumer caught up, is fenced by
// reconciliation. The gate released the replaced order when it let the
// replacement through (a retry of it is ORDER_RELEASED), so the fence
// releases it in the database too: before the fix it stayed RESERVED
// there, Redis had one use more than PostgreSQL and the customer's count
// one less, which no reconciliation repaired.
func TestKafkaFencedReplacementReleasesTheReplacedOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStack(t, stackOptions{kafka: true, tweak: func(c *Config) { c.ReconcileGrace = time.Second }})
	code := s.createVoucher(voucherSpec{TotalLimit: 5, PerUserLimit: 1})
	require.Equal(t, http.StatusCreated, s.reserve(code, 1, "old-1", 100).status)
	s.settle(code, 1)
	require.Eventually(t, func() bool {
		gs, err := s.app.gate.Inspect(ctx, code)
		return err == nil && !gs.Orders["old-1"].Pending
	}, 10*time.Second, 20*time.Millisecond, "the hold is marked durable")

	// The hold of a replacement answered 503 outcomeUnknown an hour ago.
	now := time.Now()
	late := voucher.Hold{OrderID: "new-1", CustomerID: "1", OrderAmount: 100, DiscountAmount: 10,
		ReservedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour), Pending: true}
	d, err := s.app.gate.Replace(ctx, code, late, "old-1")
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	r := s.reserve(code, 1, "old-1", 100)
	require.Equal(t, "ORDER_RELEASED", r.str("error"), "the gate answers for the replaced order: %s", r.raw)

	require.Eventually(t, func() bool { return s.app.kafka.log.CaughtUp(ctx) == nil }, 30*time.Second, 50*time.Millisecond)
	r = s.reconcile(code)
	require.Equal(t, []any{"new-1"}, r.body["orphans"], string(r.raw))
	for _, id := range []string{"new-1", "old-1"} {
		row, err := s.app.store.Redemption(ctx, code, id)
		require.NoError(t, err, string(r.raw))
		require.Equal(t, voucher.StatusReleased, row.Status, "%s is released in the database", id)
	}
	st := s.state(code)
	require.Equal(t, 0, st.usedCount)
	gs, err := s.app.gate.Inspect(ctx, code)
	require.NoError(t, err)
	require.EqualValues(t, 5, gs.Remaining)
	require.True(t, gs.Orders["new-1"].Released, "a late retry of the fenced order is ORDER_RELEASED")

	// The producer's retry lands now: it takes nothing.
	late.Replaces = "old-1"
	require.NoError(t, s.app.kafka.log.PublishReserved(ctx, voucher.EventFromHold(code, late)))
	require.Eventually(t, func() bool { return s.app.kafka.log.CaughtUp(ctx) == nil }, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, 0, s.state(code).usedCount)
	for _, id := range []string{"new-1", "old-1"} {
		r = s.reserve(code, 1, id, 100)
		require.Equal(t, "ORDER_RELEASED", r.str("error"), "%s: %s", id, r.raw)
	}
	require.Equal(t, http.StatusCreated, s.reserve(code, 1, "next-1", 100).status, "the customer's quota is free")
	s.settle(code, 1)
	s.assertConsistentAfterReconcile(code)
}

// TestKafkaOrphanFencedBeforeItIsGivenBack is docs/faults.md finding 8: a
// pending hold whose produce outcome was unknown, with no row and the
// consumer caught up, is given back by reconciliation; its event, which the
// producer was still retrying, arrives afterwards. The RELEASED row written
// first makes the late event take nothing, and a retry of the order is
// answered ORDER_RELEASED.
func TestKafkaOrphanFencedBeforeItIsGivenBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStack(t, stackOptions{kafka: true, tweak: func(c *Config) { c.ReconcileGrace = time.Second }})
	code := s.createVoucher(voucherSpec{TotalLimit: 5, PerUserLimit: 1})
	require.Equal(t, http.StatusCreated, s.reserve(code, 1, "ok-1", 100).status)
	s.settle(code, 1)

	// The hold of a reservation answered 503 outcomeUnknown an hour ago.
	now := time.Now()
	late := voucher.Hold{OrderID: "late-1", CustomerID: "2", OrderAmount: 100, DiscountAmount: 10,
		ReservedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour), Pending: true}
	d, err := s.app.gate.Reserve(ctx, code, 1, late)
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)

	// Reconciliation gives holds back only once the consumer has caught up.
	require.Eventually(t, func() bool { return s.app.kafka.log.CaughtUp(ctx) == nil }, 30*time.Second, 50*time.Millisecond)
	r := s.reconcile(code)
	require.Equal(t, []any{"late-1"}, r.body["orphans"], string(r.raw))
	row, err := s.app.store.Redemption(ctx, code, "late-1")
	require.NoError(t, err, string(r.raw))
	require.Equal(t, voucher.StatusReleased, row.Status, "the orphan is fenced in the database")
	gs, err := s.app.gate.Inspect(ctx, code)
	require.NoError(t, err)
	require.EqualValues(t, 4, gs.Remaining, "the orphan's use is back in the gate")
	require.True(t, gs.Orders["late-1"].Released)

	// The producer's retry lands now: it takes nothing.
	require.NoError(t, s.app.kafka.log.PublishReserved(ctx, voucher.EventFromHold(code, late)))
	require.Eventually(t, func() bool { return s.app.kafka.log.CaughtUp(ctx) == nil }, 30*time.Second, 50*time.Millisecond)
	st := s.state(code)
	require.Equal(t, 1, st.usedCount)
	require.Equal(t, 1, st.reserved)
	require.Equal(t, 1, st.released)

	// A retry of the order has a definite answer; the customer's quota is free.
	r = s.reserve(code, 2, "late-1", 100)
	require.Equal(t, http.StatusConflict, r.status, string(r.raw))
	require.Equal(t, "ORDER_RELEASED", r.str("error"))
	require.Equal(t, http.StatusCreated, s.reserve(code, 2, "new-2", 100).status)
	s.settle(code, 2)
	s.assertConsistentAfterReconcile(code)
}
