package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/redisgate"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// TestReconciliationRepairsOrphanAndNeverRaisesTheCounter injects an orphan
// gate hold and counter drift in both directions into a flash voucher and
// checks what the admin endpoints report and repair: the orphan is given
// back, a counter above what the database allows is clamped, a counter below
// it (undersell) is reported and left alone, and repairing twice changes
// nothing more.
func TestReconciliationRepairsOrphanAndNeverRaisesTheCounter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	redis := testenv.NewRedis(t)
	s := newStack(t, stackOptions{flash: true, redisAddrs: []string{redis.Addr},
		tweak: func(c *Config) { c.SoldOutTTL = -1 }})
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redis.Addr}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	code := s.createVoucher(voucherSpec{TotalLimit: 10})
	remainingKey := redisgate.RemainingKey(s.cfg.RedisKeyPrefix, code)
	for i, id := range []string{"r-1", "r-2", "r-3"} {
		require.Equal(t, http.StatusCreated, s.reserve(code, int64(i+1), id, 100).status)
	}
	remaining := func() int64 {
		t.Helper()
		st, err := s.app.gate.Inspect(ctx, code)
		require.NoError(t, err)
		return st.Remaining
	}
	report := func(method string) response {
		t.Helper()
		r := s.do(method, "/vouchers/"+code+"/reconciliation", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		return r
	}
	require.EqualValues(t, 7, remaining())

	// An orphan: a use taken in Redis whose database write never happened,
	// older than the grace period.
	now := time.Now()
	d, err := s.app.gate.Reserve(ctx, code, 1, voucher.Hold{OrderID: "orphan-1", CustomerID: "99", OrderAmount: 100,
		DiscountAmount: 10, ReservedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	require.EqualValues(t, 6, remaining())

	// A dry run reports it and changes nothing.
	r := report(http.MethodGet)
	require.Equal(t, []any{"orphan-1"}, r.body["orphans"])
	require.EqualValues(t, -1, r.body["drift"])
	require.Equal(t, false, r.body["repaired"])
	require.EqualValues(t, 6, remaining())

	// The repair gives the orphan's use back; a second one finds nothing.
	r = report(http.MethodPost)
	require.Equal(t, true, r.body["repaired"])
	require.EqualValues(t, 7, remaining())
	r = report(http.MethodGet)
	require.Empty(t, r.body["orphans"])
	require.EqualValues(t, 0, r.body["drift"])
	report(http.MethodPost)
	require.EqualValues(t, 7, remaining())
	s.assertConsistent(code)

	// Counter drift towards oversell (Redis would hand out 2 uses the
	// database does not have): reported, and clamped by the repair.
	require.NoError(t, rc.Do(ctx, rc.B().Incrby().Key(remainingKey).Increment(2).Build()).Error())
	r = report(http.MethodGet)
	require.EqualValues(t, 2, r.body["drift"])
	require.EqualValues(t, 9, remaining(), "a dry run changes nothing")
	r = report(http.MethodPost)
	require.EqualValues(t, 9, r.body["clampedFrom"])
	require.EqualValues(t, 7, remaining())

	// Counter drift towards undersell (Redis lost 2 uses it cannot name):
	// reported, never repaired by raising the counter, however often asked.
	require.NoError(t, rc.Do(ctx, rc.B().Decrby().Key(remainingKey).Decrement(2).Build()).Error())
	for range 2 {
		r = report(http.MethodPost)
		require.EqualValues(t, -2, r.body["drift"])
		require.EqualValues(t, 5, remaining())
	}
	// Every held row is still known to the gate, and the database is
	// unchanged: 3 held rows, used_count 3.
	st := s.state(code)
	require.Equal(t, 3, st.usedCount)
	require.Equal(t, 3, st.reserved)
}

// TestReconciliationMarksConfirmedOrders: in Kafka mode a Redis hold whose
// row is CONFIRMED but that Redis holds as a plain hold (a load read the
// order before its confirmation committed) is reported unconfirmed and
// marked by the repair, after which a replacement naming the order is
// refused, as it is for any confirmed order.
func TestReconciliationMarksConfirmedOrders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStack(t, stackOptions{kafka: true})
	code := s.createVoucher(voucherSpec{TotalLimit: 5})
	require.Equal(t, http.StatusCreated, s.reserve(code, 1, "k-1", 5000).status)
	s.settle(code, 1)
	s.assertConsistentAfterReconcile(code)
	// The confirmation reaches PostgreSQL without Redis knowing, as when a
	// load wrote the hold after the confirmation's mark found nothing.
	_, err := s.db.Exec(ctx, `UPDATE voucher_redemption SET status = 'CONFIRMED' WHERE order_id = 'k-1'`)
	require.NoError(t, err)

	r := s.do(http.MethodGet, "/vouchers/"+code+"/reconciliation", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, []any{"k-1"}, r.body["unconfirmed"], string(r.raw))
	r = s.reconcile(code)
	require.Equal(t, []any{"k-1"}, r.body["unconfirmed"], string(r.raw))
	h, found, err := s.app.gate.Lookup(ctx, code, "k-1")
	require.NoError(t, err)
	require.True(t, found)
	require.True(t, h.Confirmed)
	r = s.do(http.MethodGet, "/vouchers/"+code+"/reconciliation", nil)
	require.Equal(t, []any{}, r.body["unconfirmed"], string(r.raw))

	rep := s.replace(code, 1, "k-2", "k-1", 5000)
	require.Equal(t, http.StatusConflict, rep.status, string(rep.raw))
	require.Equal(t, "REPLACED_ORDER_NOT_HELD", rep.str("error"))
	s.assertConsistent(code)
}

// TestReconciliationAdoptsAConfirmedOrderAReplacementReleased: in Kafka
// mode a replacement that took over an order PostgreSQL had confirmed
// without Redis's mark leaves the order released in Redis; the consumer
// keeps it CONFIRMED and writes the replacement as a use of its own. The
// order is reported missing and adopted, after which Redis and PostgreSQL
// agree (before, no pass repaired it: Redis had one use more).
func TestReconciliationAdoptsAConfirmedOrderAReplacementReleased(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStack(t, stackOptions{kafka: true})
	code := s.createVoucher(voucherSpec{TotalLimit: 5, PerUserLimit: 2})
	require.Equal(t, http.StatusCreated, s.reserve(code, 1, "c-1", 5000).status)
	s.settle(code, 1)
	// The confirmation reaches PostgreSQL without Redis knowing.
	_, err := s.db.Exec(ctx, `UPDATE voucher_redemption SET status = 'CONFIRMED' WHERE order_id = 'c-1'`)
	require.NoError(t, err)
	rep := s.replace(code, 1, "c-2", "c-1", 5000)
	require.Equal(t, http.StatusCreated, rep.status, string(rep.raw))
	s.settle(code, 2)
	st := s.state(code)
	require.Equal(t, 1, st.confirmed)
	require.Equal(t, 1, st.reserved)

	r := s.do(http.MethodGet, "/vouchers/"+code+"/reconciliation", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, []any{"c-1"}, r.body["missing"], string(r.raw))
	require.EqualValues(t, 1, r.body["drift"], string(r.raw))
	r = s.reconcile(code)
	require.Equal(t, []any{"c-1"}, r.body["missing"], string(r.raw))
	h, found, err := s.app.gate.Lookup(ctx, code, "c-1")
	require.NoError(t, err)
	require.True(t, found)
	require.True(t, h.Confirmed, "held again, marked confirmed")
	r = s.do(http.MethodGet, "/vouchers/"+code+"/reconciliation", nil)
	require.Equal(t, []any{}, r.body["missing"], string(r.raw))
	require.EqualValues(t, 0, r.body["drift"], string(r.raw))
	s.assertConsistent(code)

	// The customer holds 2 of 2 now in both: a third use is refused.
	res := s.reserve(code, 1, "c-3", 5000)
	require.Equal(t, http.StatusConflict, res.status, string(res.raw))
	require.Equal(t, "ALREADY_USED", res.str("error"))
}
