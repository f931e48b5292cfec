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
	// stand ("outcomeUnknown": true, Kafka mode).
	ErrOutcomeUnknown = "UNAVAILABLE_OUTCOME_UNKNOWN"
)

const maxBody = 64 << 10

type runner struct {
	cfg      Config
	hc       *http.Client
	prefix   string // run id: voucher codes and orderIds start with it
	codes    []string
	urls     []string // per voucher: the reservations URL
	noopURL  string
	bodyTail []byte // `,"orderAmount":N}`

	sent     atomic.Int64
	done     atomic.Int64
	failures atomic.Int64
	// measureFrom is when latencies start to count (Config.Warmup), in
	// Unix nanoseconds.
	measureFrom atomic.Int64
}

func newRunner(cfg Config) *runner {
	tr := &http.Transport{
		Proxy: nil, // the bench talks to the server directly
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:        cfg.Concurrency * 2,
		MaxIdleConnsPerHost: cfg.Concurrency,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	r := &runner{
		cfg:     cfg,
		hc:      &http.Client{Transport: tr, Timeout: cfg.RequestTimeout},
		prefix:  runID(),
		noopURL: cfg.BaseURL + "/healthz",
	}
	r.bodyTail = []byte(`,"orderAmount":` + strconv.FormatInt(cfg.MinOrderAmount+cfg.DiscountAmount, 10) + `}`)
	return r
}

// createVouchers creates the run's fresh vouchers, valid from a minute ago
// (clock skew) to an hour from now (longer than any run).
func (r *runner) createVouchers(ctx context.Context) error {
	admin := client.New(r.cfg.BaseURL, r.cfg.AdminToken, client.WithHTTPClient(r.hc), client.WithMaxAttempts(1))
	now := time.Now().UTC().Truncate(time.Second)
	for i := range r.cfg.Vouchers {
		code := r.prefix
		if r.cfg.Vouchers > 1 {
			code += "-" + strconv.Itoa(i)
		}
		_, err := admin.CreateVoucher(ctx, client.Voucher{
			Code:           code,
			DiscountAmount: r.cfg.DiscountAmount,
			MinOrderAmount: r.cfg.MinOrderAmount,
			TotalLimit:     r.cfg.TotalLimit,
			PerUserLimit:   r.cfg.PerUserLimit,
			StartsAt:       now.Add(-time.Minute),
			EndsAt:         now.Add(time.Hour),
			FlashSale:      r.cfg.FlashSale,
		})
		if err != nil {
			return fmt.Errorf("bench: create voucher %s: %w", code, err)
		}
		r.codes = append(r.codes, code)
		r.urls = append(r.urls, r.cfg.BaseURL+"/vouchers/"+code+"/reservations")
	}
	return nil
}

func (r *runner) orderID(seq int64) string {
	return r.prefix + "-" + strconv.FormatInt(seq, 10)
}

// maxShards bounds the number of histograms: one HdrHistogram of this range
// takes a few hundred KiB, too much to give each of thousands of workers.
const maxShards = 16

// workerStats is what a group of workers saw; merged after the run. Workers
// share a shard (and its mutex) only with every maxShards-th other worker.
type workerStats struct {
	mu      sync.Mutex
	hist    *hdrhistogram.Histogram
	status  map[int]int64
	errs    map[string]int64
	kinds   [3]int64
	warmup  int64   // answers left out of hist (Config.Warmup)
	granted []order // answered 201
	unknown []order // no definite answer: the server may or may not have taken a use
}

func newWorkerStats() *workerStats {
	return &workerStats{
		hist:   hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs),
		status: map[int]int64{},
		errs:   map[string]int64{},
	}
}

func (r *runner) run(ctx context.Context) *Report {
	cfg := r.cfg
	// Sending stops at MaxDuration; requests in flight then finish (each is
	// bounded by RequestTimeout) so their answers are counted.
	sendCtx, cancelSend := context.WithTimeout(ctx, cfg.MaxDuration)
	defer cancelSend()

	jobs := make(chan job)
	stats := make([]*workerStats, min(cfg.Concurrency, maxShards))
	for i := range stats {
		stats[i] = newWorkerStats()
	}
	var wg sync.WaitGroup
	for i := range cfg.Concurrency {
		wg.Add(1)
		go func(ws *workerStats) {
			defer wg.Done()
			r.work(ctx, jobs, ws)
		}(stats[i%len(stats)])
	}

	stopProgress := r.startProgress()
	start := time.Now()
	r.measureFrom.Store(start.Add(cfg.Warmup).UnixNano())
	truncated := r.dispatch(sendCtx, jobs, newGenerator(cfg), start)
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress(elapsed)

	rep := r.report(stats, elapsed)
	rep.StoppedByMaxDuration = truncated && ctx.Err() == nil
	rep.Interrupted = ctx.Err() != nil
	return rep
}

