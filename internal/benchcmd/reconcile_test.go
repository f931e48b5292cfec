package benchcmd

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A request overlaps the first pass whose time it shares any of.
func TestPassDuring(t *testing.T) {
	t.Parallel()
	passes := []PassTime{{StartMs: 1000, TookMs: 500}, {StartMs: 2000, TookMs: 3000}}
	for _, tc := range []struct {
		start, latency float64
		want           int
	}{
		{0, 10, -1},
		{900, 200, 0},   // answered inside the first pass
		{1499, 1, 0},    // sent at its end
		{1500, 100, -1}, // after it, before the second
		{1800, 300, 1},  // sent before the second, answered inside it
		{4000, 5000, 1},
		{5000, 1, -1},
	} {
		require.Equal(t, tc.want, passDuring(passes, tc.start, tc.latency), "%+v", tc)
	}
}
