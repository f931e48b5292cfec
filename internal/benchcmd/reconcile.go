package benchcmd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/rueidis"

	"github.com/voucherd/voucherd/internal/bench"
	"github.com/voucherd/voucherd/internal/redisgate"
)

// reconcilePasses reconciles (with repairs, as the background job does)
// every code of a bench run once per interval while the run sends, through
// the admin API of its first instance, and records how long each pass took.
type reconcilePasses struct {
	every  time.Duration
	token  string
	client *http.Client

	mu       sync.Mutex
	passes   int
	failures int
	longest  time.Duration
	lastErr  string
	// log is every pass begun, in order, up to maxPassLog: when it began
	// and how long it took, so that a run's slow requests can be set
	// beside them.
	log []passTime
}

// passTime is one pass of reconcilePasses.
type passTime struct {
	start time.Time
	took  time.Duration
	err   string // "" when the pass answered 200; "canceled" when the run's end cut it
}

// maxPassLog bounds reconcilePasses.log: a run of the longest bench
// (MaxDuration) with passes every few seconds stays far below it.
const maxPassLog = 10_000

// alongside is a bench.Config.Alongside that reconciles at baseURL.
func (p *reconcilePasses) alongside(baseURL string) func(ctx context.Context, codes []string) {
	return func(ctx context.Context, codes []string) {
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, code := range codes {
				p.pass(ctx, baseURL, code)
			}
		}
	}
}

func (p *reconcilePasses) pass(ctx context.Context, baseURL, code string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/vouchers/"+code+"/reconciliation", nil)
	if err != nil {
		return
	}
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	start := time.Now()
	resp, err := p.client.Do(req)
	took := time.Since(start)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	entry := passTime{start: start, took: took}
	defer func() {
		if len(p.log) < maxPassLog {
			p.log = append(p.log, entry)
		}
	}()
	if err != nil {
		entry.err = "canceled"
		if ctx.Err() == nil {
			p.failures++
			p.lastErr = err.Error()
			entry.err = err.Error()
		}
		return
	}
	p.passes++
	p.longest = max(p.longest, took)
}

// PassTime is one reconciliation pass of a BigVoucherRun, against the
// run's start (its report's StartedAt): when the bench asked for it and
// how long it took to answer.
type PassTime struct {
	StartMs float64 `json:"startMs"`
	TookMs  float64 `json:"tookMs"`
	// Error is why the pass did not answer 200 ("canceled": the run's end
	// cut it short).
	Error string `json:"error,omitempty"`
}

// timeline returns the passes against from.
func (p *reconcilePasses) timeline(from time.Time) []PassTime {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PassTime, len(p.log))
	for i, e := range p.log {
		out[i] = PassTime{StartMs: ms(e.start.Sub(from)), TookMs: ms(e.took), Error: e.err}
	}
	return out
}

// passDuring returns the index of the pass whose time holds a request
// sent at startMs and answered latencyMs later, -1 when none does.
func passDuring(passes []PassTime, startMs, latencyMs float64) int {
	for i, p := range passes {
		if startMs < p.StartMs+p.TookMs && startMs+latencyMs > p.StartMs {
			return i
		}
	}
	return -1
}

// write prints what the passes did.
func (p *reconcilePasses) write(w io.Writer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(w, "  %-13s %d passes, every %s, longest %s", "reconcile", p.passes, p.every, p.longest.Round(time.Millisecond))
	if p.failures > 0 {
		fmt.Fprintf(w, ", %d failed (last: %s)", p.failures, p.lastErr)
	}
	fmt.Fprintln(w)
}

// passTimeout bounds one reconciliation pass of the bench: a paced pass
// over a voucher of a million holds works a few seconds and pauses for
// the rest of its share (VOUCHERD_RECONCILE_SHARE), so it may take
// minutes; the run's end cancels it anyway.
const passTimeout = 20 * time.Minute

// slowlogThreshold is the slowlog-log-slower-than of a run that reads
// Redis's longest command: every command of at least this long is logged.
const slowlogThreshold = time.Millisecond

