package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/voucherd/voucherd/client"
)

// Histogram range: 1µs to 60s at 3 significant digits.
const (
	histMinMicros = 1
	histMaxMicros = 60_000_000
	histSigFigs   = 3
)

// Error counts for requests that got no HTTP answer.
const (
	ErrTimeout    = "TIMEOUT"
	ErrConnection = "CONNECTION"
	ErrCanceled   = "CANCELED"
	// ErrUnknownBody counts non-2xx answers without a voucherd error code.
	ErrUnknownBody = "NO_CODE"
	// ErrOutcomeUnknown counts 503 answers that say the reservation may
	// stand ("outcomeUnknown": true).
	ErrOutcomeUnknown = "UNAVAILABLE_OUTCOME_UNKNOWN"
)

var errOutcomeUnknown = []byte(ErrOutcomeUnknown)

const maxBody = 64 << 10

type runner struct {
	cfg       Config
	hc        *http.Client // creates the vouchers
	prefix    string       // run id: voucher codes and orderIds start with it
	campaign  string       // the campaign id of a campaign run
	codes     []string
	endpoints []*endpoint // one per base URL; worker i sends to endpoints[i%len]
	bodyTail  []byte      // `,"orderAmount":N}`
	// stackBody holds, in a run of stacks (Config.Stack), per first
	// voucher, the codes of its orders: `,"codes":["A","B"]`.
	stackBody [][]byte

	sent     atomic.Int64
	done     atomic.Int64
	failures atomic.Int64
	// measureFrom is when latencies start to count (Config.Warmup).
	measureFrom time.Time

	// The job source the workers draw from, in one sequence so that the
	// workload depends only on the seed.
	mu     sync.Mutex
	gen    *generator
	issued int64
	start  time.Time
	end    time.Time // zero: no Duration
	// stop is set when sending must end (MaxDuration or the caller's
	// context); stopped records that it ended the run early.
	stop    atomic.Bool
	stopped atomic.Bool
}

func newRunner(cfg Config) (*runner, error) {
	tr := &http.Transport{
		Proxy:               nil, // the bench talks to the server directly
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
		DisableCompression:  true,
	}
	r := &runner{
		cfg:    cfg,
		hc:     &http.Client{Transport: tr, Timeout: cfg.RequestTimeout},
		prefix: runID(),
	}
	for _, u := range cfg.BaseURLs {
		e, err := newEndpoint(u, cfg.APIToken)
		if err != nil {
			return nil, err
		}
		r.endpoints = append(r.endpoints, e)
	}
	r.bodyTail = []byte(`,"orderAmount":` + strconv.FormatInt(orderAmount(cfg), 10) + `}`)
	return r, nil
}

// orderAmount is the order amount of every request: the minimum order plus
// the fixed discount, or plus 100,000 minor units with a percentage (so that
// the percentage takes something off).
func orderAmount(cfg Config) int64 {
	if cfg.DiscountPercent != 0 {
		return cfg.MinOrderAmount + 100_000
	}
	return cfg.MinOrderAmount + int64(max(cfg.Stack, 1))*cfg.DiscountAmount
}

// createVouchers creates the run's fresh vouchers, valid from a minute ago
// (clock skew) to an hour from now (longer than any run).
func (r *runner) createVouchers(ctx context.Context) error {
	admin := client.New(r.cfg.BaseURL, r.cfg.AdminToken, client.WithHTTPClient(r.hc), client.WithMaxAttempts(1))
	now := time.Now().UTC().Truncate(time.Second)
	if r.cfg.CampaignCodes > 0 {
		return r.createCampaign(ctx, admin, now)
	}
	for i := range r.cfg.Vouchers {
		code := r.prefix
		if r.cfg.Vouchers > 1 {
			code += "-" + strconv.Itoa(i)
		}
		_, err := admin.CreateVoucher(ctx, client.Voucher{
			Code:              code,
			DiscountAmount:    r.cfg.DiscountAmount,
			DiscountPercent:   r.cfg.DiscountPercent,
			MaxDiscountAmount: r.cfg.MaxDiscountAmount,
			MinOrderAmount:    r.cfg.MinOrderAmount,
			TotalLimit:        r.cfg.TotalLimit,
			PerUserLimit:      r.cfg.PerUserLimit,
			StartsAt:          now.Add(-time.Minute),
			EndsAt:            now.Add(time.Hour),
			FlashSale:         r.cfg.FlashSale,
			BudgetAmount:      r.cfg.BudgetAmount,
			BudgetShortfall:   r.cfg.budgetShortfall(),
			Stacking:          r.cfg.stacking(),
		})
		if err != nil {
			return fmt.Errorf("bench: create voucher %s: %w", code, err)
		}
		r.codes = append(r.codes, code)
		for _, e := range r.endpoints {
			e.addVoucher(code)
		}
	}
	if r.cfg.Stack > 1 {
		for v := range r.codes {
			codes := make([]string, r.cfg.Stack)
			for k := range codes {
				codes[k] = r.codes[stackVoucher(v, k, len(r.codes))]
			}
			b, _ := json.Marshal(codes)
			r.stackBody = append(r.stackBody, append([]byte(`,"codes":`), b...))
		}
		for _, e := range r.endpoints {
			e.addStack()
		}
	}
	return nil
}