// dispatch hands jobs to the workers until the run is over. In an open loop
// it waits for each job's scheduled time; when every worker is busy the send
// blocks, the job is late, and its lateness counts in its latency. It
// reports whether sendCtx ended the run.
func (r *runner) dispatch(sendCtx context.Context, jobs chan<- job, gen *generator, start time.Time) bool {
	defer close(jobs)
	cfg := r.cfg
	var end time.Time
	if cfg.Duration > 0 {
		end = start.Add(cfg.Duration)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for i := int64(0); cfg.Requests == 0 || i < cfg.Requests; i++ {
		var at time.Time
		if cfg.Rate > 0 {
			at = start.Add(time.Duration(float64(i) * float64(time.Second) / cfg.Rate))
			if !end.IsZero() && !at.Before(end) {
				return false
			}
			if d := time.Until(at); d > 0 {
				timer.Reset(d)
				select {
				case <-timer.C:
				case <-sendCtx.Done():
					return true
				}
			}
		} else if !end.IsZero() && !time.Now().Before(end) {
			return false
		}
		j := gen.next()
		j.sched = at
		select {
		case jobs <- j:
			r.sent.Add(1)
		case <-sendCtx.Done():
			return true
		}
	}
	return false
}

func (r *runner) work(ctx context.Context, jobs <-chan job, ws *workerStats) {
	buf := make([]byte, 0, 4096)
	for j := range jobs {
		start := j.sched
		if start.IsZero() {
			start = time.Now()
		}
		status, code := r.send(ctx, j, &buf)
		lat := time.Since(start).Microseconds()
		lat = max(histMinMicros, min(lat, histMaxMicros))
		ws.mu.Lock()
		if r.cfg.Warmup > 0 && start.UnixNano() < r.measureFrom.Load() {
			ws.warmup++
		} else {
			_ = ws.hist.RecordValue(lat)
		}
		ws.kinds[j.kind]++
		ws.status[status]++
		if code != "" {
			ws.errs[code]++
		}
		if r.cfg.Target == RouteReserve {
			switch {
			case status == http.StatusCreated:
				ws.granted = append(ws.granted, j.order)
			case status == 0 || (status >= 500 && status != http.StatusServiceUnavailable) || code == ErrOutcomeUnknown:
				// 503 means nothing was taken unless it says the
				// outcome is unknown; other failures leave it unknown.
				ws.unknown = append(ws.unknown, j.order)
			}
		}
		ws.mu.Unlock()
		if r.failed(status) {
			r.failures.Add(1)
		}
		r.done.Add(1)
	}
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

// send performs one request and returns its status (0 when no answer came)
// and the error code for the report ("" on success).
func (r *runner) send(ctx context.Context, j job, buf *[]byte) (int, string) {
	var req *http.Request
	var err error
	if r.cfg.Target == RouteNoop {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, r.noopURL, nil)
	} else {
		b := (*buf)[:0]
		b = append(b, `{"customerId":`...)
		b = strconv.AppendInt(b, j.order.customer, 10)
		b = append(b, `,"orderId":"`...)
		b = append(b, r.prefix...)
		b = append(b, '-')
		b = strconv.AppendInt(b, j.order.seq, 10)
		b = append(b, '"')
		b = append(b, r.bodyTail...)
		*buf = b
		// The transport may still read the body after Do returns, so each
		// request gets its own copy.
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, r.urls[j.order.voucher], bytes.NewReader(bytes.Clone(b)))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			if r.cfg.APIToken != "" {
				req.Header.Set("Authorization", "Bearer "+r.cfg.APIToken)
			}
		}
	}
	if err != nil {
		return 0, ErrConnection
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, transportCode(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// Drain so the connection is reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		return resp.StatusCode, ""
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	var e struct {
		Error          string `json:"error"`
		OutcomeUnknown bool   `json:"outcomeUnknown"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return resp.StatusCode, ErrUnknownBody
	}
	if e.OutcomeUnknown {
		return resp.StatusCode, ErrOutcomeUnknown
	}
	return resp.StatusCode, e.Error
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
