package voucher

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// aliveGate is chunkGate answering liveness: the instances of alive have a
// live heartbeat, unless err is set.
type aliveGate struct {
	*chunkGate
	alive map[string]bool
	err   error
}

func (g *aliveGate) Alive(_ context.Context, ids []string) (map[string]bool, error) {
	if g.err != nil {
		return nil, g.err
	}
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = g.alive[id]
	}
	return out, nil
}

// A hold without a row past the grace period is left to a writer that
// still settles it: this instance's while it remembers the attempt as
// unanswered or its write as of unknown outcome, a live instance's until this instance has seen it so for a
// grace period. Holds without an owner or of an instance without a
// heartbeat are orphans at once, and so is a live instance's when
// liveness cannot be read.
func TestReconcileLeavesOrphansToTheirWriters(t *testing.T) {
	t.Parallel()
	const grace = 3 * time.Second
	start := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	old := start.Add(-time.Hour)
	hold := func(id, owner string) Hold {
		return Hold{OrderID: id, CustomerID: "1", DiscountAmount: 100, ReservedAt: old, ExpiresAt: old.Add(2 * time.Hour),
			Pending: true, Owner: owner}
	}
	for _, tc := range []struct {
		name     string
		liveness error
		// passes are the times of the dry runs after start, and want
		// each one's orphans and holds in flight.
		passes                    []time.Duration
		wantOrphans, wantInFlight [][]string
	}{
		{
			name:   "liveness read",
			passes: []time.Duration{0, grace - time.Millisecond, grace},
			wantOrphans: [][]string{
				{"no-owner", "mine-settled", "peer-gone"},
				{"no-owner", "mine-settled", "peer-gone"},
				{"no-owner", "mine-settled", "peer-gone", "peer-live"},
			},
			wantInFlight: [][]string{
				{"mine-unanswered", "mine-unsettled", "peer-live"},
				{"mine-unanswered", "mine-unsettled", "peer-live"},
				{"mine-unanswered", "mine-unsettled"},
			},
		},
		{
			name:     "liveness not read",
			liveness: errors.New("redis down"),
			passes:   []time.Duration{0},
			wantOrphans: [][]string{
				{"no-owner", "mine-settled", "peer-gone", "peer-live"},
			},
			wantInFlight: [][]string{{"mine-unanswered", "mine-unsettled"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gate := &aliveGate{chunkGate: &chunkGate{scan: 2, remaining: 94, orders: []Hold{
				hold("no-owner", ""), hold("mine-unanswered", "self"), hold("mine-unsettled", "self"), hold("mine-settled", "self"),
				hold("peer-live", "peer"), hold("peer-gone", "gone"),
			}}, alive: map[string]bool{"peer": true}, err: tc.liveness}
			now := start
			svc, err := NewService(ServiceConfig{Store: &chunkStore{total: 100}, Gate: gate, Instance: "self", ReconcileChunk: 2,
				Clock: func() time.Time { return now }})
			require.NoError(t, err)
			require.True(t, svc.unanswered.remember("BIG", hold("mine-unanswered", "self"), start))
			sync, ok := svc.writes.(*syncWrites)
			require.True(t, ok)
			sync.unsettled[orderKey{"BIG", "mine-unsettled"}] = unsettledWrite{hold: hold("mine-unsettled", "self"), since: start}
			for i, at := range tc.passes {
				now = start.Add(at)
				rep, err := svc.Reconcile(context.Background(), "BIG", false, grace)
				require.NoError(t, err)
				require.ElementsMatch(t, tc.wantOrphans[i], rep.Orphans, "pass %d: orphans", i)
				require.ElementsMatch(t, tc.wantInFlight[i], rep.InFlight, "pass %d: in flight", i)
				require.Empty(t, rep.Abandoned, "pass %d", i)
			}
		})
	}
}

// orphanSightings forgets what it no longer needs, and past its bound
// counts a hold it cannot remember as seen long ago.
func TestOrphanSightingsPruneAndBound(t *testing.T) {
	t.Parallel()
	const grace = time.Second
	at := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	o := newOrphanSightings()
	k := sightingKey{"BIG", "o-1", 1}
	require.Zero(t, o.seenFor(k, at, grace))
	require.Equal(t, grace, o.seenFor(k, at.Add(grace), grace))
	// Two grace periods and a minute later, at the next prune, it is
	// forgotten and seen afresh.
	later := at.Add(2*grace + time.Minute + time.Millisecond)
	require.Zero(t, o.seenFor(k, later, grace))

	for i := range maxSightings - 1 {
		o.seen[sightingKey{"BIG", "fill", int64(i)}] = later
	}
	require.Greater(t, o.seenFor(sightingKey{"BIG", "o-2", 1}, later, grace), 24*time.Hour, "past the bound: seen long ago")
	require.Len(t, o.seen, maxSightings)
}
