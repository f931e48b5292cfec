// Package testenv starts throwaway PostgreSQL, Redis and Kafka processes for
// tests, so that every package tests against the real services instead of
// mocks.
//
// Shared servers (Postgres, Redis, Kafka) start once per test binary, on the
// first call, and are stopped by Main after the tests have run. Each test gets
// its own slice of a shared server (a fresh database, a throwaway topic; Redis
// tests use their own key prefix). Private servers (NewPostgres, NewRedis,
// NewRedisCluster, NewKafka) belong to one test, can be stopped, killed and
// started again for fault tests, and are removed at the test's cleanup.
//
// Redis servers and Clusters are started by internal/localstack, as
// `voucherd dev` and `voucherd bench` start theirs; PostgreSQL and Kafka
// get settings of their own for tests (no fsync, a quick-starting JVM).
//
// A missing binary or a server that does not start fails the test with a
// message naming the binary and the install command: tests never skip
// because a service is missing.
//
// Every process runs in its own process group with its output in a log file
// beside its data; on Linux it is also killed when the test binary dies
// (Pdeathsig), so a crashed or interrupted test run leaves no servers behind.
// Use Main in TestMain so that the shared servers stop cleanly:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// The environment variables VOUCHERD_TEST_DATABASE_URL,
// VOUCHERD_TEST_REDIS_ADDR and VOUCHERD_TEST_KAFKA_BROKERS point the shared
// servers at existing ones instead of starting processes.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/voucherd/voucherd/internal/localproc"
)

// installHint is appended to every "binary not found" or "did not start"
// message, so that a developer knows the one command that fixes it.
const installHint = localproc.InstallHint

var (
	cleanupMu sync.Mutex
	cleanups  []func()
)

// registerCleanup records fn to run when Main returns from m.Run, after all
// tests of the binary have finished. Shared servers (PostgreSQL, Redis, and
// Kafka in kafka.go) register their stop function here when they start. The
// functions run in reverse order of registration, each once; fn must not
// call testing functions, since no test is running any more.
func registerCleanup(fn func()) {
	cleanupMu.Lock()
	defer cleanupMu.Unlock()
	cleanups = append(cleanups, fn)
}

// runCleanups runs and forgets the registered cleanup functions, newest first.
func runCleanups() {
	cleanupMu.Lock()
	fns := cleanups
	cleanups = nil
	cleanupMu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// Main runs the tests of m, stops every shared server this package started,
// and exits with the tests' exit code. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	runCleanups()
	os.Exit(code)
}

// randomSuffix returns n random bytes as lower-case hex, for names that must
// not collide between parallel tests and test binaries.
func randomSuffix(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("testenv: crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}

// ownerFile names the file in each temp dir that holds the pid of the test
// binary that made it.
const ownerFile = "testenv.owner"

var sweepOnce sync.Once

// tempDir makes a temp dir named prefix+random for a server's files and
// records the test binary's pid in it. Main removes the dirs of the shared
// servers and t.Cleanup those of private ones; a binary that dies before
// (a panic, a -timeout) leaves its dirs behind, and the next test binary's
// first tempDir call removes those whose owner is gone.
func tempDir(prefix string) (string, error) {
	sweepOnce.Do(sweepStaleDirs)
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", fmt.Errorf("testenv: create temp dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("testenv: create temp dir: %w", err)
	}
	return dir, nil
}

// sweepStaleDirs removes temp dirs made by tempDir whose test binary no
// longer runs. Their servers are gone too: Pdeathsig killed them with it.
func sweepStaleDirs() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), "voucherd-*"))
	for _, dir := range matches {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or still being made
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			_ = os.RemoveAll(dir)
		}
	}
}