// stackVoucher is the voucher of position k (from 0) of an order of
// several codes whose drawn voucher is v, of n vouchers.
func stackVoucher(v, k, n int) int { return (v + k) % n }

// stacking is the vouchers' stacking setting: stackable in a run of
// stacks, else none.
func (c Config) stacking() *client.Stacking {
	if c.Stack > 1 {
		return &client.Stacking{Stackable: true}
	}
	return nil
}

// budgetShortfall is the vouchers' budgetShortfall: "" (the server's
// default, reject) unless BudgetClip.
func (c Config) budgetShortfall() string {
	if c.BudgetClip && c.BudgetAmount > 0 {
		return "clip"
	}
	return ""
}

// createCampaign creates the run's campaign and reads its codes back; the
// codes stand for the run's vouchers when requests are sent.
func (r *runner) createCampaign(ctx context.Context, admin *client.Client, now time.Time) error {
	c, err := admin.CreateCampaignCodes(ctx, client.NewCampaign{
		Name: r.prefix, CodePrefix: "B", DiscountAmount: r.cfg.DiscountAmount, MinOrderAmount: r.cfg.MinOrderAmount,
		TotalLimit: r.cfg.TotalLimit, PerUserLimit: r.cfg.PerUserLimit,
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), FlashSale: r.cfg.FlashSale,
		BudgetAmount: r.cfg.BudgetAmount, BudgetShortfall: r.cfg.budgetShortfall(),
	}, r.cfg.CampaignCodes, 0, nil)
	if err != nil {
		return fmt.Errorf("bench: create campaign: %w", err)
	}
	r.campaign = c.ID
	for p := (client.Page{Limit: 1000}); ; {
		page, err := admin.CampaignCodes(ctx, c.ID, p)
		if err != nil {
			return fmt.Errorf("bench: read the codes of campaign %s: %w", c.ID, err)
		}
		for _, code := range page.Codes {
			r.codes = append(r.codes, code.Code)
			for _, e := range r.endpoints {
				e.addVoucher(code.Code)
			}
		}
		if p.After = page.Next; p.After == "" {
			return nil
		}
	}
}

// maxShards bounds the number of histograms: one HdrHistogram of this range
// takes about 140 KiB, too much to give each of thousands of workers.
const maxShards = 256

// workerStats is what a group of workers saw; merged after the run. Workers
// share a shard (and its mutex) only with every maxShards-th other worker,
// so the lock is normally uncontended.
type workerStats struct {
	mu      sync.Mutex
	hist    *hdrhistogram.Histogram
	status  [600]int64
	errs    map[string]*int64
	kinds   [3]int64
	warmup  int64   // answers left out of hist (Config.Warmup)
	granted []order // answered 201
	unknown []order // no definite answer: the server may or may not have taken a use
	slow    slowest // the slowest requests counted in hist
}

func newWorkerStats() *workerStats {
	return &workerStats{
		hist: hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs),
		errs: map[string]*int64{},
		slow: slowest{n: SlowestKept},
	}
}

// countErr counts one answer's error code without allocating once the code
// has been seen.
func (ws *workerStats) countErr(code []byte) {
	p := ws.errs[string(code)]
	if p == nil {
		p = new(int64)
		ws.errs[string(code)] = p
	}
	*p++
}

