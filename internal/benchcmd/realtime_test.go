package benchcmd

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// realtime puts a process at SCHED_FIFO 10 where this process may (root,
// as in CI), and otherwise says what it needs.
func TestRealtime(t *testing.T) {
	t.Parallel()
	sleep := exec.Command("sleep", "30")
	require.NoError(t, sleep.Start())
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })

	err := realtime(context.Background(), []int{sleep.Process.Pid})
	if os.Geteuid() != 0 {
		require.ErrorContains(t, err, "needs root")
		return
	}
	require.NoError(t, err)
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(sleep.Process.Pid) + "/stat")
	require.NoError(t, err)
	// After the command's name in parentheses: field 40 is rt_priority,
	// field 41 the policy (1 is SCHED_FIFO).
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	require.Equal(t, "10", fields[40-3], "rt_priority")
	require.Equal(t, "1", fields[41-3], "policy")
}
