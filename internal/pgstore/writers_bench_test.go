package pgstore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
)

// BenchmarkReserveHotVoucherWriters compares one and two combined writes in
// flight per voucher (CombinerConfig.Writers), 64 clients on one hot
// voucher, on a server of its own that commits synchronously (fsync off:
// the WAL is written at each commit, not flushed to a disk). Besides
// benchmarkHot's figures it reports takes/flush, ms/flush and the
// server's CPU per reservation (pg-µs/op). docs/storage.md weighs the
// result.
//
//	go test -run '^$' -bench HotVoucherWriters -benchtime 20000x -count 3 ./internal/pgstore/
func BenchmarkReserveHotVoucherWriters(b *testing.B) {
	srv := testenv.NewPostgres(b)
	for _, writers := range []int{1, 2} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			benchmarkHotAt(b, srv.NewDatabase(b).URL, pgstore.CombinerConfig{Writers: writers}, 64)
		})
	}
}

// BenchmarkReserveHotVoucherWritersDurable is BenchmarkReserveHotVoucherWriters
// with durable commits (fsync and full-page writes on, synchronous_commit
// on): each flush then waits for its WAL to reach the disk, the latency a
// second writer per voucher could overlap.
//
//	go test -run '^$' -bench HotVoucherWritersDurable -benchtime 20000x -count 3 ./internal/pgstore/
func BenchmarkReserveHotVoucherWritersDurable(b *testing.B) {
	srv := testenv.NewPostgresFsync(b)
	for _, writers := range []int{1, 2} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			benchmarkHotAt(b, srv.NewDatabase(b).URL, pgstore.CombinerConfig{Writers: writers}, 64)
		})
	}
}

// BenchmarkReserveHotVoucherRegroup compares the combiner with and without
// regrouping (CombinerConfig.Regroup), one writer, 64 clients on one hot
// voucher, durable commits; takes/flush shows the batches, pg-µs/op what
// they cost.
//
//	go test -run '^$' -bench HotVoucherRegroup -benchtime 20000x -count 3 ./internal/pgstore/
func BenchmarkReserveHotVoucherRegroup(b *testing.B) {
	srv := testenv.NewPostgresFsync(b)
	for _, regroup := range []time.Duration{-1, 0} {
		b.Run(fmt.Sprintf("regroup=%v", regroup >= 0), func(b *testing.B) {
			benchmarkHotAt(b, srv.NewDatabase(b).URL, pgstore.CombinerConfig{Regroup: regroup}, 64)
		})
	}
}

// serverCPU returns a reader of the CPU time used so far by the PostgreSQL
// server s talks to (the postmaster, its exited children and its live
// ones, from /proc), or of 0 when the server is not a process of this
// machine that /proc shows.
func serverCPU(b *testing.B, s *pgstore.Store) func() time.Duration {
	var backend int
	if err := s.Pool().QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		b.Fatal(err)
	}
	stat := func(pid int) []string {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil
		}
		// Fields after the command name, which is in parentheses.
		return strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	}
	f := stat(backend)
	if f == nil {
		return func() time.Duration { return 0 }
	}
	postmaster, _ := strconv.Atoi(f[1])
	ticks := func(f []string, fields ...int) int64 {
		var t int64
		for _, i := range fields {
			if i < len(f) {
				v, _ := strconv.ParseInt(f[i], 10, 64)
				t += v
			}
		}
		return t
	}
	const tick = 10 * time.Millisecond // USER_HZ on Linux
	return func() time.Duration {
		// utime, stime, cutime, cstime are fields 14-17 of stat, 11-14 here.
		t := ticks(stat(postmaster), 11, 12, 13, 14)
		children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", postmaster, postmaster))
		for _, c := range strings.Fields(string(children)) {
			pid, _ := strconv.Atoi(c)
			t += ticks(stat(pid), 11, 12)
		}
		return time.Duration(t) * tick
	}
}
