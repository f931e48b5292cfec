package benchcmd

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/metrics"
)

// stages sums the dependency histograms of several servers' /metrics.
func TestBenchStagesScrapeInstances(t *testing.T) {
	t.Parallel()
	var urls []string
	for _, secs := range []float64{0.002, 0.004} {
		m := metrics.New(metrics.Counts{})
		m.DependencyTime.WithLabelValues("kafka", "produce").Observe(secs)
		srv := httptest.NewServer(m.Handler())
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	got := stages(context.Background(), urls)
	h, ok := got["kafka\tproduce"]
	require.True(t, ok, "%v", got)
	require.Equal(t, uint64(2), h.count)
	require.InDelta(t, 0.006, h.sum, 1e-9)
	require.Equal(t, uint64(2), h.cum[len(h.cum)-1])
}

// Each started voucherd gets its share of the CPUs unless told otherwise.
func TestInstanceProcs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ flag, cpus, processes, want int }{
		{0, 2, 1, 2},
		{0, 2, 3, 1},
		{0, 8, 3, 2},
		{0, 16, 4, 4},
		{0, 1, 0, 1},
		{3, 2, 3, 3},
		{-1, 2, 3, 0},
	} {
		require.Equal(t, tc.want, instanceProcs(tc.flag, tc.cpus, tc.processes), "%+v", tc)
	}
}
