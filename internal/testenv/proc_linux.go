package testenv

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr puts a server in its own process group, so that Kill takes its
// children too, and has the kernel kill it when the test binary dies.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Credential: cred,
	}
}

// children lists the processes whose parent is pid. PostgreSQL backends call
// setsid, so killing the postmaster's group does not reach them; Kill finds
// them here to crash the server the way a lost host would.
func children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name in parentheses may contain spaces; the fields
		// after its closing parenthesis are "state ppid ...".
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil && ppid == pid {
			kids = append(kids, child)
		}
	}
	return kids
}
