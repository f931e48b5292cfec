package metrics

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// localGate answers every reservation with a fixed decision.
type localGate struct {
	voucher.Gate
	d voucher.GateDecision
}

func (g localGate) Reserve(context.Context, string, int32, voucher.Hold) (voucher.GateDecision, error) {
	return g.d, nil
}

// TestLocalGateDecisionsAreNotRedisCalls: only decisions that called Redis
// are observed as Redis latencies.
func TestLocalGateDecisionsAreNotRedisCalls(t *testing.T) {
	t.Parallel()
	m := New(Counts{})
	ctx := context.Background()
	local := m.InstrumentGate(localGate{d: voucher.GateDecision{Outcome: voucher.GateSoldOut, Local: true}})
	_, err := local.Reserve(ctx, "C", 1, voucher.Hold{})
	require.NoError(t, err)
	require.Zero(t, testutil.CollectAndCount(m.DependencyTime))
	remote := m.InstrumentGate(localGate{d: voucher.GateDecision{Outcome: voucher.GateSoldOut}})
	_, err = remote.Reserve(ctx, "C", 1, voucher.Hold{})
	require.NoError(t, err)
	require.Equal(t, 1, testutil.CollectAndCount(m.DependencyTime))
}
