package main

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// newProxiedStack starts a stack whose voucherd reaches PostgreSQL through a
// proxy that can cut requests and answers.
func newProxiedStack(t *testing.T, opts stackOptions) (*stack, *testenv.Proxy) {
	t.Helper()
	pg := testenv.Postgres(t)
	u, err := url.Parse(pg.URL)
	require.NoError(t, err)
	proxy := testenv.NewProxy(t, u.Host)
	opts.databaseURL = proxy.URL(t, pg.URL)
	return newStack(t, opts), proxy
}

func requireOutcomeUnknown(t *testing.T, r response) {
	t.Helper()
	require.Equal(t, http.StatusServiceUnavailable, r.status, string(r.raw))
	require.Equal(t, "UNAVAILABLE", r.str("error"))
	require.Equal(t, true, r.body["outcomeUnknown"], "a 503 after which the use may be taken says so: %s", r.raw)
}

// TestLostCommitReplyAnswersOutcomeUnknown: the reservation's transaction
// commits but its answer is lost. voucherd answers 503 with outcomeUnknown,
// gives nothing back blind (the gate keeps the use in flash mode), and a
// retry with the same orderId answers 201 from the row.
func TestLostCommitReplyAnswersOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, m := range modes[:2] { // the standard and flash-sync writes
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			s, proxy := newProxiedStack(t, m.opts)
			code := s.createVoucher(voucherSpec{TotalLimit: 5})
			cut := proxy.CutAnswerContaining([]byte("lost-reply-1"), 300*time.Millisecond)
			r := s.reserve(code, 1, "lost-reply-1", 100)
			testenv.WaitCut(t, cut)
			requireOutcomeUnknown(t, r)
			st := s.state(code)
			require.Equal(t, 1, st.reserved, "the transaction committed")
			if s.opts.flash {
				gs, err := s.app.gate.Inspect(context.Background(), code)
				require.NoError(t, err)
				require.EqualValues(t, 1, gs.Held(), "the gate keeps the use: it was not given back blind")
				require.EqualValues(t, 4, gs.Remaining)
			}
			r = s.reserve(code, 1, "lost-reply-1", 100)
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
			s.assertConsistent(code)
		})
	}
}

// TestLostRequestSettledWithoutRetry: the connection breaks right after the
// reservation's statement was sent, so its outcome is unknown although the
// server never got it. Without a retry, the instance settles the order
// within seconds: the orderId is fenced (a RELEASED row) and the gate's use
// given back; a late retry is answered ORDER_RELEASED.
func TestLostRequestSettledWithoutRetry(t *testing.T) {
	t.Parallel()
	s, proxy := newProxiedStack(t, stackOptions{flash: true})
	ctx := context.Background()
	code := s.createVoucher(voucherSpec{TotalLimit: 5})
	cut := proxy.CutRequestContaining([]byte("lost-request-1"))
	r := s.reserve(code, 1, "lost-request-1", 100)
	testenv.WaitCut(t, cut)
	requireOutcomeUnknown(t, r)
	gs, err := s.app.gate.Inspect(ctx, code)
	require.NoError(t, err)
	require.EqualValues(t, 4, gs.Remaining, "the use stays held until settled")

	deadline := time.Now().Add(10 * time.Second)
	for {
		gs, err = s.app.gate.Inspect(ctx, code)
		require.NoError(t, err)
		if gs.Remaining == 5 {
			break
		}
		require.True(t, time.Now().Before(deadline), "not settled within 10s: %+v", gs)
		time.Sleep(50 * time.Millisecond)
	}
	require.True(t, gs.Orders["lost-request-1"].Released, "the orderId is marked released in the gate")
	st := s.state(code)
	require.Equal(t, 1, st.released, "fenced in the store")
	require.Zero(t, st.reserved)
	r = s.reserve(code, 1, "lost-request-1", 100)
	require.Equal(t, http.StatusConflict, r.status, string(r.raw))
	require.Equal(t, "ORDER_RELEASED", r.str("error"))
	s.assertConsistent(code)
}

