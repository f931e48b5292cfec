package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The binary users run links no test harness: not internal/testenv (the
// throwaway servers of the tests; `voucherd dev` and `voucherd bench` start
// theirs with internal/localstack), not package testing, not testify.
func TestBinaryLinksNoTestHarness(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the go tool lists the binary's packages")
	cmd := exec.Command(gobin, "list", "-deps", ".")
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, stderr)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/voucherd/voucherd/cmd/voucherd")
	for _, p := range deps {
		require.NotEqual(t, "github.com/voucherd/voucherd/internal/testenv", p)
		require.NotEqual(t, "testing", p)
		require.False(t, strings.HasPrefix(p, "github.com/stretchr/testify"), p)
	}
}
