package localproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one server process: started in its own process group (see
// SysProcAttr) with its output appended to LogPath, so that it can be
// stopped, killed with every child (as a crashed host would lose them) and
// started again with the same arguments. Set the exported fields before the
// first Start and leave them alone afterwards; the methods are safe for
// concurrent use.
type Process struct {
	// Name is what messages call the server, e.g. "postgres".
	Name string
	// Path is the binary to run.
	Path string
	// Args are the arguments after the binary.
	Args []string
	// Env is the environment; nil inherits this process's.
	Env []string
	// LogPath receives the server's stdout and stderr, appended.
	LogPath string
	// Cred runs the server as another user; nil runs it as this one.
	Cred *syscall.Credential

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current cmd has exited
	err  error         // cmd.Wait's result, valid once done is closed
}

// Start starts the process; it fails when it is already running. It does
// not wait for the server to be ready (see WaitReady).
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.done) {
		return fmt.Errorf("%s is already running (pid %d)", p.Name, p.cmd.Process.Pid)
	}
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s log: %w", p.Name, err)
	}
	// The child gets its own copy of the descriptor, so ours can be closed
	// right after Start and nothing has to copy the output.
	defer logFile.Close() //nolint:errcheck // the child writes through its own descriptor; ours is only released
	fmt.Fprintf(logFile, "==== start %s %q at %s\n", p.Path, p.Args, time.Now().Format(time.RFC3339Nano))

	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = p.Env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = SysProcAttr(p.Cred)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s (%s): %w", p.Name, p.Path, err)
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

// Exited returns a channel closed when the current process has exited, and
// a closed channel when it was never started.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return p.done
}

// Running reports whether the process was started and has not exited.
func (p *Process) Running() bool { return !isClosed(p.Exited()) }

// PID returns the process id of the running process, 0 when it is not
// running.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil || isClosed(p.done) {
		return 0
	}
	return p.cmd.Process.Pid
}

// ExitErr describes how the last process ended.
func (p *Process) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		return errors.New("exited with status 0")
	}
	return p.err
}

// Stop sends sig to the process and waits up to grace for it to exit; then
// it kills the whole process group (Kill). It returns false when the
// process had to be killed, true when it exited or was not running.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || isClosed(done) {
		return true
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		// The servers wait for their children before they exit, so there
		// is no group left to kill (and its id may already be reused).
		return true
	case <-time.After(grace):
	}
	p.Kill()
	return false
}

// Kill sends SIGKILL to the process group and to the leader's children, as
// a crash would, and waits for the leader to be reaped.
func (p *Process) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || isClosed(done) {
		return
	}
	// The leader is not reaped yet, so its pid still names our group and
	// its children are still its children.
	kids := Children(cmd.Process.Pid)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	for _, kid := range kids {
		_ = syscall.Kill(kid, syscall.SIGKILL)
	}
	_ = cmd.Process.Kill()
	<-done
}

// WaitReady polls ready, each call bounded by 2 s, until it succeeds, the
// process exits, timeout passes or ctx ends. It does not stop the process
// when it fails; the caller decides.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration, ready func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	exited := p.Exited()
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last := ready(actx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before it was ready: %v", p.Name, p.ExitErr())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %v", p.Name, timeout, last)
		}
		select {
		case <-exited:
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last error: %v)", p.Name, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// LogTail returns the last lines of a server's log file, indented for a
// failure message, or a note saying why it could not be read.
func LogTail(path string) string {
	const maxBytes = 4096
	const maxLines = 40
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("    (no log: %v)", err)
	}
	if len(data) > maxBytes {
		data = data[len(data)-maxBytes:]
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "    (log is empty)"
	}
	return "    " + strings.Join(lines, "\n    ")
}

// FreePort returns a loopback TCP port that was free a moment ago. Another
// process can take it before the server binds it; callers that choose
// ports this way retry with a new one when that happens.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	return port, nil
}
