package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestMain runs the tests and removes the voucherd binary built for them.
// The suite uses only private servers (testenv.NewPostgres, NewRedis,
// NewKafka), removed at each test's cleanup, so testenv.Main's shutdown of
// the shared servers is not needed here.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// voucherdBinary builds cmd/voucherd once per test binary and returns its
// path: the suite runs the real binary as child processes, so that a kill
// -9 is a real crash.
func voucherdBinary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		root, err := repoRoot()
		if err != nil {
			built.err = err
			return
		}
		built.dir, built.err = os.MkdirTemp("", "voucherd-faults-bin-")
		if built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "voucherd")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", built.path, "./cmd/voucherd")
		cmd.Dir = root
		began := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./cmd/voucherd in %s: %v\n%s", root, err, out)
			return
		}
		t.Logf("built %s in %s", built.path, time.Since(began).Round(time.Millisecond))
	})
	if built.err != nil {
		t.Fatalf("faults: %v", built.err)
	}
	return built.path
}

// repoRoot walks up from the working directory to the directory of go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