func (r *runner) run(ctx context.Context) *Report {
	cfg := r.cfg
	// The idle cost is watched before anything else starts: the warm-up
	// and the MaxDuration bound count from the first request.
	var idle *idleCPU
	if len(cfg.CPU) > 0 && cfg.CPUIdle > 0 {
		idle = watchIdle(ctx, cfg.CPU, cfg.CPUIdle)
	}
	// Sending stops at MaxDuration; requests in flight then finish (each is
	// bounded by RequestTimeout) so their answers are counted.
	sendCtx, cancelSend := context.WithTimeout(ctx, cfg.MaxDuration)
	defer cancelSend()
	stopSending := context.AfterFunc(sendCtx, func() { r.stop.Store(true) })
	defer stopSending()

	stats := make([]*workerStats, min(cfg.Concurrency, maxShards))
	for i := range stats {
		stats[i] = newWorkerStats()
	}
	if cfg.Target == RouteReserve {
		if r.campaign != "" {
			// Each code is a "voucher" of the generator.
			cfg.Vouchers = len(r.codes)
		}
		r.gen = newGenerator(cfg)
	}
	stopProgress := r.startProgress()
	r.start = time.Now()
	r.measureFrom = r.start.Add(cfg.Warmup)
	if cfg.Duration > 0 {
		r.end = r.start.Add(cfg.Duration)
	}
	cpuBefore := make(chan procTimes, 1)
	if len(cfg.CPU) > 0 {
		if cfg.Warmup == 0 {
			cpuBefore <- readCPU(cfg.CPU)
		} else {
			t := time.AfterFunc(cfg.Warmup, func() { cpuBefore <- readCPU(cfg.CPU) })
			defer t.Stop()
		}
	}
	var wg sync.WaitGroup
	for i := range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(ctx, sendCtx, r.endpoints[i%len(r.endpoints)], stats[i%len(stats)])
		}()
	}
	alongside := r.startAlongside(sendCtx)
	wg.Wait()
	alongside()
	elapsed := time.Since(r.start)
	stopProgress(elapsed)

	rep := r.report(stats, elapsed)
	if len(cfg.CPU) > 0 {
		after := readCPU(cfg.CPU)
		select {
		case before := <-cpuBefore:
			cost, err := cpuCost(cfg.CPU, before, after, rep.Histogram.TotalCount(), idle)
			rep.CPU = cost
			if err != nil {
				rep.CPUError = err.Error()
			}
		default:
			rep.CPUError = "the run ended before its warm-up did"
		}
	}
	rep.StoppedByMaxDuration = r.stopped.Load() && ctx.Err() == nil
	rep.Interrupted = ctx.Err() != nil
	return rep
}

// startAlongside starts Config.Alongside, if set, until ctx ends or the
// returned function is called; that function waits for it to return.
func (r *runner) startAlongside(ctx context.Context) (stop func()) {
	if r.cfg.Alongside == nil {
		return func() {}
	}
	codes := r.codes
	if r.campaign != "" {
		codes = []string{r.campaign}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.cfg.Alongside(ctx, slices.Clone(codes))
	}()
	return func() { cancel(); <-done }
}

// take returns the next job and, in an open loop, its scheduled send time;
// ok is false when the run has nothing more to send.
func (r *runner) take() (j job, ok bool) {
	cfg := r.cfg
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop.Load() {
		r.stopped.Store(true)
		return job{}, false
	}
	if cfg.Requests > 0 && r.issued >= cfg.Requests {
		return job{}, false
	}
	if cfg.Rate > 0 {
		j.sched = r.start.Add(time.Duration(float64(r.issued) * float64(time.Second) / cfg.Rate))
		if !r.end.IsZero() && !j.sched.Before(r.end) {
			return job{}, false
		}
	} else if !r.end.IsZero() && !time.Now().Before(r.end) {
		return job{}, false
	}
	if r.gen != nil {
		sched := j.sched
		j = r.gen.next()
		j.sched = sched
	}
	r.issued++
	return j, true
}

// work sends jobs on one keep-alive connection until the run is over. In an
// open loop it waits for each job's scheduled time (or the end of sending:
// sendCtx); a job it takes late (every worker was busy) counts its lateness
// in its latency.
func (r *runner) work(ctx, sendCtx context.Context, ep *endpoint, ws *workerStats) {
	conn := newHTTPConn(ctx, ep, r.cfg.RequestTimeout)
	defer conn.close()
	req := make([]byte, 0, 512)
	var timer *time.Timer
	for {
		j, ok := r.take()
		if !ok {
			return
		}
		start := j.sched
		if start.IsZero() {
			start = time.Now()
		} else if d := time.Until(start); d > 0 {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			select {
			case <-timer.C:
			case <-sendCtx.Done():
			}
			if r.stop.Load() || sendCtx.Err() != nil {
				r.stopped.Store(true)
				return
			}
		}
		r.sent.Add(1)
		if r.cfg.Target == RouteNoop {
			req = ep.noop
		} else {
			req = r.appendReserve(req[:0], ep, j.order)
		}
		status, err := conn.roundTrip(req, start)
		lat := time.Since(start).Microseconds()
		r.record(ctx, ws, j, start, max(histMinMicros, min(lat, histMaxMicros)), status, err, conn.body)
	}
}

