package pgstore

import (
	"context"
	"time"
)

// maxStatementRuns bounds how often one write statement is run when the
// server keeps rolling it back for a reason of its own (see rolledBack).
const maxStatementRuns = 3

// rerunPause is the pause before the n-th rerun is n times this: enough for
// the transaction the statement collided with to finish.
const rerunPause = 2 * time.Millisecond

// rerunRolledBack runs write, one statement in its own implicit transaction,
// and runs it again, up to maxStatementRuns times in all, while the server
// rolled it back for a reason of its own. Such a rollback changed nothing, so
// running the statement again is what the caller would do after a 503 -
// without the 503. Any other outcome, including a connection lost mid-way
// (the commit may have happened), is returned as it is; so is the last
// rollback, or the one after ctx ended.
func (s *Store) rerunRolledBack(ctx context.Context, write func() error) error {
	for run := 1; ; run++ {
		err := write()
		if err == nil || run == maxStatementRuns || !rolledBack(err) {
			return err
		}
		s.reruns.Add(1)
		timer := time.NewTimer(time.Duration(run) * rerunPause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
	}
}

// StatementReruns returns how many write statements were run again after the
// server rolled them back for a reason of its own (a deadlock, a
// serialization failure, PostgreSQL's multixact check).
func (s *Store) StatementReruns() uint64 { return s.reruns.Load() }
