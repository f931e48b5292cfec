// Package faults is voucherd's fault-injection suite, in the manner of
// Jepsen and etcd's robustness tests: it runs flash sales against real
// voucherd processes while a nemesis kills, pauses and restarts them and
// their dependencies, records every client operation (reservations,
// replacements of a hold, releases, confirms), and checks the history
// against a model of a voucher or of a campaign of unique codes.
//
// The package's non-test files hold the parts that do not need a running
// system and are unit-tested on their own: the operation history (History),
// the sequential model of a voucher or campaign for porcupine (Model,
// CheckLinearizable) and the checks of a history against the final
// database state (CheckDatabase). The tests start the processes, run the
// workload and the nemesis, and call these.
//
// `go test ./internal/faults` runs the short form, one voucher scenario per
// write mode, a campaign scenario in the modes of campaignModes, a budget
// scenario in budgetModes and a stack scenario (orders of several codes,
// all or none: CheckStacks) in stackModes;
// VOUCHERD_FAULTS=long (make test-faults) runs several seeds per mode with
// every kind of fault. VOUCHERD_FAULTS_SEED replays a run.
package faults