// TestLiveWritersHoldLeftToItForAGrace: a hold without a row of another
// instance that is alive, older than the grace period when reconciliation
// first sees it (a take that reached Redis late, after its call hung), is
// left to its writer's own settle for a grace period more, then given
// back as an orphan: forgotten in sync mode, so that a retry takes afresh.
func TestLiveWritersHoldLeftToItForAGrace(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true})
	ctx := context.Background()
	code := s.createVoucher(voucherSpec{TotalLimit: 5})
	gate := s.app.gate
	require.NoError(t, gate.Beat(ctx, "peer-1", time.Minute))
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	h := voucher.Hold{OrderID: "late-1", CustomerID: "2", OrderAmount: 100, DiscountAmount: 1000,
		ReservedAt: at, ExpiresAt: at.Add(2 * time.Hour), Owner: "peer-1"}
	dec, err := gate.Reserve(ctx, code, 1, h)
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, dec.Outcome)

	const grace = time.Second
	rep, err := s.app.svc.Reconcile(ctx, code, true, grace)
	require.NoError(t, err)
	require.Equal(t, []string{"late-1"}, rep.InFlight, "left to its live writer")
	require.Empty(t, rep.Orphans)
	gs, err := gate.Inspect(ctx, code)
	require.NoError(t, err)
	require.EqualValues(t, 4, gs.Remaining)

	time.Sleep(grace)
	rep, err = s.app.svc.Reconcile(ctx, code, true, grace)
	require.NoError(t, err)
	require.Equal(t, []string{"late-1"}, rep.Orphans, "seen for a grace period: given back")
	gs, err = gate.Inspect(ctx, code)
	require.NoError(t, err)
	require.EqualValues(t, 5, gs.Remaining)
	require.NotContains(t, gs.Orders, "late-1", "forgotten")
	require.Equal(t, http.StatusCreated, s.reserve(code, 2, "late-1", 100).status, "a retry takes afresh")
	s.assertConsistent(code)
}

// TestDeadInstanceHoldsRecoveredAtOnce: a hold taken by an instance whose
// heartbeat expired, with no row, is fenced and given back by the next
// recovery round, well before the reconciliation grace period.
func TestDeadInstanceHoldsRecoveredAtOnce(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true})
	ctx := context.Background()
	code := s.createVoucher(voucherSpec{TotalLimit: 5})
	require.Equal(t, http.StatusCreated, s.reserve(code, 1, "live-1", 100).status)

	// The other instance beats once, takes a use, and dies before writing it.
	gate := s.app.gate
	require.NoError(t, gate.Beat(ctx, "gone-1", 300*time.Millisecond))
	now := time.Now().Truncate(time.Millisecond)
	h := voucher.Hold{OrderID: "orphan-1", CustomerID: "2", OrderAmount: 100, DiscountAmount: 1000,
		ReservedAt: now, ExpiresAt: now.Add(15 * time.Minute), Owner: "gone-1"}
	v, err := s.app.svc.Voucher(ctx, code)
	require.NoError(t, err)
	dec, err := gate.Reserve(ctx, code, v.PerUserLimit, h)
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, dec.Outcome)

	rep, err := s.app.svc.Reconcile(ctx, code, false, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, []string{"orphan-1"}, rep.InFlight, "alive: its write may be coming")

	deadline := time.Now().Add(10 * time.Second)
	for {
		gs, err := gate.Inspect(ctx, code)
		require.NoError(t, err)
		if gs.Orders["orphan-1"].Released {
			// Inspect reads the counts before it scans the orders, so the
			// release may have landed between the two: the counts are read
			// again.
			c, err := gate.Counts(ctx, code)
			require.NoError(t, err)
			require.EqualValues(t, 4, c.Remaining)
			break
		}
		require.True(t, time.Now().Before(deadline), "the dead instance's hold was not recovered within 10s")
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, 1, s.state(code).released, "fenced in the store, so a late write takes nothing")
	r := s.reserve(code, 2, "orphan-1", 100)
	require.Equal(t, "ORDER_RELEASED", r.str("error"), string(r.raw))
	// The recovery round forgets the instance only after it reconciled
	// every voucher (and audited the repairs), which ends after the hold
	// above was given back.
	for {
		dead, err := gate.DeadInstances(ctx)
		require.NoError(t, err)
		if !slices.Contains(dead, "gone-1") {
			break
		}
		require.True(t, time.Now().Before(deadline), "the recovered instance was not forgotten within 10s: %v", dead)
		time.Sleep(50 * time.Millisecond)
	}
	s.assertConsistent(code)
}
