package localproc

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Process stops on its signal, is killed when it ignores it, and starts
// again with the same arguments, its output appended to one log.
func TestProcessStopKillStart(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	log := filepath.Join(t.TempDir(), "p.log")
	p := &Process{Name: "sleeper", Path: sh, Args: []string{"-c", "echo up; trap '' TERM; sleep 60 & wait"}, LogPath: log}
	require.False(t, p.Running())
	require.Zero(t, p.PID())

	require.NoError(t, p.Start())
	require.True(t, p.Running())
	require.Positive(t, p.PID())
	require.Error(t, p.Start(), "already running")
	require.False(t, p.Stop(syscall.SIGTERM, 200*time.Millisecond), "it ignores SIGTERM, so it is killed")
	require.False(t, p.Running())

	p.Args = []string{"-c", "echo again; sleep 60"}
	require.NoError(t, p.Start())
	require.True(t, p.Stop(syscall.SIGTERM, 10*time.Second))
	require.Contains(t, LogTail(log), "up")
	require.Contains(t, LogTail(log), "again")
	require.Equal(t, 2, strings.Count(LogTail(log), "==== start"))
}

// WaitReady ends when ready succeeds, when the process exits and when the
// timeout passes.
func TestProcessWaitReady(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	ctx := context.Background()
	p := &Process{Name: "sleeper", Path: sh, Args: []string{"-c", "sleep 60"}, LogPath: filepath.Join(t.TempDir(), "p.log")}
	require.NoError(t, p.Start())
	defer p.Kill()
	calls := 0
	require.NoError(t, p.WaitReady(ctx, time.Minute, func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}))
	err = p.WaitReady(ctx, 100*time.Millisecond, func(context.Context) error { return errors.New("never") })
	require.ErrorContains(t, err, "not ready after 100ms: never")

	q := &Process{Name: "quitter", Path: sh, Args: []string{"-c", "exit 3"}, LogPath: filepath.Join(t.TempDir(), "q.log")}
	require.NoError(t, q.Start())
	err = q.WaitReady(ctx, time.Minute, func(context.Context) error { return errors.New("never") })
	require.ErrorContains(t, err, "quitter exited before it was ready: exit status 3")
}
