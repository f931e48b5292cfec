package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
)

// outageTally counts the answers of one stack's reservations in one phase.
type outageTally struct {
	created, unavailable, other atomic.Int64
}

// outageCustomers hands out customer ids no reservation of the test used.
var outageCustomers atomic.Int64

// outageSale sends reservations of new orderIds from new customers with
// width workers until n were sent or the deadline passed, and records in ids
// the orderIds answered 201 (true) and those answered 503 with
// outcomeUnknown (false).
func (s *stack) outageSale(code, prefix string, n, width int, deadline time.Time, tl *outageTally, ids *sync.Map) {
	s.t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range width {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				orderID := fmt.Sprintf("%s-%d", prefix, i)
				r := s.reserve(code, 1_000_000+outageCustomers.Add(1), orderID, 100)
				switch r.status {
				case http.StatusCreated:
					tl.created.Add(1)
					ids.Store(orderID, true)
				case http.StatusServiceUnavailable:
					tl.unavailable.Add(1)
					if bytes.Contains(r.raw, []byte(`"outcomeUnknown":true`)) {
						ids.Store(orderID, false)
					}
				default:
					tl.other.Add(1)
					s.t.Errorf("reservation %s: unexpected answer %d %s", orderID, r.status, r.raw)
				}
			}
		}()
	}
	wg.Wait()
}

// TestKafkaSellsThroughPostgresOutage stops PostgreSQL in the middle of a
// sale. Kafka mode answers every reservation that has a free use with 201
// from Redis and the log, and the consumer writes each of them exactly once
// after PostgreSQL is back; sync mode, on the same server, answers 503 and
// takes nothing while it is down, then sells again.
func TestKafkaSellsThroughPostgresOutage(t *testing.T) {
	t.Parallel()
	const outage = 6 * time.Second
	srv := testenv.NewPostgres(t)
	kafka := newStack(t, stackOptions{kafka: true, databaseURL: srv.NewDatabase(t).URL})
	flash := newStack(t, stackOptions{flash: true, databaseURL: srv.NewDatabase(t).URL})
	kcode := kafka.createVoucher(voucherSpec{TotalLimit: 5000})
	scode := flash.createVoucher(voucherSpec{TotalLimit: 5000})

	var kIDs, sIDs sync.Map
	var kBefore, sBefore, kDown, sDown, kAfter outageTally
	far := time.Now().Add(time.Minute)
	kafka.outageSale(kcode, "before", 100, 8, far, &kBefore, &kIDs)
	flash.outageSale(scode, "before", 100, 8, far, &sBefore, &sIDs)
	require.EqualValues(t, 100, kBefore.created.Load())
	require.EqualValues(t, 100, sBefore.created.Load())

	srv.Stop(t)
	stopped := time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); kafka.outageSale(kcode, "down", 1500, 8, stopped.Add(outage), &kDown, &kIDs) }()
	go func() { defer wg.Done(); flash.outageSale(scode, "down", 1500, 8, stopped.Add(outage), &sDown, &sIDs) }()
	wg.Wait()
	if wait := time.Until(stopped.Add(outage)); wait > 0 {
		time.Sleep(wait)
	}
	srv.Start(t)
	restarted := time.Now()

	// Kafka mode: no reservation with a free use failed while PostgreSQL was
	// down.
	require.Positive(t, kDown.created.Load(), "Kafka mode answered no reservation while PostgreSQL was down")
	require.Zero(t, kDown.unavailable.Load(), "Kafka mode answered 503 while PostgreSQL was down")
	// Sync mode: 503 for every take, nothing taken.
	require.Zero(t, sDown.created.Load(), "sync mode answered 201 without PostgreSQL")
	require.Positive(t, sDown.unavailable.Load())

	kafka.outageSale(kcode, "after", 100, 8, far, &kAfter, &kIDs)
	require.EqualValues(t, 100, kAfter.created.Load())
	var sAfter outageTally
	require.Eventually(t, func() bool {
		flash.outageSale(scode, fmt.Sprintf("after%d", time.Now().UnixNano()), 1, 1, far, &sAfter, &sIDs)
		return sAfter.created.Load() > 0
	}, 30*time.Second, 100*time.Millisecond, "sync mode did not sell again after PostgreSQL came back")

	kCreated := int(kBefore.created.Load() + kDown.created.Load() + kAfter.created.Load())
	kafka.settle(kcode, kCreated)
	t.Logf("PostgreSQL down %s: Kafka mode %d x 201, 0 x 503, consumer caught up %s after restart; sync mode %d x 503",
		outage, kDown.created.Load(), time.Since(restarted).Round(time.Millisecond), sDown.unavailable.Load())

	for _, c := range []struct {
		s    *stack
		code string
		ids  *sync.Map
	}{{kafka, kcode, &kIDs}, {flash, scode, &sIDs}} {
		var want, unknown []string
		c.ids.Range(func(k, created any) bool {
			if created.(bool) {
				want = append(want, k.(string))
			} else {
				unknown = append(unknown, k.(string))
			}
			return true
		})
		// A write whose outcome was unknown keeps its use in Redis until the
		// instance settles it from the store, within seconds of PostgreSQL's
		// return; until then Redis undersells.
		require.Eventually(t, func() bool {
			gs, err := c.s.app.gate.Inspect(context.Background(), c.code)
			if err != nil || !gs.Loaded {
				return err == nil
			}
			st := c.s.state(c.code)
			return int64(gs.Remaining) == int64(st.totalLimit-st.reserved-st.confirmed)
		}, 15*time.Second, 50*time.Millisecond, "Redis and PostgreSQL of %s did not agree within 15 s", c.code)
		var rows int
		require.NoError(t, c.s.db.QueryRow(context.Background(), `SELECT count(*) FROM voucher_redemption
			WHERE voucher_code = $1 AND status = 'RESERVED' AND order_id = ANY($2)`, c.code, want).Scan(&rows))
		require.Equal(t, len(want), rows, "an acknowledged reservation of %s is missing in PostgreSQL", c.code)
		st := c.s.state(c.code)
		require.Equal(t, len(want), st.reserved+st.confirmed, "%s holds uses nobody was answered 201 for", c.code)
		// A 503 marked outcomeUnknown may leave a RELEASED row (the fence
		// that settled it); any other 503 leaves no row at all.
		var stray int
		require.NoError(t, c.s.db.QueryRow(context.Background(), `SELECT count(*) FROM voucher_redemption
			WHERE voucher_code = $1 AND order_id <> ALL($2) AND (status <> 'RELEASED' OR order_id <> ALL($3))`,
			c.code, want, unknown).Scan(&stray))
		require.Zero(t, stray, "%s has rows of orders answered neither 201 nor outcomeUnknown", c.code)
		c.s.assertConsistent(c.code)
	}
}

