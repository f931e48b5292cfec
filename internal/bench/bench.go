// Package bench is the load generator behind `voucherd bench`: it creates
// fresh vouchers on a running voucherd, sends reservation traffic (or no-op
// traffic to /healthz, as a baseline) in an open or closed loop over one or
// several instances, records latency in HdrHistograms, and reports
// throughput, percentiles, outcomes and, given the stack's processes, their
// CPU time per request. With a database URL it then verifies the
// never-oversell invariants against PostgreSQL (and Redis in flash modes)
// for the vouchers it created.
//
// The generator is meant not to be the ceiling: each worker keeps one
// keep-alive HTTP/1.1 connection, writes each request from bytes prepared
// once per voucher into a reused buffer, and parses only the status line,
// the framing headers and the error code of the answer, without allocating
// per request.
//
// Open loop: requests are scheduled at fixed intervals and latency is
// measured from each request's scheduled send time, so a slow server cannot
// hide its queueing by slowing the generator down (no coordinated omission).
// Closed loop: Concurrency workers send back to back and latency is measured
// from the actual send.
//
// Every run stops by itself: MaxDuration bounds it whatever the other
// settings say.
package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Route is what the generated requests call.
type Route string

// Routes.
const (
	// RouteReserve sends POST /vouchers/{code}/reservations.
	RouteReserve Route = "reserve"
	// RouteNoop sends GET /healthz to the same server: the cost of HTTP and
	// the server's plumbing without any voucher work, the baseline of Compare.
	RouteNoop Route = "noop"
)

// RedisClientName is the client name of the bench's own Redis
// connections (the verification's), so that a reader of SLOWLOG or CLIENT
// LIST can tell them from voucherd's.
const RedisClientName = "voucherd-bench"

// Defaults applied to zero fields of Config.
const (
	DefaultTotalLimit     = 1000
	DefaultPerUserLimit   = 1
	DefaultDiscountAmount = 1000
	DefaultCustomers      = 10000
	DefaultConcurrency    = 32
	DefaultRequests       = 10000
	DefaultMaxDuration    = 2 * time.Minute
	DefaultRequestTimeout = 10 * time.Second
	DefaultVerifyWait     = 30 * time.Second
	maxVouchers           = 1000
	maxCampaignCodes      = 1_000_000
	maxStack              = 5
)