// appendReserve appends the reservation request of o to b.
func (r *runner) appendReserve(b []byte, ep *endpoint, o order) []byte {
	body := len(`{"customerId":,"orderId":"-"`) + digits(o.customer) + len(r.prefix) + digits(o.seq) + len(r.bodyTail)
	if r.cfg.StringCustomerIDs {
		body += len(`""`) + len(customerPrefix)
	}
	var codes []byte
	if r.stackBody != nil {
		codes = r.stackBody[o.voucher]
		body += len(codes)
		b = append(b, ep.stack...)
	} else {
		b = append(b, ep.reserve[o.voucher]...)
	}
	b = strconv.AppendInt(b, int64(body), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, `{"customerId":`...)
	if r.cfg.StringCustomerIDs {
		b = append(b, '"')
		b = append(b, customerPrefix...)
		b = strconv.AppendInt(b, o.customer, 10)
		b = append(b, '"')
	} else {
		b = strconv.AppendInt(b, o.customer, 10)
	}
	b = append(b, `,"orderId":"`...)
	b = append(b, r.prefix...)
	b = append(b, '-')
	b = strconv.AppendInt(b, o.seq, 10)
	b = append(b, '"')
	b = append(b, codes...)
	return append(b, r.bodyTail...)
}

// digits returns the length of n's decimal form; n >= 0.
func digits(n int64) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// record counts one request's outcome.
func (r *runner) record(ctx context.Context, ws *workerStats, j job, start time.Time, lat int64, status int, err error, body []byte) {
	var code []byte
	switch {
	case err != nil:
		code = []byte(transportCode(ctx, err))
	case status == http.StatusServiceUnavailable && outcomeUnknown(body):
		code = errOutcomeUnknown
	case status >= 300:
		if code = errorCode(body); code == nil {
			code = []byte(ErrUnknownBody)
		}
	}
	ws.mu.Lock()
	if r.cfg.Warmup > 0 && start.Before(r.measureFrom) {
		ws.warmup++
	} else {
		_ = ws.hist.RecordValue(lat)
		ws.slow.offer(slowEntry{start: start, latency: lat, status: status, job: j}, code)
	}
	ws.kinds[j.kind]++
	ws.status[status]++
	if code != nil {
		ws.countErr(code)
	}
	if r.cfg.Target == RouteReserve {
		switch {
		case status == http.StatusCreated:
			ws.granted = append(ws.granted, j.order)
		case status == 0 || (status >= 500 && status != http.StatusServiceUnavailable),
			bytes.Equal(code, errOutcomeUnknown):
			// A 503 means nothing was taken (a dependency failure leaks
			// no use) unless it says the outcome is unknown; other
			// failures leave the outcome unknown.
			ws.unknown = append(ws.unknown, j.order)
		}
	}
	ws.mu.Unlock()
	if r.failed(status) {
		r.failures.Add(1)
	}
	r.done.Add(1)
}

// failed reports whether an answer is a failure rather than an expected
// outcome: any transport error or 5xx, and for reservations any 4xx other
// than the business answers 409 and 422.
func (r *runner) failed(status int) bool {
	if r.cfg.Target == RouteNoop {
		return status != http.StatusOK
	}
	switch {
	case status >= 200 && status < 300:
		return false
	case status == http.StatusConflict || status == http.StatusUnprocessableEntity:
		return false
	}
	return true
}

func transportCode(ctx context.Context, err error) string {
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		return ErrCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return ErrTimeout
	}
	return ErrConnection
}

// startProgress prints a carriage-return updated line about five times a
// second; the returned function prints the final line.
func (r *runner) startProgress() func(elapsed time.Duration) {
	w := r.cfg.Progress
	if w == nil {
		return func(time.Duration) {}
	}
	start := time.Now()
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				r.printProgress(w, time.Since(start))
			}
		}
	}()
	return func(elapsed time.Duration) {
		close(stop)
		<-stopped
		r.printProgress(w, elapsed)
		_, _ = fmt.Fprintln(w)
	}
}

func (r *runner) printProgress(w io.Writer, elapsed time.Duration) {
	done, sent := r.done.Load(), r.sent.Load()
	var total int64
	switch {
	case r.cfg.Requests > 0 && r.cfg.Rate > 0 && r.cfg.Duration > 0:
		total = min(r.cfg.Requests, int64(r.cfg.Rate*r.cfg.Duration.Seconds()))
	case r.cfg.Requests > 0:
		total = r.cfg.Requests
	case r.cfg.Rate > 0:
		total = int64(r.cfg.Rate * r.cfg.Duration.Seconds())
	}
	// Progress is by requests when their number is known, else by time.
	frac, totalText := 0.0, "?"
	switch {
	case total > 0:
		frac, totalText = float64(done)/float64(total), strconv.FormatInt(total, 10)
	case r.cfg.Duration > 0:
		frac = elapsed.Seconds() / r.cfg.Duration.Seconds()
	}
	const width = 20
	filled := int(min(max(frac, 0), 1) * width)
	bar := strings.Repeat("=", filled) + strings.Repeat(" ", width-filled)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(done) / s
	}
	_, _ = fmt.Fprintf(w, "\r%s [%s] sent %d/%s  done %d  %.0f req/s  errors %d  %.1fs ",
		r.cfg.Target, bar, sent, totalText, done, rate, r.failures.Load(), elapsed.Seconds())
}
