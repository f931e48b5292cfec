package voucher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// chunkGate keeps a voucher's orders and hands them out in chunks of
// scan; it records the largest batch any call was given.
type chunkGate struct {
	Gate
	scan      int
	remaining int64
	orders    []Hold
	largest   int
}

func (g *chunkGate) Counts(context.Context, string) (GateCounts, error) {
	var held int64
	for _, h := range g.orders {
		if !h.Released {
			held++
		}
	}
	return GateCounts{Loaded: true, Remaining: g.remaining, HeldCount: held, HeldCounted: true, Version: 7}, nil
}

func (g *chunkGate) ScanOrders(_ context.Context, _ string, cursor uint64) ([]Hold, uint64, error) {
	end := min(int(cursor)+g.scan, len(g.orders))
	next := uint64(end)
	if end == len(g.orders) {
		next = 0
	}
	g.largest = max(g.largest, end-int(cursor))
	return slices.Clone(g.orders[cursor:end]), next, nil
}

func (g *chunkGate) Known(_ context.Context, _ string, ids []string) ([]GateOrderState, error) {
	g.largest = max(g.largest, len(ids))
	out := make([]GateOrderState, len(ids))
	for i, id := range ids {
		if j := slices.IndexFunc(g.orders, func(h Hold) bool { return h.OrderID == id }); j >= 0 {
			out[i] = GateOrderHolding
			if g.orders[j].Released {
				out[i] = GateOrderReleased
			}
		}
	}
	return out, nil
}

func (g *chunkGate) LimitCounts(context.Context, string) (GateLimitCounts, error) {
	return GateLimitCounts{}, nil
}

// chunkStore keeps a voucher's rows and answers reconciliation's reads;
// it records the largest batch any read was asked for or answered.
type chunkStore struct {
	Store
	total   int32
	rows    []Redemption
	largest int
}

func (s *chunkStore) held() int32 {
	var n int32
	for _, r := range s.rows {
		if r.Status.Held() {
			n++
		}
	}
	return n
}

func (s *chunkStore) ReconcileCounts(context.Context, string) (StoreCounts, error) {
	return StoreCounts{TotalLimit: s.total, Held: s.held()}, nil
}

func (s *chunkStore) Holds(context.Context, string) (HoldSummary, error) {
	return HoldSummary{TotalLimit: s.total, UsedCount: s.held()}, nil
}

