package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/voucherd/voucherd/internal/localproc"
)

// process is one server process: started in its own process group with its
// output appended to logPath, so that it can be stopped, killed (with every
// child, as a crashed host would lose them) and started again with the same
// arguments.
type process struct {
	name    string   // what failure messages call it, e.g. "postgres"
	path    string   // resolved binary
	args    []string // arguments after the binary
	env     []string // nil: inherit the test binary's environment
	logPath string
	cred    *syscall.Credential // nil: run as the current user

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current cmd has exited
	err  error         // cmd.Wait's result, valid once done is closed
}

// start starts the process; it fails when it is already running.
func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.done) {
		return fmt.Errorf("testenv: %s is already running (pid %d)", p.name, p.cmd.Process.Pid)
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testenv: open %s log: %w", p.name, err)
	}
	// The child gets its own copy of the descriptor, so ours can be closed
	// right after Start and nothing has to copy the output.
	defer logFile.Close() //nolint:errcheck // the child writes through its own descriptor; ours is only released
	fmt.Fprintf(logFile, "==== testenv: start %s %q at %s\n", p.path, p.args, time.Now().Format(time.RFC3339Nano))

	cmd := exec.Command(p.path, p.args...)
	cmd.Env = p.env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = localproc.SysProcAttr(p.cred)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testenv: start %s (%s): %w", p.name, p.path, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// exited returns a channel closed when the current process has exited, and
// a closed channel when it was never started.
func (p *process) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return p.done
}

// exitErr describes how the last process ended.
func (p *process) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		return errors.New("exited with status 0")
	}
	return p.err
}

// stop sends sig to the process and waits up to grace for it to exit; then
// it kills the whole process group. It returns false when the process had
// to be killed.
func (p *process) stop(sig syscall.Signal, grace time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || isClosed(done) {
		return true
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		// Both servers wait for their children before they exit, so there is
		// no group left to kill (and its id may already be reused).
		return true
	case <-time.After(grace):
	}
	p.kill()
	return false
}

// kill sends SIGKILL to the process group, as a crash would, and waits for
// the leader to be reaped.
func (p *process) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || isClosed(done) {
		return
	}
	// The leader is not reaped yet, so its pid still names our group and
	// its children are still its children.
	kids := localproc.Children(cmd.Process.Pid)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	for _, kid := range kids {
		_ = syscall.Kill(kid, syscall.SIGKILL)
	}
	_ = cmd.Process.Kill()
	<-done
}

// waitReady polls ready until it succeeds, the process exits or timeout
// passes.
func (p *process) waitReady(timeout time.Duration, ready func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	exited := p.exited()
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last = ready(ctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before it was ready: %v", p.name, p.exitErr())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %v", p.name, timeout, last)
		}
		select {
		case <-exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// failure formats an error about the process with the tail of its log.
func (p *process) failure(err error) string {
	return fmt.Sprintf("%v\n%s log %s (last lines):\n%s\n%s", err, p.name, p.logPath, logTail(p.logPath), installHint)
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
