package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/bench"
	"github.com/voucherd/voucherd/internal/benchcmd"
)

// The scale scenario in small: 10 flash vouchers and a hot one beside them,
// traffic spread over 3 voucherd processes, a Redis Cluster of 3 masters, a
// Kafka topic of 6 partitions read by 2 consumers, in sync and in Kafka
// mode. Every voucher sells out exactly, PostgreSQL and Redis agree, and the
// CPU time of each component is reported.
func TestBenchScaleScenarioSmall(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := runBench(ctx, []string{"--scenario=scale", "--vouchers=11", "--total=40", "--requests=3000",
		"--customers=1500", "--concurrency=16", "--max-duration=90s", "--kafka-warmup=0", "--json", "--quiet"}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())

	var reports []bench.Report
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &reports), stdout.String())
	require.Len(t, reports, 2)
	for i, mode := range []string{"flash-sync", "flash-kafka"} {
		rep := reports[i]
		require.Equal(t, mode, rep.Name)
		require.Len(t, rep.BaseURLs, 3, "spread over 3 instances")
		require.Equal(t, int64(3000), rep.Requests)
		require.NotNil(t, rep.Verification, mode)
		require.Empty(t, rep.Verification.Violations, mode)
		require.Len(t, rep.Verification.Vouchers, 11)
		for _, v := range rep.Verification.Vouchers {
			require.Equal(t, int64(40), v.HeldRows, "%s %s sold out exactly", mode, v.Code)
			require.Equal(t, v.HeldRows, v.UsedCount, "%s %s", mode, v.Code)
			require.Equal(t, v.Granted, v.HeldRows, "%s %s", mode, v.Code)
			require.NotNil(t, v.RedisRemaining, "%s %s", mode, v.Code)
			require.Zero(t, *v.RedisRemaining, "%s %s: Redis agrees", mode, v.Code)
		}
		require.Empty(t, rep.CPUError, mode)
		require.NotNil(t, rep.CPU, mode)
		var names []string
		for _, c := range rep.CPU.Components {
			names = append(names, c.Name)
		}
		want := []string{"voucherd", "redis", "postgresql"}
		if mode == "flash-kafka" {
			want = append(want, "kafka")
		}
		require.Equal(t, want, names)
		require.Positive(t, rep.CPU.Components[0].MicrosPerRequest, "the voucherd processes worked")
		require.Positive(t, rep.CPU.Stack.MicrosPerRequest)
	}
}

// With --json stdout is the report alone, so that it pipes into jq, even
// on a flash-kafka run with its warm-up: the warm-up's line, the progress
// and the stage table go to stderr.
func TestBenchJSONStdoutIsTheReportAlone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"bench", "--mode=flash-kafka", "--kafka-warmup=1s", "--total=20", "--requests=300",
		"--customers=200", "--concurrency=4", "--max-duration=60s", "--json"}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())

	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	var rep bench.Report
	require.NoError(t, dec.Decode(&rep), "stdout:\n%s", stdout.String())
	require.False(t, dec.More(), "one JSON document; stdout:\n%s", stdout.String())
	require.Equal(t, "flash-kafka", rep.Name)
	require.True(t, rep.OK(), "%v", rep.Violations())
	require.Contains(t, stderr.String(), "warm-up   flash-kafka on a throwaway voucher")
	require.Contains(t, stderr.String(), "stages of flash-kafka")
}

// The big-voucher scenario in small, with --json: stdout is one JSON
// document (the two runs of flash-sync, without and with reconciliation
// during the load, each on a stack of its own, each with Redis's longest
// voucherd command), the phases and progress go to stderr, and both runs
// keep the invariants.
func TestBenchBigVoucherJSON(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	logs := t.TempDir()
	err := runBench(ctx, []string{"--scenario=big-voucher", "--total=1500", "--customers=3000", "--requests=1500",
		"--concurrency=8", "--reconcile-every=100ms", "--max-duration=90s", "--json", "--keep-logs=" + logs}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())

	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	var res benchcmd.BigVoucherResult
	require.NoError(t, dec.Decode(&res), "stdout:\n%s", stdout.String())
	require.False(t, dec.More(), "one JSON document; stdout:\n%s", stdout.String())
	require.Len(t, res.Runs, 2)
	for i, r := range res.Runs {
		require.Equal(t, "flash-sync", r.Mode)
		require.Equal(t, i == 1, r.Reconciling)
		require.NotNil(t, r.Report)
		require.True(t, r.Report.OK(), "%v", r.Report.Violations())
		require.EqualValues(t, 1500, r.Report.Reserved, "the voucher sells out")
		require.Positive(t, r.Report.Latency.P99)
		require.Positive(t, r.RedisSlowThresholdMs)
		require.False(t, r.Report.StartedAt.IsZero())
		require.Len(t, r.Report.Slowest, bench.SlowestKept, "the run's slowest requests")
		for j, slow := range r.Report.Slowest {
			require.Equal(t, http.StatusCreated, slow.Status)
			require.NotEmpty(t, slow.OrderID)
			require.LessOrEqual(t, slow.LatencyMs, r.Report.Latency.Max)
			if j > 0 {
				require.LessOrEqual(t, slow.LatencyMs, r.Report.Slowest[j-1].LatencyMs, "slowest first")
			}
		}
	}
	require.Positive(t, res.Runs[1].Passes, "reconciliation ran during the load")
	require.Zero(t, res.Runs[1].PassFailures)
	require.GreaterOrEqual(t, len(res.Runs[1].PassLog), res.Runs[1].Passes, "every pass in the log")
	require.Empty(t, res.Runs[0].PassLog)
	// Each run had a stack of its own, whose logs were kept apart; the
	// servers logged each pass's phases.
	require.Equal(t, 2, strings.Count(stderr.String(), "voucherd bench: starting PostgreSQL"), stderr.String())
	require.FileExists(t, filepath.Join(logs, "flash-sync", "voucherd-sync-0.log"))
	server, err := os.ReadFile(filepath.Join(logs, "flash-sync+reconcile", "voucherd-sync-0.log"))
	require.NoError(t, err)
	require.Contains(t, string(server), `msg="reconciliation pass"`)
	require.Contains(t, string(server), "storeWalk.took=")
	require.Contains(t, stderr.String(), "voucherd bench: flash-sync, without reconciliation")
	require.Contains(t, stderr.String(), "voucherd bench: flash-sync, with reconciliation every 100ms")
}

// A budget-limited flash sale: the budget ends it before the uses run out,
// and the verification (whose stored-counter check includes the money
// invariant) passes.
func TestBenchBudget(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"bench", "--mode=flash-sync", "--total=100", "--budget=30000", "--requests=300",
		"--customers=200", "--concurrency=4", "--max-duration=60s", "--json"}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	var rep bench.Report
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), "stdout:\n%s", stdout.String())
	require.True(t, rep.OK(), "%v", rep.Violations())
	require.Contains(t, stdout.String(), "BUDGET_EXCEEDED")
}
