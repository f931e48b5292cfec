package redisgate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPipelineMultiplex(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{0: 0, 1: -1, 2: 1, 3: 1, 4: 2, 7: 2, 8: 3, 256: 8} {
		require.Equal(t, want, pipelineMultiplex(n), "Pipelines %d", n)
	}
}

func TestNewRefusesBadClientTuning(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{Addrs: []string{"127.0.0.1:1"}, FlushDelay: -time.Microsecond},
		{Addrs: []string{"127.0.0.1:1"}, Pipelines: -1},
		{Addrs: []string{"127.0.0.1:1"}, Pipelines: maxPipelines + 1},
	} {
		_, err := New(cfg)
		require.Error(t, err, "%+v", cfg)
	}
}

// TestClientTuning checks that a gate with one connection and a flush
// delay serves its calls (the options reach a working client).
func TestClientTuning(t *testing.T) {
	t.Parallel()
	g := newGate(t, Config{Pipelines: 1, FlushDelay: 20 * time.Microsecond})
	v := testVoucher("TUNED", 10, 1)
	loadEmpty(t, g, v)
	d, err := g.Reserve(t.Context(), v.Code, 1, testHold("o-1", 1))
	require.NoError(t, err)
	require.EqualValues(t, 9, d.Remaining)
}
