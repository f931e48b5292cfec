// Package localproc holds what voucherd needs to run PostgreSQL, Redis and
// Kafka from locally installed binaries as child processes: finding the
// binaries, choosing an unprivileged user when running as root, process
// attributes that tie a server's life to its parent, and Process, a server
// that can be stopped, killed and started again. internal/localstack (the
// servers of `voucherd dev` and `voucherd bench`) and the test harness
// (internal/testenv) build on it.
package localproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// InstallHint tells a developer how to install the servers.
const InstallHint = "install them with `make deps` (Debian: apt-get install postgresql redis-server redis-tools; macOS: brew install postgresql@16 redis)"

// FindPostgres locates initdb and postgres: the newest version installed by
// Debian's or Homebrew's packages, else the ones on PATH.
func FindPostgres() (initdb, postgres string, err error) {
	type candidate struct {
		dir     string
		version int
	}
	var dirs []candidate
	for _, pattern := range []string{
		"/usr/lib/postgresql/*/bin",
		"/opt/homebrew/opt/postgresql@*/bin",
		"/usr/local/opt/postgresql@*/bin",
	} {
		matches, _ := filepath.Glob(pattern)
		for _, dir := range matches {
			name := filepath.Base(filepath.Dir(dir))
			name = name[strings.LastIndex(name, "@")+1:]
			major, _ := strconv.Atoi(strings.SplitN(name, ".", 2)[0])
			dirs = append(dirs, candidate{dir, major})
		}
	}
	sort.SliceStable(dirs, func(i, j int) bool { return dirs[i].version > dirs[j].version })
	for _, c := range dirs {
		i, p := filepath.Join(c.dir, "initdb"), filepath.Join(c.dir, "postgres")
		if IsExecutable(i) && IsExecutable(p) {
			return i, p, nil
		}
	}
	i, errI := exec.LookPath("initdb")
	p, errP := exec.LookPath("postgres")
	if errI == nil && errP == nil {
		return i, p, nil
	}
	return "", "", fmt.Errorf("PostgreSQL binaries initdb and postgres not found on PATH or in /usr/lib/postgresql/*/bin; %s", InstallHint)
}

// IsExecutable reports whether path is a regular file with an execute bit.
func IsExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// ServerCredential returns the unprivileged user to run PostgreSQL as when
// the process runs as root (postgres refuses to run as root): the "postgres"
// user that Debian's package creates, else "nobody". It returns nil when
// not root.
func ServerCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as (postgres refuses to run as root)")
}
