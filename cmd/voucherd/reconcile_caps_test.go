package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// TestReconciliationCapsFindingsAndRepairsAll plants more findings of
// three kinds than a report names (orphans, held rows the gate lost, stale
// holds) on a flash voucher whose gate is read four entries a call, in
// both flash modes (Kafka mode fences its orphans, once the consumer has
// caught up, chunk by chunk): the
// report names at most the cap of each, counts all of them and says it is
// truncated; the repairing pass repairs every one of them, after which the
// stores agree (PostgreSQL's counters match its rows, Redis holds exactly
// the held rows) and a dry run finds nothing.
func TestReconciliationCapsFindingsAndRepairsAll(t *testing.T) {
	t.Parallel()
	for _, mode := range modes[1:] {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			capsFindingsAndRepairsAll(t, mode.opts)
		})
	}
}

func capsFindingsAndRepairsAll(t *testing.T, opts stackOptions) {
	const limit = 3
	opts.tweak = func(c *Config) {
		c.SoldOutTTL = -1
		c.ReconcileEvery = 0
		c.RedisScanCount = 4
		c.reconcileFindings = limit
	}
	s := newStack(t, opts)
	ctx := context.Background()
	code := s.createVoucher(voucherSpec{TotalLimit: 60, PerUserLimit: 1})
	planted := map[string][]string{}
	cust := int64(0)
	held := 0
	reserve := func(id string) {
		t.Helper()
		cust++
		require.Equal(t, http.StatusCreated, s.reserve(code, cust, id, 100).status)
		held++
		s.settle(code, held) // Kafka mode: the row is written
	}
	for i := range 12 {
		reserve(fmt.Sprintf("ok-%d", i))
	}
	// Kafka mode: the holds are marked durable before the findings are
	// planted, so that the passes below find only those.
	s.reconcile(code)
	// Orphans: uses taken in Redis long ago whose rows never came.
	now := time.Now()
	for i := range 7 {
		id := fmt.Sprintf("orphan-%d", i)
		d, err := s.app.gate.Reserve(ctx, code, 1, voucher.Hold{OrderID: id, CustomerID: fmt.Sprint(1000 + i), OrderAmount: 100,
			ReservedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour)})
		require.NoError(t, err)
		require.Equal(t, voucher.GateTaken, d.Outcome)
		planted["orphans"] = append(planted["orphans"], id)
	}
	// Missing: held rows whose orderIds Redis forgot.
	for i := range 6 {
		id := fmt.Sprintf("missing-%d", i)
		reserve(id)
		_, err := s.app.gate.Release(ctx, code, id, voucher.ReleaseForget)
		require.NoError(t, err)
		planted["missing"] = append(planted["missing"], id)
	}
	// Stale: rows released in PostgreSQL alone.
	for i := range 5 {
		id := fmt.Sprintf("stale-%d", i)
		reserve(id)
		_, released, err := s.app.store.Release(ctx, code, id, time.Now())
		require.NoError(t, err)
		require.True(t, released)
		held--
		planted["stale"] = append(planted["stale"], id)
	}
	want := map[string]float64{"orphans": 7, "missing": 6, "stale": 5}

	for _, method := range []string{http.MethodGet, http.MethodPost} {
		r := s.do(method, "/vouchers/"+code+"/reconciliation", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		found, _ := r.body["found"].(map[string]any)
		for kind, n := range want {
			require.Equal(t, n, found[kind], "%s %s", method, kind)
			l, _ := r.body[kind].([]any)
			require.Len(t, l, limit, "%s %s", method, kind)
			for _, id := range l {
				require.Contains(t, planted[kind], id, kind)
			}
		}
		for _, kind := range []string{"inFlight", "abandoned", "uncommitted", "unconfirmed"} {
			require.EqualValues(t, 0, found[kind], kind)
		}
		require.Equal(t, true, r.body["truncated"], method)
		require.Equal(t, method == http.MethodPost, r.body["repaired"], method)
		require.EqualValues(t, 12+6, r.body["databaseRows"], "every held row read")
		require.Equal(t, true, r.body["rowsChecked"], "nothing wrote meanwhile: the counters were checked")
		require.Nil(t, r.body["counterDrifts"], "the counters match the rows")
	}

	r := s.do(http.MethodGet, "/vouchers/"+code+"/reconciliation", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	for _, kind := range []string{"orphans", "missing", "stale"} {
		require.Empty(t, r.body[kind], kind)
	}
	require.Equal(t, false, r.body["truncated"])
	found, _ := r.body["found"].(map[string]any)
	require.Len(t, found, 7)
	for kind, n := range found {
		require.EqualValues(t, 0, n, "nothing left to find: %s", kind)
	}
	require.EqualValues(t, 0, r.body["drift"])
	s.assertConsistent(code)
	gs, err := s.app.gate.Inspect(ctx, code)
	require.NoError(t, err)
	inRedis := map[string]bool{}
	for id, h := range gs.Orders {
		if !h.Released {
			inRedis[id] = true
		}
	}
	rows, err := s.db.Query(ctx, `SELECT order_id FROM voucher_redemption
		WHERE voucher_code = $1 AND status IN ('RESERVED','CONFIRMED')`, code)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		require.True(t, inRedis[id], "held row %s is held in Redis", id)
		n++
	}
	require.NoError(t, rows.Err())
	require.Len(t, inRedis, n, "Redis holds exactly the held rows")
}
