package benchcmd

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/bench"
)

// The sink takes over the traces endpoint of the servers' environment and
// refuses a protocol it does not speak.
func TestOTLPSinkTracesTo(t *testing.T) {
	t.Parallel()
	sink := &OTLPSink{URL: "http://127.0.0.1:1"}
	env, err := sink.tracesTo([]string{"PATH=/bin", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://elsewhere", "OTEL_TRACES_EXPORTER=otlp"})
	require.NoError(t, err)
	require.Equal(t, []string{"PATH=/bin", "OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1"}, env)

	_, err = sink.tracesTo([]string{"OTEL_EXPORTER_OTLP_PROTOCOL=grpc"})
	require.ErrorContains(t, err, "not OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
	_, err = sink.tracesTo([]string{"OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"})
	require.NoError(t, err, "the last value wins")
}

// Options that cannot start a stack fail before anything starts.
func TestRunRefusesBadStackOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"mode", Options{Modes: []string{"flash"}, Stack: StackOptions{Executable: "/bin/true"}}, `--mode must be standard, flash-sync or flash-kafka, not "flash"`},
		{"executable", Options{}, "Executable is required"},
		{"redis", Options{Stack: StackOptions{Executable: "/bin/true", Redis: "sentinel"}}, `--redis must be single or cluster, not "sentinel"`},
		{"instances", Options{Stack: StackOptions{Executable: "/bin/true", Instances: -1}}, "--instances must be at least 1"},
	} {
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), tc.o, &stdout, &stderr)
		require.ErrorContains(t, err, tc.want, tc.name)
		require.Empty(t, stdout.String(), tc.name)
	}
}

// A run that was not verified (against --url without --database-url) is
// said to be so and does not fail the bench; a violation does, and a run
// verified clean or of the no-op route passes silently.
func TestCheckInvariants(t *testing.T) {
	t.Parallel()
	verified := func(violations ...string) *bench.Verification {
		return &bench.Verification{Violations: violations}
	}
	for _, tc := range []struct {
		name       string
		report     bench.Report
		wantErr    bool
		wantStderr string
	}{
		{"verified", bench.Report{Name: "flash", Target: bench.RouteReserve, Verification: verified()}, false, ""},
		{"noop", bench.Report{Name: "noop", Target: bench.RouteNoop}, false, ""},
		{"not verified", bench.Report{Name: "flash", Target: bench.RouteReserve}, false,
			"voucherd bench: flash: not verified: " + bench.NotVerifiedReason + "\n"},
		{"violation", bench.Report{Name: "flash", Target: bench.RouteReserve, Verification: verified("oversold")}, true,
			"voucherd bench: flash: invariants broken:\n  - oversold\n"},
	} {
		var stderr bytes.Buffer
		err := checkInvariants(&stderr, []*bench.Report{&tc.report})
		if tc.wantErr {
			require.ErrorIs(t, err, ErrInvariants, tc.name)
		} else {
			require.NoError(t, err, tc.name)
		}
		require.Equal(t, tc.wantStderr, stderr.String(), tc.name)
	}
}
