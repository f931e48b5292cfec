package faults

import "syscall"

// sysProcAttr puts a child in its own process group and has the kernel kill
// it when the test binary dies, so that an interrupted run leaves nothing
// behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
