package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Runner is the background side: every instance runs one. Each round
// sequences the committed events, produces them to the sink, sends the due
// deliveries and, every PruneEvery, prunes old events. Instances share the
// work through PostgreSQL (row locks and leases), so a delivery is sent by
// one instance in the normal case and again only after a crash or a lost
// answer (at least once).
type Runner struct {
	cfg    Config
	client *http.Client

	stop      chan struct{}
	done      chan struct{}
	startOnce sync.Once
	stopOnce  sync.Once
	lastPrune time.Time
}

// maxErrorWait bounds the wait between rounds that keep failing.
const maxErrorWait = 5 * time.Second

// Round is what one round did.
type Round struct {
	Sequenced, Produced, Sent, Pruned int
}

// NewRunner validates cfg.
func NewRunner(cfg Config) (*Runner, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	tr := cfg.Transport
	if tr == nil {
		d := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
		if !cfg.AllowPrivate {
			d.Control = control
		}
		tr = &http.Transport{
			Proxy: nil, DialContext: d.DialContext, ForceAttemptHTTP2: true,
			MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: cfg.Timeout,
			ResponseHeaderTimeout: cfg.Timeout,
		}
	}
	client := &http.Client{
		Transport: tr, Timeout: cfg.Timeout,
		// A redirect is an answer that is not 2xx: it is not followed (its
		// target was never checked).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Runner{cfg: cfg, client: client, stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// Start runs rounds until Stop.
func (r *Runner) Start(ctx context.Context) {
	r.startOnce.Do(func() {
		go r.loop(ctx)
	})
}

// Stop ends the loop and waits for the round in progress. A delivery in
// flight is finished or, if cut, sent again after its lease.
func (r *Runner) Stop() {
	r.stopOnce.Do(func() { close(r.stop) })
	r.startOnce.Do(func() { close(r.done) }) // never started
	<-r.done
}

func (r *Runner) loop(ctx context.Context) {
	defer close(r.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	wait := r.cfg.Poll
	for {
		round, err := r.RunOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			// A dependency down: say so, and wait longer each time (up to
			// maxErrorWait) rather than log every poll.
			r.cfg.Logger.Warn("events round failed", "err", err, "retryIn", wait.String())
		case round.Sequenced > 0 || round.Sent > 0 || round.Produced > 0:
			wait = r.cfg.Poll
			continue
		default:
			wait = r.cfg.Poll
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if err != nil {
			wait = min(2*wait, max(maxErrorWait, r.cfg.Poll))
		}
	}
}

// RunOnce runs one round and returns what it did.
func (r *Runner) RunOnce(ctx context.Context) (Round, error) {
	var round Round
	var errs []error
	n, err := r.cfg.Store.SequenceEvents(ctx, DefaultSequenceSize)
	round.Sequenced = n
	errs = append(errs, err)
	if r.cfg.Sink != nil {
		n, err := r.cfg.Store.ProduceEvents(ctx, r.cfg.SinkName, DefaultSinkBatch, r.cfg.Sink.Produce)
		round.Produced = n
		errs = append(errs, err)
	}
	n, err = r.deliver(ctx)
	round.Sent = n
	errs = append(errs, err)
	if now := r.cfg.Clock(); now.Sub(r.lastPrune) >= r.cfg.PruneEvery {
		n, err := r.cfg.Store.PruneEvents(ctx, now.Add(-r.cfg.Retention), r.cfg.PruneBatch)
		round.Pruned = n
		errs = append(errs, err)
		if err == nil && n < r.cfg.PruneBatch {
			r.lastPrune = now
		}
	}
	return round, errors.Join(errs...)
}

// deliver claims the due deliveries, sends them concurrently and records
// each outcome.
func (r *Runner) deliver(ctx context.Context) (int, error) {
	jobs, err := r.cfg.Store.ClaimDeliveries(ctx, r.cfg.Batch, 2*r.cfg.Timeout)
	if err != nil || len(jobs) == 0 {
		return 0, err
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := r.send(ctx, j)
			if ctx.Err() != nil {
				// Shutting down: the lease lets another instance (or this
				// one, restarted) send it again.
				return
			}
			// Recorded even if Stop comes meanwhile, within a bound.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Timeout)
			errs[i] = r.cfg.Store.RecordDelivery(rctx, res)
			cancel()
		}()
	}
	wg.Wait()
	return len(jobs), errors.Join(errs...)
}

// send makes one attempt and decides what the delivery becomes.
func (r *Runner) send(ctx context.Context, j voucher.DeliveryJob) voucher.DeliveryResult {
	res := voucher.DeliveryResult{WebhookID: j.WebhookID, EventID: j.Event.ID, Attempt: j.Attempt}
	status, err := r.post(ctx, j)
	res.HTTPStatus = status
	now := r.cfg.Clock()
	if err == nil {
		res.Status, res.NextAttemptAt = voucher.DeliveryDelivered, now
		r.observe("delivered", now.Sub(j.Event.CreatedAt))
		return res
	}
	res.Error = err.Error()
	if len(res.Error) > 512 {
		res.Error = res.Error[:512]
	}
	next := now.Add(r.backoff(j.Attempt))
	if next.After(j.CreatedAt.Add(r.cfg.RetryFor)) {
		res.Status, res.NextAttemptAt = voucher.DeliveryFailed, now
		r.observe("failed", 0)
		r.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "webhook delivery failed for good",
			slog.String("webhook", j.WebhookID), slog.Int64("event", j.Event.ID), slog.Int("attempts", j.Attempt),
			slog.String("err", res.Error))
		return res
	}
	res.Status, res.NextAttemptAt = voucher.DeliveryPending, next
	r.observe("retry", 0)
	return res
}

func (r *Runner) observe(outcome string, lag time.Duration) {
	if r.cfg.Observer != nil {
		r.cfg.Observer.WebhookDelivery(outcome, lag)
	}
}

// backoff is the wait after the attempt-th failed attempt.
func (r *Runner) backoff(attempt int) time.Duration {
	d := r.cfg.BackoffBase
	for i := 1; i < attempt && d < r.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, r.cfg.BackoffMax)
	return d/2 + r.cfg.RandomTime(d-d/2)
}

// randomTime is uniform in [0, d].
func randomTime(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1) //nolint:gosec // G404: jitter, not a secret
}

// post sends the event; a 2xx answer is a delivery.
func (r *Runner) post(ctx context.Context, j voucher.DeliveryJob) (int, error) {
	body := j.Event.JSON()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if req.URL.Scheme != "https" && !(r.cfg.AllowPrivate && req.URL.Scheme == "http") {
		return 0, errors.New("url must be https")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "voucherd-webhook")
	req.Header.Set(HeaderEventID, j.Event.IDString())
	req.Header.Set(HeaderSignature, Sign(j.Secret, r.cfg.Clock(), body))
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("receiver answered %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}
