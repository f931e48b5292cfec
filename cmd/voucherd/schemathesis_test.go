package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// SchemathesisVersion is the Schemathesis release scripts/deps.sh installs
// and TestSchemathesis expects.
const SchemathesisVersion = "4.32.5"

// schemathesisBin returns the schemathesis executable: $VOUCHERD_SCHEMATHESIS,
// or the one scripts/deps.sh installs in the user's cache folder.
func schemathesisBin(t *testing.T) string {
	if p := os.Getenv("VOUCHERD_SCHEMATHESIS"); p != "" {
		return p
	}
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	p := filepath.Join(cache, "voucherd", "schemathesis-"+SchemathesisVersion, "bin", "schemathesis")
	_, err = os.Stat(p)
	require.NoError(t, err, "Schemathesis %s is not installed; run `make deps` (scripts/deps.sh)", SchemathesisVersion)
	return p
}

// TestSchemathesis runs Schemathesis, with every check, against the OpenAPI
// description a running voucherd serves (flash-sync mode, with PostgreSQL and
// Redis; the code-guessing limits off): every response must match the
// description, every request the description calls invalid must be refused
// and every valid one accepted.
// The run is bounded in examples per operation and in time.
func TestSchemathesis(t *testing.T) {
	t.Parallel()
	bin := schemathesisBin(t)
	// The code-guessing limits are off: they answer a schema-valid
	// reservation or validation 429 by what its customer, client address or
	// key looked up before, and a fuzzer that repeats customerIds (Hypothesis
	// sends "0" again and again) trips them within seconds, leaving the
	// reservation routes behind 429s for the rest of the run. Their answers
	// have tests of their own (guessing_test.go).
	s := newStack(t, stackOptions{flash: true, tweak: func(c *Config) {
		c.UnknownCodeLimit = -1
		c.Access.UnknownCodeLimitPerClient = -1
		c.Access.UnknownCodeLimitPerKey = -1
	}})
	// A voucher the generated requests may find, besides the random codes.
	s.createVoucher(voucherSpec{TotalLimit: 1000})

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	conf, err := filepath.Abs(filepath.Join("..", "..", "scripts", "schemathesis"))
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, bin, "--config-file", filepath.Join(conf, "schemathesis.toml"), "run", s.base+"/openapi.yaml",
		"--url", s.base,
		"--checks", "all",
		"--header", "Authorization: Bearer "+testAdminToken,
		"--max-examples", "30",
		"--seed", "1",
		// One worker: Python 3.11 before 3.11.8 can fail ast.parse when
		// threads call it at once (Hypothesis does, describing filters).
		"--workers", "1",
		"--max-time", "150",
		"--request-timeout", "10",
		"--generation-database", "none",
		"--no-color",
		"--report-dir", dir,
	)
	// The hooks of scripts/schemathesis; Schemathesis keeps its crash cache
	// in the working folder, a temporary one.
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SCHEMATHESIS_HOOKS=hooks", "PYTHONPATH="+conf)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("schemathesis: %v\n%s", err, shortLines(out))
	}
	t.Logf("schemathesis:\n%s", shortLines(out))
}

// shortLines returns the report with each line cut at 2,000 bytes:
// generated bodies can be long.
func shortLines(out []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(string(out), "\n") {
		if len(line) > 2000 {
			line = line[:2000] + "..."
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}
