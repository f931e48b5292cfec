package bench

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	line := []byte("4242 (postgres: a) (b)) S 17 4242 4242 0 -1 4194560 1 0 0 0 120 30 7 3 20 0 1 0 100 1000 10 18446744073709551615\n")
	ppid, times, err := parseStat(line)
	require.NoError(t, err)
	require.Equal(t, 17, ppid)
	require.Equal(t, [4]int64{120, 30, 7, 3}, times)
	_, _, err = parseStat([]byte("4242 (x) S 1 2"))
	require.Error(t, err)
}

// A busy child counts in its parent's component; this process's own time
// is the load generator's, apart from the components. Not parallel: the
// busy loop would take a core from the timing-sensitive tests.
func TestCPUCostCountsProcessTrees(t *testing.T) {
	parent := exec.Command("sh", "-c", "sh -c 'while :; do :; done' & wait")
	// A group of its own, killed whole: killing the parent alone would
	// leave the loop running after the test.
	parent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, parent.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-parent.Process.Pid, syscall.SIGKILL)
		_ = parent.Wait()
	})
	comps := []Component{{Name: "busy", PIDs: []int{parent.Process.Pid}}}
	before := readCPU(comps)
	require.NoError(t, before.failed)
	time.Sleep(300 * time.Millisecond)
	after := readCPU(comps)
	cost, err := cpuCost(comps, before, after, 1000, nil)
	require.NoError(t, err)
	require.Len(t, cost.Components, 1)
	require.Positive(t, cost.Components[0].CPUSeconds, "the grandchild's loop counts")
	require.Equal(t, cost.Components[0].CPUSeconds, cost.Stack.CPUSeconds)
	require.InDelta(t, cost.Components[0].CPUSeconds*1e6/1000, cost.Components[0].MicrosPerRequest, 1e-9)

	missing := readCPU([]Component{{Name: "gone", PIDs: []int{1 << 30}}})
	require.ErrorContains(t, missing.failed, "not found")
}

func TestRunReportsCPU(t *testing.T) {
	t.Parallel()
	_, srv := newFakeServer(t)
	cfg := baseConfig(srv.URL)
	cfg.Target = RouteNoop
	cfg.Requests = 2000
	cfg.CPU = []Component{{Name: "self", PIDs: []int{os.Getpid()}}}
	rep, err := Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Empty(t, rep.CPUError)
	require.NotNil(t, rep.CPU)
	require.Equal(t, int64(2000), rep.CPU.Requests)
	require.Equal(t, "self", rep.CPU.Components[0].Name)

	cfg.CPUIdle = 200 * time.Millisecond
	cfg.Requests, cfg.Duration, cfg.Warmup = 0, 600*time.Millisecond, 300*time.Millisecond
	rep, err = Run(context.Background(), cfg)
	require.NoError(t, err)
	require.NotNil(t, rep.CPU)
	require.Positive(t, rep.WarmupRequests, "the idle watch does not eat the warm-up")
	require.Equal(t, rep.Histogram.TotalCount(), rep.CPU.Requests)
	require.NotZero(t, rep.CPU.Stack.MarginalMicrosPerRequest, "the idle cost was watched")
}

func TestHotShareSendsToTheFirstVoucher(t *testing.T) {
	t.Parallel()
	g := newGenerator(Config{Seed: 3, Customers: 1000, Vouchers: 11, HotShare: 0.5})
	var perVoucher [11]int
	for range 10000 {
		perVoucher[g.next().order.voucher]++
	}
	require.InDelta(t, 5000, perVoucher[0], 300)
	for v := 1; v < 11; v++ {
		require.InDelta(t, 500, perVoucher[v], 150)
	}
}
