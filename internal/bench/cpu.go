package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Component is a part of the stack whose CPU time a run reports: the
// processes PIDs and all their descendants (PostgreSQL's backends are
// children of its postmaster).
type Component struct {
	// Name labels the component ("voucherd", "redis", "postgresql", "kafka").
	Name string
	PIDs []int
}

// CPUCost is the CPU time the components used while the measured requests
// ran (after Config.Warmup), read from /proc before and after.
type CPUCost struct {
	// Seconds is the wall time between the two readings; Requests the
	// requests completed in it (the latency histogram's count).
	Seconds  float64 `json:"seconds"`
	Requests int64   `json:"requests"`
	// Components are in the order of Config.CPU.
	Components []ComponentCost `json:"components"`
	// Stack sums the components: the server side's cost of a request.
	Stack ComponentCost `json:"stack"`
	// LoadGenerator is this process's own CPU time (the bench's workers),
	// kept apart from the stack it loads.
	LoadGenerator ComponentCost `json:"loadGenerator"`
}

// ComponentCost is one component's CPU time over the measured window.
type ComponentCost struct {
	Name string `json:"name"`
	// CPUSeconds is user plus system time.
	CPUSeconds float64 `json:"cpuSeconds"`
	// MicrosPerRequest is CPUSeconds per completed request, in µs.
	MicrosPerRequest float64 `json:"cpuMicrosPerRequest"`
	// Cores is CPUSeconds over the window's wall time: the cores it kept busy.
	Cores float64 `json:"cores"`
	// IdleCores is what it kept busy without traffic (Config.CPUIdle), and
	// MarginalMicrosPerRequest the CPU time per request beyond that idle
	// cost; both are 0 when the idle cost was not watched.
	IdleCores                float64 `json:"idleCores,omitempty"`
	MarginalMicrosPerRequest float64 `json:"cpuMicrosPerRequestOverIdle,omitempty"`
}

// idleCPU is the CPU time the components used while watched without
// traffic.
type idleCPU struct {
	seconds float64
	ticks   []int64 // per component, then the sum
	err     error
}

// watchIdle reads the components' CPU time over d with no traffic.
func watchIdle(ctx context.Context, components []Component, d time.Duration) *idleCPU {
	before := readCPU(components)
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	after := readCPU(components)
	idle := &idleCPU{seconds: after.at.Sub(before.at).Seconds(), err: errors.Join(before.failed, after.failed)}
	var sum int64
	for i := range components {
		t := after.ticks[i] - before.ticks[i]
		idle.ticks = append(idle.ticks, t)
		sum += t
	}
	idle.ticks = append(idle.ticks, sum)
	return idle
}

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat; it is
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procTimes is what one look at /proc found.
type procTimes struct {
	at     time.Time
	ticks  []int64 // per component
	self   int64   // this process alone, without its children
	failed error
}

// readCPU reads the CPU time of every component: for each process of a
// component's trees, its user and system time plus that of its children it
// has already waited for (a PostgreSQL backend that ended during the run
// counts in its postmaster). Processes that ended before the first reading
// do not count.
func readCPU(components []Component) procTimes {
	pt := procTimes{at: time.Now(), ticks: make([]int64, len(components))}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		pt.failed = fmt.Errorf("bench: CPU accounting needs /proc: %w", err)
		return pt
	}
	type stat struct {
		ppid  int
		ticks int64 // utime+stime+cutime+cstime
		own   int64 // utime+stime
	}
	stats := map[int]stat{}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		ppid, times, err := parseStat(b)
		if err != nil {
			continue
		}
		stats[pid] = stat{ppid: ppid, ticks: times[0] + times[1] + times[2] + times[3], own: times[0] + times[1]}
		children[ppid] = append(children[ppid], pid)
	}
	pt.self = stats[os.Getpid()].own
	for i, c := range components {
		seen := map[int]bool{}
		var walk func(pid int)
		walk = func(pid int) {
			if seen[pid] {
				return
			}
			seen[pid] = true
			pt.ticks[i] += stats[pid].ticks
			for _, ch := range children[pid] {
				walk(ch)
			}
		}
		for _, pid := range c.PIDs {
			if _, ok := stats[pid]; !ok {
				pt.failed = fmt.Errorf("bench: CPU accounting: process %d of %s not found", pid, c.Name)
			}
			walk(pid)
		}
	}
	return pt
}

// parseStat returns the parent pid and utime, stime, cutime and cstime of a
// /proc/<pid>/stat line. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from its last ')'.
func parseStat(b []byte) (int, [4]int64, error) {
	var times [4]int64
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, times, errors.New("no command field")
	}
	fields := bytes.Fields(b[i+1:])
	// fields[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
	if len(fields) < 15 {
		return 0, times, errors.New("short stat line")
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	if err != nil {
		return 0, times, err
	}
	for k := range times {
		if times[k], err = strconv.ParseInt(string(fields[11+k]), 10, 64); err != nil {
			return 0, times, err
		}
	}
	return ppid, times, nil
}

// cpuCost turns two readings into the cost of the requests between them.
func cpuCost(components []Component, before, after procTimes, requests int64, idle *idleCPU) (*CPUCost, error) {
	if before.failed != nil {
		return nil, before.failed
	}
	if after.failed != nil {
		return nil, after.failed
	}
	wall := after.at.Sub(before.at).Seconds()
	cost := &CPUCost{Seconds: wall, Requests: requests, Stack: ComponentCost{Name: "stack"}}
	mk := func(name string, ticks int64, i int) ComponentCost {
		c := ComponentCost{Name: name, CPUSeconds: float64(ticks) / clockTicks}
		if requests > 0 {
			c.MicrosPerRequest = c.CPUSeconds * 1e6 / float64(requests)
		}
		if wall > 0 {
			c.Cores = c.CPUSeconds / wall
		}
		if idle != nil && idle.err == nil && idle.seconds > 0 && i >= 0 {
			c.IdleCores = float64(idle.ticks[i]) / clockTicks / idle.seconds
			if requests > 0 {
				c.MarginalMicrosPerRequest = (c.CPUSeconds - c.IdleCores*wall) * 1e6 / float64(requests)
			}
		}
		return c
	}
	var total int64
	for i, c := range components {
		d := after.ticks[i] - before.ticks[i]
		total += d
		cost.Components = append(cost.Components, mk(c.Name, d, i))
	}
	cost.Stack = mk("stack", total, len(components))
	cost.LoadGenerator = mk("load generator", after.self-before.self, -1)
	return cost, nil
}
