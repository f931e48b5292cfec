package voucher

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The chunked store's counter rows never change: its stamp is its marker.
func (s *chunkStore) StampCounters(context.Context, string) (string, error) { return "m", nil }

func (s *chunkStore) CountersMarker(context.Context, string) (string, error) { return "m", nil }

// auditedStore is a chunkStore that keeps the audit entries of repairs.
type auditedStore struct {
	*chunkStore
	audits int
}

func (s *auditedStore) RecordAudit(context.Context, AuditEntry) error {
	s.audits++
	return nil
}

// repairGate is a chunkGate that applies reconciliation's repairs to its
// orders and counts them.
type repairGate struct {
	chunkGate
	adopted, released, forgotten int
}

func (g *repairGate) Adopt(_ context.Context, _ string, h Hold) (bool, error) {
	if slices.ContainsFunc(g.orders, func(o Hold) bool { return o.OrderID == h.OrderID }) {
		return false, nil
	}
	g.adopted++
	g.orders = append(g.orders, h)
	g.remaining--
	return true, nil
}

func (g *repairGate) Release(_ context.Context, _, id string, mode ReleaseMode) (bool, error) {
	i := slices.IndexFunc(g.orders, func(o Hold) bool { return o.OrderID == id })
	if i < 0 || g.orders[i].Released {
		return false, nil
	}
	// A forgotten order stays in the slice, released, so that the scan's
	// cursor (an index) keeps its place, as HSCAN's does.
	g.remaining++
	g.orders[i].Released = true
	if mode == ReleaseForget {
		g.forgotten++
	} else {
		g.released++
	}
	return true, nil
}

func (g *repairGate) Clamp(_ context.Context, _ string, total int32) (before, after int64, err error) {
	var held int64
	for _, h := range g.orders {
		if !h.Released {
			held++
		}
	}
	before = g.remaining
	g.remaining = min(g.remaining, int64(total)-held)
	return before, g.remaining, nil
}

// A report names at most ReconcileFindings orders per kind, counts all of
// them and says it left some out; a repairing pass repairs every finding,
// named or not, chunk by chunk, after which the stores agree.
func TestReconcileCapsFindingsAndRepairsAll(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	gate := &repairGate{chunkGate: chunkGate{scan: 3}}
	st := &chunkStore{total: 100}
	planted := map[string][]string{}
	for i := range 60 {
		id := fmt.Sprintf("o-%02d", i)
		at := now.Add(-time.Hour).Add(time.Duration(i) * time.Second)
		h := Hold{OrderID: id, CustomerID: "1", DiscountAmount: 100, ReservedAt: at, ExpiresAt: at.Add(2 * time.Hour)}
		r := Redemption{OrderID: id, VoucherCode: "CAP", CustomerID: "1", DiscountAmount: 100, Status: StatusReserved,
			CreatedAt: at, ExpiresAt: at.Add(2 * time.Hour)}
		switch i % 6 {
		case 1: // an orphan
			gate.orders = append(gate.orders, h)
			planted["orphans"] = append(planted["orphans"], id)
			continue
		case 2: // a held row the gate lost
			st.rows = append(st.rows, r)
			planted["missing"] = append(planted["missing"], id)
			continue
		case 3: // a stale hold
			r.Status = StatusReleased
			planted["stale"] = append(planted["stale"], id)
		}
		gate.orders = append(gate.orders, h)
		st.rows = append(st.rows, r)
	}
	gate.remaining = int64(st.total) - int64(len(gate.orders))
	const limit = 3
	audited := &auditedStore{chunkStore: st}
	svc, err := NewService(ServiceConfig{Store: audited, Gate: gate, ReconcileChunk: 4, ReconcileFindings: limit,
		Clock: func() time.Time { return now }})
	require.NoError(t, err)
	ctx := context.Background()

	for _, repair := range []bool{false, true} {
		rep, err := svc.Reconcile(ctx, "CAP", repair, 30*time.Second)
		require.NoError(t, err)
		require.Equal(t, FindingCounts{Orphans: 10, Missing: 10, Stale: 10}, rep.Found, "repair=%v", repair)
		require.True(t, rep.Truncated)
		for kind, l := range map[string][]string{"orphans": rep.Orphans, "missing": rep.Missing, "stale": rep.Stale} {
			require.Len(t, l, limit, kind)
			require.True(t, slices.IsSorted(l), kind)
			for _, id := range l {
				require.Contains(t, planted[kind], id, kind)
			}
		}
		require.Empty(t, rep.InFlight)
		require.Equal(t, repair, rep.Repaired)
		require.True(t, rep.RowsChecked)
		require.Empty(t, rep.CounterDrifts)
		require.EqualValues(t, st.held(), rep.DatabaseRows)
	}
	require.Equal(t, 10, gate.adopted, "every missing row adopted, named or not")
	require.Equal(t, 10, gate.released, "every stale hold released")
	require.Equal(t, 10, gate.forgotten, "every orphan given back")
	require.Equal(t, 1, audited.audits, "the repairing pass is audited")

	rep, err := svc.Reconcile(ctx, "CAP", false, 30*time.Second)
	require.NoError(t, err)
	require.True(t, rep.Consistent())
	require.Equal(t, FindingCounts{}, rep.Found)
	require.False(t, rep.Truncated)
	require.Zero(t, rep.Drift)
}

