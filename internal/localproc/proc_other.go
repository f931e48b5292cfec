//go:build unix && !linux

package localproc

import "syscall"

// SysProcAttr puts a server in its own process group, so that killing the group takes its
// children too. Outside Linux there is no parent-death signal: a parent
// that dies without cleaning up leaves its servers running.
func SysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Setpgid:    true,
		Credential: cred,
	}
}

// Children is not implemented outside Linux: a kill then takes only the
// server's process group, and Start waits for orphans to go away.
func Children(pid int) []int { return nil }