// Config describes one run. Zero values mean the defaults above.
type Config struct {
	// Name labels the run in reports (Compare sets it to the target's name).
	Name string
	// BaseURL is the voucherd to load, e.g. "http://127.0.0.1:8080"; the
	// run's vouchers are created through it.
	BaseURL string
	// BaseURLs, when set, are the voucherd instances of one deployment
	// (sharing PostgreSQL and Redis) to spread the traffic over: worker i
	// sends to BaseURLs[i % len]. Empty means BaseURL alone; BaseURL empty
	// means BaseURLs[0].
	BaseURLs []string
	// APIToken authenticates reservation requests; AdminToken creates the
	// bench vouchers.
	APIToken   string
	AdminToken string
	// Target is RouteReserve (default) or RouteNoop.
	Target Route

	// The vouchers the run creates (the API's voucher fields). Each run creates fresh ones.
	TotalLimit     int32
	PerUserLimit   int32
	FlashSale      bool
	DiscountAmount int64
	MinOrderAmount int64
	// DiscountPercent, when set, gives the vouchers a percentage discount
	// (the API's discountPercent) capped at MaxDiscountAmount (0: no cap)
	// instead of DiscountAmount; every reservation then computes its
	// discount from the order amount.
	DiscountPercent   float64
	MaxDiscountAmount int64
	// BudgetAmount, when positive, gives each voucher (or the campaign) a
	// money budget of that many minor units (the API's budgetAmount): a
	// budget-limited flash sale, where BUDGET_EXCEEDED ends the sale before
	// the uses run out. BudgetClip gives the last orders what is left
	// (budgetShortfall clip). The verification's stored-counter check
	// (pgstore.Violations) includes the money invariant.
	BudgetAmount int64
	BudgetClip   bool
	// Vouchers is how many vouchers to create; traffic is spread uniformly
	// across them (1 = a single hot voucher, the flash-sale case).
	Vouchers int
	// CampaignCodes, when positive, makes the run a campaign sale: one
	// campaign of that many unique codes shares TotalLimit and PerUserLimit
	// (Vouchers does not apply; FlashSale makes it a flash campaign, gated
	// in Redis under its budget's keys), and each new order presents a
	// code drawn uniformly from them, so contention per code is low and the
	// budget is the one shared resource. The report and the verification
	// count the campaign as one voucher, its id.
	CampaignCodes int
	// HotShare, with several vouchers, sends that share of the requests to
	// the first voucher (a hot one) and spreads the rest uniformly over the
	// others.
	HotShare float64
	// Stack, from 2 to 5, makes every order present that many codes at
	// once (POST /reservations with codes, all or none): the order's drawn
	// voucher v and the next ones, v+1 ... v+Stack-1 modulo Vouchers, so
	// that orders share codes (the first voucher's the most with HotShare).
	// The vouchers are created stackable; the order amount leaves every
	// code its fixed discount. Verification also checks all or none per
	// order. 0 or 1: one code per order.
	Stack int

	// Customers is the number of distinct customers the traffic comes from.
	Customers int64
	// StringCustomerIDs sends customer n as the JSON string "cus-n" instead
	// of the JSON integer n (which the server takes for the string "n").
	StringCustomerIDs bool
	// RetryShare is the share of requests that resend an earlier orderId with
	// its customer and voucher (a client retrying after a lost answer).
	RetryShare float64
	// RepeatShare is the share of requests from an already-seen customer with
	// a new orderId (a customer trying again, which the per-user limit stops).
	// The rest come from customers not seen yet while there are any.
	RepeatShare float64

	// Rate is the open-loop request rate in requests per second; 0 runs a
	// closed loop.
	Rate float64
	// Concurrency is the number of workers, and so of connections and of
	// requests in flight at most.
	Concurrency int
	// Requests stops the run after that many requests; Duration stops it
	// after that long. With neither set the run sends DefaultRequests. With
	// both, the first reached wins.
	Requests int64
	Duration time.Duration
	// MaxDuration is a hard bound on sending, whatever else is set.
	MaxDuration time.Duration
	// Warmup leaves the requests of the run's first Warmup out of the
	// latency figures: those scheduled then (open loop) or sent then
	// (closed loop). They are sent, counted and verified like the others;
	// Report.WarmupRequests says how many there were. It measures a warm
	// service (connections open, caches filled) rather than its first
	// second.
	Warmup time.Duration
	// RequestTimeout bounds each request.
	RequestTimeout time.Duration
	// Seed makes the workload reproducible; 0 picks one (reported).
	Seed uint64

	// Progress receives a progress line about five times a second; nil
	// prints nothing.
	Progress io.Writer

	// Verify, when DatabaseURL is set, checks the invariants after the run.
	Verify VerifyConfig

	// Alongside, when set, runs while the requests are sent, with the codes
	// the run reserves on (its vouchers, or its campaign's id); its context
	// ends when sending does, and the run waits for it to return. It is for
	// work beside the traffic whose effect on it is measured, such as
	// reconciliation.
	Alongside func(ctx context.Context, codes []string)

	// CPU lists the processes of the stack under load; when set, the report
	// gives each one's CPU time per request over the measured requests
	// (those after Warmup), read from /proc (Linux).
	CPU []Component
	// CPUIdle, with CPU, first watches the stack this long without traffic,
	// so that the report can tell its idle cost (a broker's or a pool's
	// background work) from the cost of the requests.
	CPUIdle time.Duration
}