func (s *chunkStore) RedemptionsAmong(_ context.Context, _ string, ids []string) ([]Redemption, error) {
	s.largest = max(s.largest, len(ids))
	var out []Redemption
	for _, r := range s.rows {
		if slices.Contains(ids, r.OrderID) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *chunkStore) HeldPage(_ context.Context, _ string, st Status, after PageKey, limit int) ([]Redemption, error) {
	rows := slices.Clone(s.rows)
	sort.Slice(rows, func(i, j int) bool {
		if !rows[i].CreatedAt.Equal(rows[j].CreatedAt) {
			return rows[i].CreatedAt.Before(rows[j].CreatedAt)
		}
		return rows[i].OrderID < rows[j].OrderID
	})
	var out []Redemption
	for _, r := range rows {
		k := PageKey{CreatedAt: r.CreatedAt, OrderID: r.OrderID}
		if r.Status != st || k.CreatedAt.Before(after.CreatedAt) || (k.CreatedAt.Equal(after.CreatedAt) && k.OrderID <= after.OrderID) {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, r)
	}
	s.largest = max(s.largest, len(out))
	return out, nil
}

// Reconciliation compares a voucher chunk by chunk, pausing between
// chunks: no call to either store carries more than a chunk of orders,
// whatever the voucher's size, and the findings are those of comparing the
// whole state at once.
func TestReconcileComparesInChunks(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	gate := &chunkGate{scan: 3}
	st := &chunkStore{total: 100}
	want := map[string][]string{}
	for i := range 40 {
		id := fmt.Sprintf("o-%02d", i)
		at := now.Add(-time.Hour).Add(time.Duration(i/4) * time.Second) // rows share instants
		h := Hold{OrderID: id, CustomerID: "1", DiscountAmount: 100, ReservedAt: at, ExpiresAt: at.Add(time.Hour)}
		r := Redemption{OrderID: id, VoucherCode: "BIG", CustomerID: "1", DiscountAmount: 100, Status: StatusReserved,
			CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
		switch i % 8 {
		case 1: // the gate has it, the store does not, long ago: an orphan
			gate.orders = append(gate.orders, h)
			want["orphans"] = append(want["orphans"], id)
			continue
		case 2: // a RELEASED row the gate still holds
			r.Status = StatusReleased
			want["stale"] = append(want["stale"], id)
		case 3: // a held row the gate lost
			st.rows = append(st.rows, r)
			want["missing"] = append(want["missing"], id)
			continue
		case 4: // released in both
			r.Status, h.Released = StatusReleased, true
		case 5: // a confirmed row and hold
			r.Status, h.Confirmed = StatusConfirmed, true
		case 6: // just taken: no row yet
			h.ReservedAt = now.Add(-time.Second)
			gate.orders = append(gate.orders, h)
			want["inFlight"] = append(want["inFlight"], id)
			continue
		}
		gate.orders = append(gate.orders, h)
		st.rows = append(st.rows, r)
	}
	gate.remaining = int64(st.total) - int64(len(gate.orders))
	var logged bytes.Buffer
	svc, err := NewService(ServiceConfig{Store: st, Gate: gate, ReconcileChunk: 4, ReconcileShare: 0.5,
		Clock: func() time.Time { return now }, Logger: slog.New(slog.NewJSONHandler(&logged, nil))})
	require.NoError(t, err)
	rep, err := svc.Reconcile(context.Background(), "BIG", false, 30*time.Second)
	require.NoError(t, err)
	// The pass logs one line at info level with its phases, each with
	// when it began and how long it took.
	var line struct {
		Msg       string
		Code      string
		GateWalk  map[string]any
		StoreWalk map[string]any
	}
	require.NoError(t, json.Unmarshal(logged.Bytes(), &line), logged.String())
	require.Equal(t, "reconciliation pass", line.Msg)
	require.Equal(t, "BIG", line.Code)
	require.Contains(t, line.GateWalk, "took")
	require.Contains(t, line.StoreWalk, "at")
	require.Equal(t, want["orphans"], rep.Orphans)
	require.Equal(t, want["stale"], rep.Stale)
	require.Equal(t, want["missing"], rep.Missing)
	require.Equal(t, want["inFlight"], rep.InFlight)
	require.Empty(t, rep.Uncommitted)
	require.Empty(t, rep.Unconfirmed)
	require.Empty(t, rep.Abandoned)
	require.LessOrEqual(t, gate.largest, 4, "a gate call carries at most a chunk")
	require.LessOrEqual(t, st.largest, 4, "a store read carries at most a chunk")
	require.False(t, rep.Repaired)
}

// A pacer pauses between chunks for the work before times (1 - share) /
// share, never before the first chunk; share 0 never pauses.
func TestPacerKeepsItsShare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPacer(0.25)
	start := time.Now()
	require.NoError(t, p.wait(ctx))
	require.Less(t, time.Since(start), 20*time.Millisecond, "no pause before the first chunk")
	time.Sleep(10 * time.Millisecond)
	p.worked()
	start = time.Now()
	require.NoError(t, p.wait(ctx))
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "three times the work at a quarter")

	free := newPacer(0)
	require.NoError(t, free.wait(ctx))
	time.Sleep(5 * time.Millisecond)
	free.worked()
	start = time.Now()
	require.NoError(t, free.wait(ctx))
	require.Less(t, time.Since(start), 20*time.Millisecond)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, p.wait(ctx))
	time.Sleep(5 * time.Millisecond)
	p.worked()
	require.ErrorIs(t, p.wait(cancelled), context.Canceled)
}