// slowlogWatch reads the longest voucherd command of a run from the
// SLOWLOG of every Redis node of the stack (each node its own client),
// and puts the nodes' SLOWLOG settings back when closed.
type slowlogWatch struct {
	nodes []rueidis.Client
	saved [][]string // per node: the settings before, as CONFIG SET pairs
}

func newSlowlogWatch(addrs []string) (*slowlogWatch, error) {
	w := &slowlogWatch{}
	for _, a := range addrs {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}, ForceSingleClient: true,
			DisableCache: true, ClientName: bench.RedisClientName})
		if err != nil {
			w.close(context.Background())
			return nil, err
		}
		w.nodes = append(w.nodes, c)
	}
	return w, nil
}

// close restores each node's SLOWLOG settings as they were before the
// first reset, empties its SLOWLOG and closes the clients.
func (w *slowlogWatch) close(ctx context.Context) {
	for i, c := range w.nodes {
		if i < len(w.saved) && len(w.saved[i]) > 0 {
			b := c.B().ConfigSet().ParameterValue()
			for j := 0; j+1 < len(w.saved[i]); j += 2 {
				b = b.ParameterValue(w.saved[i][j], w.saved[i][j+1])
			}
			_ = c.Do(ctx, b.Build()).Error()
			_ = c.Do(ctx, c.B().SlowlogReset().Build()).Error()
		}
		c.Close()
	}
}

// reset empties the SLOWLOG and logs every command of slowlogThreshold or
// more from now on (up to 100,000 of them), and has Redis's latency
// monitor record every event of that long (LATENCY RESET). The first
// reset remembers the settings close puts back.
func (w *slowlogWatch) reset(ctx context.Context) error {
	for i, c := range w.nodes {
		if i >= len(w.saved) {
			var kept []string
			for _, name := range []string{"slowlog-log-slower-than", "slowlog-max-len", "latency-monitor-threshold"} {
				m, err := c.Do(ctx, c.B().ConfigGet().Parameter(name).Build()).AsStrMap()
				if err != nil {
					return err
				}
				if v, ok := m[name]; ok {
					kept = append(kept, name, v)
				}
			}
			w.saved = append(w.saved, kept)
		}
		if err := c.Do(ctx, c.B().ConfigSet().ParameterValue().
			ParameterValue("slowlog-log-slower-than", fmt.Sprint(slowlogThreshold.Microseconds())).
			ParameterValue("slowlog-max-len", "100000").
			ParameterValue("latency-monitor-threshold", fmt.Sprint(slowlogThreshold.Milliseconds())).Build()).Error(); err != nil {
			return err
		}
		if err := c.Do(ctx, c.B().SlowlogReset().Build()).Error(); err != nil {
			return err
		}
		if err := c.Do(ctx, c.B().LatencyReset().Build()).Error(); err != nil {
			return err
		}
	}
	return nil
}

// slowest returns the longest command logged since reset that is not the
// bench's own (its SLOWLOG, CONFIG and LATENCY calls, its verification's
// reads), its first words, and how many such commands took
// slowlogThreshold or more per name: a gate script by its file, any other
// command by its name. A command of constant work among them (HGET, PTTL,
// one run by a script included) was stretched by something other than its
// work: the process descheduled, a fork's page faults.
func (w *slowlogWatch) slowest(ctx context.Context) (took time.Duration, what string, byName map[string]int, err error) {
	byName = map[string]int{}
	for _, c := range w.nodes {
		entries, err := c.Do(ctx, c.B().SlowlogGet().Count(-1).Build()).ToArray()
		if err != nil {
			return 0, "", nil, err
		}
		for _, e := range entries {
			f, err := e.ToArray()
			if err != nil || len(f) < 4 {
				continue
			}
			us, _ := f[2].AsInt64()
			args, _ := f[3].AsStrSlice()
			if len(args) > 0 && (strings.EqualFold(args[0], "CONFIG") || strings.EqualFold(args[0], "SLOWLOG") ||
				strings.EqualFold(args[0], "LATENCY")) {
				continue
			}
			if len(f) > 5 {
				if name, _ := f[5].ToString(); name == bench.RedisClientName {
					continue
				}
			}
			byName[commandName(args)]++
			if d := time.Duration(us) * time.Microsecond; d > took {
				took, what = d, commandWords(args)
			}
		}
	}
	return took, what, byName, nil
}

