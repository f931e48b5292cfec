package faults

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a voucherd child process (serve or consume) that the nemesis may
// kill, pause and start again with the same arguments and address.
type proc struct {
	name    string
	bin     string
	args    []string
	env     []string
	logPath string
	addr    string // listen address of serve; "" for consume

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
}

// start starts the process; it does nothing when it is running.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !closed(p.done) {
		return nil
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close() //nolint:errcheck // the child writes through its own descriptor; ours is only released
	fmt.Fprintf(logFile, "==== faults: start %s %v at %s\n", p.name, p.args, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.paused = cmd, done, false
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	return nil
}

func (p *proc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// running reports whether the process is alive (possibly paused).
func (p *proc) running() bool {
	cmd, done := p.current()
	return cmd != nil && !closed(done)
}

// kill sends SIGKILL, as a crash would, and waits for the exit.
func (p *proc) kill() {
	cmd, done := p.current()
	if cmd == nil || closed(done) {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
	<-done
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

// pause stops the process (SIGSTOP): its sockets stay open and accept
// connections, nothing answers: a stalled process.
func (p *proc) pause() {
	cmd, done := p.current()
	if cmd == nil || closed(done) {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGSTOP)
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

// resume continues a paused process (SIGCONT).
func (p *proc) resume() {
	cmd, done := p.current()
	if cmd == nil || closed(done) {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

// stop ends the process for good at cleanup: SIGCONT in case it is paused,
// then SIGKILL (nothing of it is checked after the test).
func (p *proc) stop() {
	p.resume()
	p.kill()
}

// startUntilHealthy starts the process and, for serve, waits until
// /healthz answers; a process that exits (its database is down, say) is
// started again until timeout, unless it exits the same way ten times in a
// row before the dependencies could have been its problem (a bad
// configuration).
func (p *proc) startUntilHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for tries := 1; time.Now().Before(deadline); tries++ {
		if tries > 10 && strings.Contains(tail(p.logPath), "address already in use") {
			break
		}
		if err := p.start(); err != nil {
			return err
		}
		last = p.waitHealthy(time.Until(deadline))
		if last == nil {
			return nil
		}
		if p.running() {
			// Alive but not answering within the deadline.
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not healthy after %s: %v\n%s", p.name, timeout, last, tail(p.logPath))
}

func (p *proc) waitHealthy(timeout time.Duration) error {
	_, done := p.current()
	if p.addr == "" {
		// consume has no HTTP port: alive for a moment is all we can see.
		select {
		case <-done:
			return fmt.Errorf("%s exited", p.name)
		case <-time.After(min(timeout, 500*time.Millisecond)):
			return nil
		}
	}
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: time.Second}
	for {
		resp, err := hc.Get("http://" + p.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/healthz answered %d", resp.StatusCode)
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited: %v", p.name, err)
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func closed(c chan struct{}) bool {
	if c == nil {
		return true
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// tail returns the last lines of a log file, indented, for failure messages.
func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "    (no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 12 {
		lines = lines[len(lines)-12:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// waitCtx sleeps for d or until ctx ends; it reports whether d passed.
func waitCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