// VerifyConfig tells Verify where voucherd keeps its state.
type VerifyConfig struct {
	// DatabaseURL is voucherd's PostgreSQL; empty skips verification.
	DatabaseURL string
	// RedisAddrs are voucherd's Redis nodes (any node of a cluster); when set,
	// flash vouchers' remaining counts are checked too.
	RedisAddrs []string
	// KeyPrefix is voucherd's Redis key prefix.
	KeyPrefix string
	// Wait is how long to keep polling while the state does not add up yet
	// (the Kafka consumer catching up); 0 means DefaultVerifyWait, negative
	// means check once.
	Wait time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Target == "" {
		c.Target = RouteReserve
	}
	if c.TotalLimit == 0 {
		c.TotalLimit = DefaultTotalLimit
	}
	if c.PerUserLimit == 0 {
		c.PerUserLimit = DefaultPerUserLimit
	}
	if c.DiscountAmount == 0 && c.DiscountPercent == 0 {
		c.DiscountAmount = DefaultDiscountAmount
	}
	if c.Vouchers == 0 {
		c.Vouchers = 1
	}
	if c.Customers == 0 {
		c.Customers = DefaultCustomers
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Requests == 0 && c.Duration == 0 {
		c.Requests = DefaultRequests
	}
	if c.MaxDuration == 0 {
		c.MaxDuration = DefaultMaxDuration
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Verify.Wait == 0 {
		c.Verify.Wait = DefaultVerifyWait
	}
	if c.Seed == 0 {
		n, err := rand.Int(rand.Reader, big.NewInt(1<<62))
		if err != nil {
			return c, fmt.Errorf("bench: seed: %w", err)
		}
		c.Seed = n.Uint64() + 1
	}

	if c.BaseURL == "" && len(c.BaseURLs) > 0 {
		c.BaseURL = c.BaseURLs[0]
	}
	if len(c.BaseURLs) == 0 {
		c.BaseURLs = []string{c.BaseURL}
	}
	c.BaseURLs = slices.Clone(c.BaseURLs)
	for i, b := range append([]string{c.BaseURL}, c.BaseURLs...) {
		u, err := url.Parse(b)
		if b == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, fmt.Errorf("bench: BaseURL %q must be an http(s) URL", b)
		}
		if i > 0 {
			c.BaseURLs[i-1] = strings.TrimRight(b, "/")
		}
	}
	switch {
	case c.Target != RouteReserve && c.Target != RouteNoop:
		return c, fmt.Errorf("bench: Target %q must be %q or %q", c.Target, RouteReserve, RouteNoop)
	case c.TotalLimit < 0 || c.PerUserLimit < 0 || c.DiscountAmount < 0 || c.MinOrderAmount < 0 ||
		c.DiscountPercent < 0 || c.MaxDiscountAmount < 0 || c.BudgetAmount < 0:
		return c, errors.New("bench: voucher limits and amounts must not be negative")
	case c.DiscountPercent != 0 && c.DiscountAmount != 0:
		return c, errors.New("bench: DiscountAmount and DiscountPercent exclude each other")
	case c.Vouchers < 0 || c.Vouchers > maxVouchers:
		return c, fmt.Errorf("bench: Vouchers must be between 1 and %d", maxVouchers)
	case c.CampaignCodes < 0 || c.CampaignCodes > maxCampaignCodes:
		return c, fmt.Errorf("bench: CampaignCodes must be between 0 and %d", maxCampaignCodes)
	case c.CampaignCodes > 0 && (c.HotShare > 0 || c.Vouchers > 1):
		return c, errors.New("bench: a campaign run has one campaign: no Vouchers or HotShare")
	case c.Stack < 0 || c.Stack > maxStack:
		return c, fmt.Errorf("bench: Stack must be between 0 and %d", maxStack)
	case c.Stack > 1 && (c.CampaignCodes > 0 || c.Vouchers < c.Stack):
		return c, errors.New("bench: a run of stacks needs at least Stack vouchers and no campaign")
	case c.Customers < 0:
		return c, errors.New("bench: Customers must not be negative")
	case c.RetryShare < 0 || c.RepeatShare < 0 || c.RetryShare+c.RepeatShare > 1:
		return c, errors.New("bench: RetryShare and RepeatShare must be >= 0 and add up to at most 1")
	case c.HotShare < 0 || c.HotShare > 1 || (c.HotShare > 0 && c.Vouchers < 2):
		return c, errors.New("bench: HotShare must be between 0 and 1, with at least 2 vouchers")
	case c.Rate < 0:
		return c, errors.New("bench: Rate must not be negative")
	case c.Concurrency < 0:
		return c, errors.New("bench: Concurrency must not be negative")
	case c.Requests < 0 || c.Duration < 0 || c.MaxDuration < 0 || c.RequestTimeout < 0 || c.Warmup < 0 || c.CPUIdle < 0:
		return c, errors.New("bench: Requests and durations must not be negative")
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	return c, nil
}

// runID returns a fresh identifier for the run's vouchers and orderIds:
// "B", the time in base 36, and random characters, so runs never collide.
func runID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	r := strconv.FormatUint(uint64(b[0])<<24|uint64(b[1])<<16|uint64(b[2])<<8|uint64(b[3]), 36)
	return "B" + strconv.FormatInt(time.Now().UnixMilli(), 36) + r
}

// Run creates the run's vouchers, sends the traffic, and, when
// cfg.Verify.DatabaseURL is set, verifies the invariants. It returns the
// report even when the context was cancelled part-way (with the context's
// error) or verification could not run (with that error); violations found
// by verification are in the report, not in the error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r, err := newRunner(cfg)
	if err != nil {
		return nil, err
	}
	defer r.hc.CloseIdleConnections()
	if cfg.Target == RouteReserve {
		if err := r.createVouchers(ctx); err != nil {
			return nil, err
		}
	}
	rep := r.run(ctx)
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	if cfg.Target == RouteReserve && cfg.Verify.DatabaseURL != "" {
		v, err := Verify(ctx, cfg.Verify, rep)
		rep.Verification = v
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}