// commandName is a SLOWLOG entry's command: a gate script by its file,
// else the command's name.
func commandName(args []string) string {
	if w := commandWords(args); strings.HasSuffix(w, ".lua") {
		return w
	}
	if len(args) == 0 {
		return ""
	}
	return strings.ToUpper(args[0])
}

// latencyEvents returns the longest stall of each kind Redis's latency
// monitor recorded since reset (LATENCY LATEST: "command", "fork",
// "aof-write", "expire-cycle"...), the worst over the nodes.
func (w *slowlogWatch) latencyEvents(ctx context.Context) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, c := range w.nodes {
		events, err := c.Do(ctx, c.B().LatencyLatest().Build()).ToArray()
		if err != nil {
			return nil, err
		}
		for _, e := range events {
			f, err := e.ToArray()
			if err != nil || len(f) < 4 {
				continue
			}
			name, _ := f[0].ToString()
			most, _ := f[3].AsInt64()
			if d := time.Duration(most) * time.Millisecond; d > out[name] {
				out[name] = d
			}
		}
	}
	return out, nil
}

// commandWords is the first words of a SLOWLOG entry's command, a gate
// script named by its file (SLOWLOG keeps the first 32 arguments).
func commandWords(args []string) string {
	if len(args) >= 2 && (strings.EqualFold(args[0], "EVALSHA") || strings.EqualFold(args[0], "EVAL")) {
		if name := redisgate.ScriptName(args[1]); name != "" {
			return args[0] + " " + name + ".lua"
		}
	}
	return strings.Join(args[:min(len(args), 2)], " ")
}

// BigVoucherRun is one run of Options.ReconcileEvery: the report, and what
// Redis and the reconciliation passes did meanwhile.
type BigVoucherRun struct {
	// Mode is the write mode the run targeted.
	Mode string `json:"mode"`
	// Reconciling says whether reconciliation ran during the load.
	Reconciling bool `json:"reconciling"`
	// Report is the run's report.
	Report *bench.Report `json:"report"`
	// RedisLongestMs is the longest voucherd command Redis ran during the
	// run (SLOWLOG), RedisLongestCommand its first words; 0 and "" when
	// none took RedisSlowThresholdMs.
	RedisLongestMs      float64 `json:"redisLongestMs"`
	RedisLongestCommand string  `json:"redisLongestCommand,omitempty"`
	// RedisSlowCommands counts voucherd's commands of RedisSlowThresholdMs
	// or more.
	RedisSlowCommands    int     `json:"redisSlowCommands"`
	RedisSlowThresholdMs float64 `json:"redisSlowThresholdMs"`
	// RedisSlowByCommand counts those commands per name (a gate script by
	// its file): commands of constant work among them (HGET, PTTL...)
	// were stretched by the machine, not by their work.
	RedisSlowByCommand map[string]int `json:"redisSlowByCommand,omitempty"`
	// RedisLatencyMaxMs is the longest stall of each kind Redis's latency
	// monitor recorded during the run (LATENCY LATEST, events of
	// RedisSlowThresholdMs or more): "command", "fork" (an AOF rewrite's
	// fork), "aof-write"...; stalls outside commands are not in SLOWLOG.
	RedisLatencyMaxMs map[string]float64 `json:"redisLatencyMaxMs,omitempty"`
	// Passes, PassFailures and LongestPassMs are the reconciliation passes
	// made during the load (Reconciling only).
	Passes        int     `json:"passes,omitempty"`
	PassFailures  int     `json:"passFailures,omitempty"`
	LongestPassMs float64 `json:"longestPassMs,omitempty"`
	PassEvery     string  `json:"passEvery,omitempty"`
	// PassLog is every pass begun during the load, in order, against the
	// report's StartedAt, the one cut short by the run's end included
	// (Reconciling only). The servers log each pass's phases
	// ("reconciliation pass"), to be set beside it and Report.Slowest.
	PassLog []PassTime `json:"passLog,omitempty"`
}

