//go:build unix && !linux

package testenv

import "syscall"

// sysProcAttr puts a server in its own process group, so that Kill takes its
// children too. Outside Linux there is no parent-death signal: a test binary
// that dies without reaching Main's cleanup leaves its servers running.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Setpgid:    true,
		Credential: cred,
	}
}

// children is not implemented outside Linux: Kill then takes only the
// server's process group, and Start waits for orphans to go away.
func children(pid int) []int { return nil }
