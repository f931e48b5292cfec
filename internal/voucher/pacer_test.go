package voucher

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A pacer pauses between chunks for the work before times (1 - share) /
// share, never before the first chunk; share 0 never pauses.
func TestPacerKeepsItsShare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPacer(0.25, nil)
	start := time.Now()
	require.NoError(t, p.wait(ctx))
	require.Less(t, time.Since(start), 20*time.Millisecond, "no pause before the first chunk")
	time.Sleep(10 * time.Millisecond)
	p.worked(gateWalk, 1)
	start = time.Now()
	require.NoError(t, p.wait(ctx))
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "three times the work at a quarter")

	free := newPacer(0, nil)
	require.NoError(t, free.wait(ctx))
	time.Sleep(5 * time.Millisecond)
	free.worked(gateWalk, 1)
	start = time.Now()
	require.NoError(t, free.wait(ctx))
	require.Less(t, time.Since(start), 20*time.Millisecond)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, p.wait(ctx))
	time.Sleep(5 * time.Millisecond)
	p.worked(gateWalk, 1)
	require.ErrorIs(t, p.wait(cancelled), context.Canceled)
}

// A chunk slower per item than the fastest of its kind lately pauses that
// many times longer, up to maxSlowdown; kinds are measured apart, and a
// fastest time is forgotten after one to two windows.
func TestPacerBacksOffWhileChunksRunSlow(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	p := newPacer(0.1, &chunkSpeeds{})
	for _, tc := range []struct {
		name  string
		kind  walkKind
		items int
		took  time.Duration
		at    time.Duration
		want  time.Duration
	}{
		{"first chunk: its own fastest", gateWalk, 500, 5 * time.Millisecond, 0, 45 * time.Millisecond},
		{"as fast", gateWalk, 500, 5 * time.Millisecond, time.Second, 45 * time.Millisecond},
		{"three times slower", gateWalk, 500, 15 * time.Millisecond, 2 * time.Second, 405 * time.Millisecond},
		{"fewer items, as fast per item", gateWalk, 100, time.Millisecond, 3 * time.Second, 9 * time.Millisecond},
		{"the other kind has its own fastest", storeWalk, 500, 20 * time.Millisecond, 4 * time.Second, 180 * time.Millisecond},
		{"at most maxSlowdown", gateWalk, 500, 100 * time.Millisecond, 5 * time.Second, 900 * time.Millisecond * maxSlowdown},
		{"remembered in the next window", gateWalk, 500, 10 * time.Millisecond, speedWindow + time.Second, 180 * time.Millisecond},
		{"forgotten two windows on", gateWalk, 500, 10 * time.Millisecond, 3*speedWindow + time.Second, 90 * time.Millisecond},
		{"no items", storeWalk, 0, 0, 3*speedWindow + 2*time.Second, 0},
	} {
		got := p.pause(tc.kind, tc.items, tc.took, at.Add(tc.at))
		require.InDelta(t, tc.want, got, float64(time.Microsecond), tc.name)
	}

	unmeasured := newPacer(0.1, nil)
	require.Equal(t, 45*time.Millisecond, unmeasured.pause(gateWalk, 500, 5*time.Millisecond, at))
}
