package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Each worker group keeps its n slowest requests offered, whatever their
// order (a tie keeps the first), and the report lists the slowest of all
// groups, slowest first, against the run's start.
func TestSlowestKeepsTheSlowest(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	r := &runner{cfg: Config{Target: RouteReserve}, prefix: "run", start: start}
	a, b := &workerStats{slow: slowest{n: 2}}, &workerStats{slow: slowest{n: 2}}
	for i, lat := range []int64{5, 900, 7, 4_000, 3, 900} {
		ws := a
		if i%2 == 1 {
			ws = b
		}
		var code []byte
		if lat == 4_000 {
			code = []byte(ErrOutcomeUnknown)
		}
		ws.slow.offer(slowEntry{start: start.Add(time.Duration(i) * time.Millisecond), latency: lat, status: 201,
			job: job{order: order{seq: int64(i)}}}, code)
	}
	got := r.slowestOf([]*workerStats{a, b}, 3)
	require.Equal(t, []SlowRequest{
		{StartMs: 3, LatencyMs: 4, Status: 201, Error: ErrOutcomeUnknown, OrderID: "run-3", Kind: "new"},
		{StartMs: 1, LatencyMs: 0.9, Status: 201, OrderID: "run-1", Kind: "new"},
		{StartMs: 2, LatencyMs: 0.007, Status: 201, OrderID: "run-2", Kind: "new"},
	}, got)
}