// With every use of a flash voucher RESERVED (none confirmed) and
// PostgreSQL stopped, a reservation that finds no free use is answered
// HELD_OUT with a Retry-After in both flash modes: the service cannot read
// the holds, but no hold can have been confirmed meanwhile, so the uses may
// still come free. (Sync mode reads the definition from PostgreSQL once
// its cached copy is VoucherCacheTTL old, and answers 503 then: the cache
// is set long here so that the gate is asked in both modes.)
func TestHeldOutWhilePostgresDown(t *testing.T) {
	t.Parallel()
	const uses = 20
	srv := testenv.NewPostgres(t)
	longCache := func(c *Config) { c.VoucherCacheTTL = time.Minute }
	stacks := []struct {
		mode string
		s    *stack
		code string
	}{
		{mode: "flash-sync", s: newStack(t, stackOptions{flash: true, databaseURL: srv.NewDatabase(t).URL, tweak: longCache})},
		{mode: "flash-kafka", s: newStack(t, stackOptions{kafka: true, databaseURL: srv.NewDatabase(t).URL, tweak: longCache})},
	}
	for i := range stacks {
		c := &stacks[i]
		c.code = c.s.createVoucher(voucherSpec{TotalLimit: uses})
		for n := range uses {
			r := c.s.reserve(c.code, int64(n+1), fmt.Sprintf("held-%d", n), 100)
			require.Equal(t, http.StatusCreated, r.status, "%s: %s", c.mode, r.raw)
		}
	}
	srv.Stop(t)
	for _, c := range stacks {
		r := c.s.reserve(c.code, uses+1, "late", 100)
		require.Equal(t, http.StatusConflict, r.status, "%s: %s", c.mode, r.raw)
		require.Equal(t, "HELD_OUT", r.str("error"), "%s: %s", c.mode, r.raw)
		require.Positive(t, r.num("retryAfter"), "%s: %s", c.mode, r.raw)
		require.NotEmpty(t, r.header.Get("Retry-After"), c.mode)
	}
	srv.Start(t)
}
