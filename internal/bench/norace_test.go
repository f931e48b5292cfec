//go:build !race

package bench

// raceEnabled is set under the race detector, which allocates on its own.
const raceEnabled = false