// offStore is a chunkStore whose used_count, budget counter or stamp is
// off.
type offStore struct {
	*chunkStore
	usesOff, budgetOff int64
	stamp              string
}

func (s *offStore) ReconcileCounts(context.Context, string) (StoreCounts, error) {
	var budget int64
	for _, r := range s.rows {
		if r.Status.Held() {
			budget += r.DiscountAmount
		}
	}
	return StoreCounts{TotalLimit: s.total, Held: s.held() + int32(s.usesOff), BudgetAmount: 10_000,
		BudgetHeld: budget + s.budgetOff}, nil
}

func (s *offStore) Holds(context.Context, string) (HoldSummary, error) {
	return HoldSummary{TotalLimit: s.total, UsedCount: s.held() + int32(s.usesOff)}, nil
}

func (s *offStore) StampCounters(context.Context, string) (string, error) { return s.stamp, nil }

// The store's counters are compared with the held rows its walk read,
// summed page by page, when nothing changed them during the walk: a
// counter off is reported; a walk under which the counter rows changed, or
// a row was confirmed, checks nothing.
func TestReconcileChecksCountersAgainstRows(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	build := func(confirmedAt time.Time) (*chunkGate, *chunkStore) {
		gate := &chunkGate{scan: 3}
		st := &chunkStore{total: 100}
		for i := range 20 {
			id := fmt.Sprintf("o-%02d", i)
			at := now.Add(-time.Hour).Add(time.Duration(i) * time.Second)
			r := Redemption{OrderID: id, VoucherCode: "CNT", CustomerID: "1", DiscountAmount: 100, Status: StatusReserved,
				CreatedAt: at, UpdatedAt: at, ExpiresAt: at.Add(2 * time.Hour)}
			h := Hold{OrderID: id, CustomerID: "1", DiscountAmount: 100, ReservedAt: at, ExpiresAt: at.Add(2 * time.Hour)}
			if i%4 == 0 {
				r.Status, r.UpdatedAt, h.Confirmed = StatusConfirmed, confirmedAt, true
			}
			st.rows = append(st.rows, r)
			gate.orders = append(gate.orders, h)
		}
		gate.remaining = int64(st.total) - int64(len(gate.orders))
		return gate, st
	}
	for _, tc := range []struct {
		name               string
		usesOff, budgetOff int64
		stamp              string
		confirmedAt        time.Time
		checked            bool
		want               []CounterDrift
	}{
		{name: "agree", stamp: "m", confirmedAt: now.Add(-time.Hour), checked: true},
		{name: "uses off", usesOff: 1, stamp: "m", confirmedAt: now.Add(-time.Hour), checked: true,
			want: []CounterDrift{{Kind: "uses", Counter: 21, Rows: 20}}},
		{name: "budget off", budgetOff: -100, stamp: "m", confirmedAt: now.Add(-time.Hour), checked: true,
			want: []CounterDrift{{Kind: "budget", Counter: 1900, Rows: 2000}}},
		{name: "changed under the walk", usesOff: 1, stamp: "other", confirmedAt: now.Add(-time.Hour)},
		{name: "locked when stamped", usesOff: 1, stamp: "", confirmedAt: now.Add(-time.Hour)},
		{name: "confirmed under the walk", usesOff: 1, stamp: "m", confirmedAt: now.Add(-time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gate, st := build(tc.confirmedAt)
			store := &offStore{chunkStore: st, usesOff: tc.usesOff, budgetOff: tc.budgetOff, stamp: tc.stamp}
			svc, err := NewService(ServiceConfig{Store: store, Gate: gate, ReconcileChunk: 4,
				Clock: func() time.Time { return now }})
			require.NoError(t, err)
			rep, err := svc.Reconcile(context.Background(), "CNT", false, 30*time.Second)
			require.NoError(t, err)
			require.EqualValues(t, 20, rep.DatabaseRows)
			require.Equal(t, tc.checked, rep.RowsChecked)
			require.Equal(t, tc.want, rep.CounterDrifts)
		})
	}
}

func TestCounterDriftString(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	require.Equal(t, "uses: counter 21, rows 20", CounterDrift{Kind: "uses", Counter: 21, Rows: 20}.String())
	require.Equal(t, "[window 2026-12-05T09:00:00Z: counter 1, rows 2]",
		fmt.Sprint([]CounterDrift{{Kind: "window", Start: &start, Counter: 1, Rows: 2}}))
}
