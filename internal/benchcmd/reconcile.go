package benchcmd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/voucherd/voucherd/internal/bench"
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
}

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
	if err != nil {
		if ctx.Err() == nil {
			p.failures++
			p.lastErr = err.Error()
		}
		return
	}
	p.passes++
	p.longest = max(p.longest, took)
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

// slowlogWatch reads the longest command of a run from the SLOWLOG of
// every Redis node of the stack (each node its own client).
type slowlogWatch struct {
	nodes []rueidis.Client
}

func newSlowlogWatch(addrs []string) (*slowlogWatch, error) {
	w := &slowlogWatch{}
	for _, a := range addrs {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			w.close()
			return nil, err
		}
		w.nodes = append(w.nodes, c)
	}
	return w, nil
}

func (w *slowlogWatch) close() {
	for _, c := range w.nodes {
		c.Close()
	}
}

// reset empties the SLOWLOG and logs every command of 1ms or more from now
// on (up to 100,000 of them).
func (w *slowlogWatch) reset(ctx context.Context) error {
	for _, c := range w.nodes {
		if err := c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", "1000").
			ParameterValue("slowlog-max-len", "100000").Build()).Error(); err != nil {
			return err
		}
		if err := c.Do(ctx, c.B().SlowlogReset().Build()).Error(); err != nil {
			return err
		}
	}
	return nil
}

// longest returns the longest command logged since reset, its first words
// and how many commands took 1ms or more.
func (w *slowlogWatch) longest(ctx context.Context) (took time.Duration, what string, slow int, err error) {
	for _, c := range w.nodes {
		entries, err := c.Do(ctx, c.B().SlowlogGet().Count(-1).Build()).ToArray()
		if err != nil {
			return 0, "", 0, err
		}
		for _, e := range entries {
			f, err := e.ToArray()
			if err != nil || len(f) < 4 {
				continue
			}
			us, _ := f[2].AsInt64()
			args, _ := f[3].AsStrSlice()
			if len(args) > 0 && (args[0] == "CONFIG" || args[0] == "SLOWLOG") {
				continue
			}
			slow++
			if d := time.Duration(us) * time.Microsecond; d > took {
				took, what = d, strings.Join(args[:min(len(args), 2)], " ")
			}
		}
	}
	return took, what, slow, nil
}

// runBigVoucher runs each target twice on fresh vouchers, without and
// then with reconciliation every passes.every, and prints after each report
// the longest Redis command of the run (SLOWLOG) and the passes made.
func runBigVoucher(ctx context.Context, stdout io.Writer, cfg bench.Config, targets []bench.Target,
	redisAddrs []string, passesEvery time.Duration) ([]*bench.Report, error) {
	watch, err := newSlowlogWatch(redisAddrs)
	if err != nil {
		return nil, err
	}
	defer watch.close()
	var reports []*bench.Report
	for _, t := range targets {
		for _, reconcile := range []bool{false, true} {
			run := cfg
			run.Name, run.FlashSale, run.CPU = t.Name, t.FlashSale, t.CPU
			run.BaseURL, run.BaseURLs = "", t.BaseURLs
			if t.Verify != nil {
				run.Verify = *t.Verify
			}
			var passes *reconcilePasses
			if reconcile {
				run.Name += "+reconcile"
				passes = &reconcilePasses{every: passesEvery, token: cfg.AdminToken, client: &http.Client{Timeout: time.Minute}}
				run.Alongside = passes.alongside(t.BaseURLs[0])
			}
			if err := watch.reset(ctx); err != nil {
				return reports, err
			}
			rep, err := bench.Run(ctx, run)
			if rep != nil {
				reports = append(reports, rep)
				_ = rep.WriteTable(stdout)
			}
			if err != nil {
				return reports, err
			}
			took, what, slow, err := watch.longest(ctx)
			if err != nil {
				return reports, err
			}
			fmt.Fprintf(stdout, "  %-13s longest %s (%s), %d commands of 1ms or more\n", "redis", took.Round(10*time.Microsecond), what, slow)
			if passes != nil {
				passes.write(stdout)
			}
			fmt.Fprintln(stdout)
		}
	}
	return reports, nil
}
