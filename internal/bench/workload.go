package bench

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// retryWindow is how many recent orders a retry may pick from. Retries in
// real traffic resend recent requests, and a bounded window keeps memory flat
// on long runs.
const retryWindow = 1 << 20

// job is one request to send.
type job struct {
	// sched is the open-loop send time latency is measured from; zero in a
	// closed loop.
	sched time.Time
	order order
	kind  jobKind
}

// order identifies one reservation attempt: the orderId is the run's prefix
// and seq, sent for customer on voucher number voucher.
type order struct {
	seq      int64
	customer int64
	voucher  int32
}

type jobKind uint8

const (
	kindNew    jobKind = iota // a customer not seen yet (or any, once all were seen)
	kindRepeat                // an already-seen customer, new orderId
	kindRetry                 // an earlier orderId resent
)

// generator produces the workload. It is used by the one dispatching
// goroutine, so the sequence depends only on the seed.
type generator struct {
	rng         *rand.Rand
	retryShare  float64
	repeatShare float64
	customers   int64
	vouchers    int
	hotShare    float64
	seen        int64 // customers 1..seen have sent a request
	orders      int64 // orderIds issued so far
	recent      []order
}

func newGenerator(cfg Config) *generator {
	return &generator{
		rng:         rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		retryShare:  cfg.RetryShare,
		repeatShare: cfg.RepeatShare,
		customers:   cfg.Customers,
		vouchers:    cfg.Vouchers,
		hotShare:    cfg.HotShare,
	}
}

func (g *generator) next() job {
	u := g.rng.Float64()
	if u < g.retryShare && g.orders > 0 {
		o := g.recent[g.rng.IntN(len(g.recent))]
		return job{order: o, kind: kindRetry}
	}
	var cust int64
	kind := kindNew
	switch {
	case u < g.retryShare+g.repeatShare && g.seen > 0:
		cust, kind = 1+g.rng.Int64N(g.seen), kindRepeat
	case g.seen < g.customers:
		g.seen++
		cust = g.seen
	default:
		cust, kind = 1+g.rng.Int64N(g.customers), kindRepeat
	}
	o := order{seq: g.orders, customer: cust}
	switch {
	case g.hotShare == 0:
		o.voucher = int32(g.rng.IntN(g.vouchers)) //nolint:gosec // G115: Config.withDefaults bounds Vouchers to maxVouchers
	case g.rng.Float64() < g.hotShare:
		o.voucher = 0
	default:
		o.voucher = 1 + int32(g.rng.IntN(g.vouchers-1)) //nolint:gosec // G115: Config.withDefaults bounds Vouchers to maxVouchers
	}
	if len(g.recent) < retryWindow {
		g.recent = append(g.recent, o)
	} else {
		g.recent[g.orders%retryWindow] = o
	}
	g.orders++
	return job{order: o, kind: kind}
}

// customerPrefix starts customer n's id when Config.StringCustomerIDs is set.
const customerPrefix = "cus-"

// customerID is customer n's id as the server stores it.
func (c Config) customerID(n int64) string {
	if c.StringCustomerIDs {
		return customerPrefix + strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(n, 10)
}