// BigVoucherResult is the JSON document of Options.ReconcileEvery with
// Options.JSON: every run, each mode without then with reconciliation.
type BigVoucherResult struct {
	Runs []BigVoucherRun `json:"runs"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// bigVoucherServers gives runBigVoucher the servers of one run of mode,
// without or with reconciliation: the target, its Redis, and done, called
// once the run is read.
type bigVoucherServers func(ctx context.Context, mode string, reconcile bool) (t bench.Target, redisAddrs []string, done func(), err error)

// runBigVoucher runs each mode twice on fresh vouchers, without and then
// with reconciliation every passesEvery, each on the servers servers
// gives it, reads the longest Redis command of each run (SLOWLOG), and
// writes the runs: with asJSON one BigVoucherResult on stdout, else each
// report and a side-by-side table. Progress goes to stderr.
func runBigVoucher(ctx context.Context, stdout, stderr io.Writer, asJSON bool, cfg bench.Config, modes []string,
	servers bigVoucherServers, passesEvery time.Duration) ([]*bench.Report, error) {
	var reports []*bench.Report
	var runs []BigVoucherRun
	defer func() {
		if asJSON {
			_ = writeJSON(stdout, BigVoucherResult{Runs: runs})
		} else if len(runs) > 0 {
			writeBigVoucher(stdout, runs)
		}
	}()
	for _, m := range modes {
		for _, reconcile := range []bool{false, true} {
			t, redisAddrs, done, err := servers(ctx, m, reconcile)
			if err != nil {
				return reports, err
			}
			r, err := runBigVoucherOnce(ctx, stdout, stderr, asJSON, cfg, t, redisAddrs, reconcile, passesEvery)
			done()
			if r.Report != nil {
				reports = append(reports, r.Report)
			}
			if err != nil {
				return reports, err
			}
			runs = append(runs, r)
		}
	}
	return reports, nil
}

// runBigVoucherOnce is one run of runBigVoucher against t, whose Redis is
// redisAddrs; without asJSON it writes the run's report to stdout.
func runBigVoucherOnce(ctx context.Context, stdout, stderr io.Writer, asJSON bool, cfg bench.Config, t bench.Target,
	redisAddrs []string, reconcile bool, passesEvery time.Duration) (BigVoucherRun, error) {
	watch, err := newSlowlogWatch(redisAddrs)
	if err != nil {
		return BigVoucherRun{}, err
	}
	defer watch.close(context.WithoutCancel(ctx))
	run := cfg
	run.Name, run.FlashSale, run.CPU = t.Name, t.FlashSale, t.CPU
	run.BaseURL, run.BaseURLs = "", t.BaseURLs
	if t.Verify != nil {
		run.Verify = *t.Verify
	}
	var passes *reconcilePasses
	phase := "without reconciliation"
	if reconcile {
		run.Name += "+reconcile"
		passes = &reconcilePasses{every: passesEvery, token: cfg.AdminToken, client: &http.Client{Timeout: passTimeout}}
		run.Alongside = passes.alongside(t.BaseURLs[0])
		phase = "with reconciliation every " + passesEvery.String()
	}
	fmt.Fprintf(stderr, "voucherd bench: %s, %s\n", t.Name, phase)
	if err := watch.reset(ctx); err != nil {
		return BigVoucherRun{}, err
	}
	rep, err := bench.Run(ctx, run)
	r := BigVoucherRun{Mode: t.Name, Reconciling: reconcile, Report: rep}
	if err != nil {
		return r, err
	}
	took, what, byName, err := watch.slowest(ctx)
	if err != nil {
		return r, err
	}
	stalls, err := watch.latencyEvents(ctx)
	if err != nil {
		return r, err
	}
	slow := 0
	for _, n := range byName {
		slow += n
	}
	r.RedisLongestMs, r.RedisLongestCommand, r.RedisSlowCommands, r.RedisSlowThresholdMs = ms(took), what, slow, ms(slowlogThreshold)
	if len(byName) > 0 {
		r.RedisSlowByCommand = byName
	}
	for kind, d := range stalls {
		if r.RedisLatencyMaxMs == nil {
			r.RedisLatencyMaxMs = map[string]float64{}
		}
		r.RedisLatencyMaxMs[kind] = ms(d)
	}
	if passes != nil {
		passes.mu.Lock()
		r.Passes, r.PassFailures, r.LongestPassMs, r.PassEvery = passes.passes, passes.failures, ms(passes.longest), passes.every.String()
		passes.mu.Unlock()
		r.PassLog = passes.timeline(rep.StartedAt)
	}
	if !asJSON {
		_ = rep.WriteTable(stdout)
		fmt.Fprintf(stdout, "  %-13s longest %s (%s), %d commands of %s or more %v; stalls %v\n", "redis",
			took.Round(10*time.Microsecond), what, slow, slowlogThreshold, byName, stalls)
		if passes != nil {
			passes.write(stdout)
			writePassLog(stdout, r)
		}
		fmt.Fprintln(stdout)
	}
	return r, nil
}

// writeBigVoucher writes the runs side by side: per mode, the reserve p99
// without and with reconciliation, their ratio, and Redis's longest
// voucherd command in each.
func writeBigVoucher(w io.Writer, runs []BigVoucherRun) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\tp99 alone\tp99 reconciling\tratio\tlongest Redis command alone\tlongest reconciling\tpasses")
	for i := 0; i+1 < len(runs); i += 2 {
		alone, with := runs[i], runs[i+1]
		ratio := "-"
		if alone.Report.Latency.P99 > 0 {
			ratio = fmt.Sprintf("%.2f", with.Report.Latency.P99/alone.Report.Latency.P99)
		}
		fmt.Fprintf(tw, "%s\t%.2fms\t%.2fms\t%s\t%s\t%s\t%d\n", alone.Mode, alone.Report.Latency.P99, with.Report.Latency.P99,
			ratio, longestCell(alone), longestCell(with), with.Passes)
	}
	_ = tw.Flush()
}

// longestCell is a run's longest Redis command for the side-by-side table.
func longestCell(r BigVoucherRun) string {
	if r.RedisSlowCommands == 0 {
		return fmt.Sprintf("none of %gms", r.RedisSlowThresholdMs)
	}
	return fmt.Sprintf("%.2fms (%s)", r.RedisLongestMs, r.RedisLongestCommand)
}

// writePassLog writes a run's passes against its start, and for each of
// its slowest requests the pass it overlapped.
func writePassLog(w io.Writer, r BigVoucherRun) {
	for i, p := range r.PassLog {
		fmt.Fprintf(w, "  %-13s +%.3fs, took %.3fs", fmt.Sprintf("pass %d", i+1), p.StartMs/1000, p.TookMs/1000)
		if p.Error != "" {
			fmt.Fprintf(w, " (%s)", p.Error)
		}
		fmt.Fprintln(w)
	}
	if r.Report == nil {
		return
	}
	for _, s := range r.Report.Slowest {
		during := "no pass"
		if i := passDuring(r.PassLog, s.StartMs, s.LatencyMs); i >= 0 {
			during = fmt.Sprintf("pass %d, %.3fs into it", i+1, (s.StartMs-r.PassLog[i].StartMs)/1000)
		}
		fmt.Fprintf(w, "  %-13s %.1fms at +%.3fs (%s): %s\n", "slow", s.LatencyMs, s.StartMs/1000, s.OrderID, during)
	}
}
