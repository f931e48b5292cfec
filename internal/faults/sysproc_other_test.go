//go:build !linux

package faults

import "syscall"

// sysProcAttr puts a child in its own process group; without Pdeathsig
// (Linux only) the cleanup of each test is what kills it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
