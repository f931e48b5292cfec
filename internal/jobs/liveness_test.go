package jobs

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type fakeLiver struct {
	beats, settles, recovers atomic.Int64
	settleErr                error
	// recoverFor is how long each RecoverDead takes.
	recoverFor time.Duration
}

func (f *fakeLiver) Heartbeat(context.Context) error { f.beats.Add(1); return nil }

func (f *fakeLiver) SettleUnknown(context.Context) (int, error) {
	f.settles.Add(1)
	return 0, f.settleErr
}

func (f *fakeLiver) RecoverDead(ctx context.Context, _, _ time.Duration) ([]string, error) {
	f.recovers.Add(1)
	select {
	case <-time.After(f.recoverFor):
	case <-ctx.Done():
	}
	return nil, nil
}

// Start beats before it returns, so an instance is alive in the gate before
// it serves; a round settles first and recovers after, unless settling
// failed (the store is down: recovery would fail too).
func TestLiveness(t *testing.T) {
	t.Parallel()
	f := &fakeLiver{}
	l := NewLiveness(f, LivenessConfig{Beat: 10 * time.Millisecond, Interval: time.Hour})
	l.Start(context.Background())
	require.EqualValues(t, 1, f.beats.Load(), "the first beat is synchronous")
	require.Eventually(t, func() bool { return f.beats.Load() >= 3 }, 5*time.Second, time.Millisecond)
	l.Stop()
	l.Stop()

	require.NoError(t, l.runOnce(context.Background()))
	require.EqualValues(t, 1, f.settles.Load())
	require.EqualValues(t, 1, f.recovers.Load())
	f.settleErr = errors.New("store down")
	require.Error(t, l.runOnce(context.Background()))
	require.EqualValues(t, 1, f.recovers.Load())
}

// Settling runs on its own cadence: a recovery that takes long (a
// reconciliation of every flash voucher) does not hold it up.
func TestLivenessSettlesWhileRecoveryIsSlow(t *testing.T) {
	t.Parallel()
	f := &fakeLiver{recoverFor: time.Hour}
	l := NewLiveness(f, LivenessConfig{Beat: time.Hour, Interval: 10 * time.Millisecond, Settle: 10 * time.Millisecond})
	l.Start(context.Background())
	defer l.Stop()
	require.Eventually(t, func() bool { return f.recovers.Load() == 1 && f.settles.Load() >= 5 }, 5*time.Second, time.Millisecond)
}
