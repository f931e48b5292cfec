package voucher

import (
	"context"
	"sync"
	"time"
)

// catalog answers what a code names: a voucher's definition, or the budget
// of the campaign a campaign code belongs to. It keeps both caches of that
// answer together: voucher definitions, briefly (the hot path of a flash
// sale must not read the database per request), and the campaign each
// campaign code resolved to (a campaign code never changes campaign nor
// becomes a voucher's code, so that entry never goes stale).
type catalog struct {
	store Store
	clock func() time.Time
	// ttl is ServiceConfig.VoucherCacheTTL (<= 0: no cache).
	ttl time.Duration
	// staleMax is how long a flash voucher's definition is served from
	// its last read while the store cannot be read (ServiceConfig.
	// StaleVoucherMax); 0 when the write mode does not go on through a
	// store outage (only Kafka mode does).
	staleMax time.Duration

	mu          sync.Mutex
	vouchers    map[string]cachedVoucher  // guarded by mu
	refreshing  map[string]chan struct{}  // codes being re-read, closed when read; guarded by mu
	campaignIDs map[string]campaignOfCode // by campaign code; guarded by mu
}

// campaignOfCode is what the catalog remembers of a campaign code: its
// campaign, and the one customer it serves when that was read with it
// (ResolveCode reads it; CodeCampaign does not).
type campaignOfCode struct {
	id           string
	customer     string
	customerRead bool
}

// cachedVoucher is one cached voucher definition.
type cachedVoucher struct {
	v       Voucher
	fetched time.Time // of the last successful read
	retry   time.Time // no read before this, after a failed one
}

// Bounds of the catalog's caches; past one, that cache starts over, so
// that requests for ever new codes cannot grow it without end.
const (
	// maxCachedVouchers bounds the voucher cache and the held-out cache.
	maxCachedVouchers = 100_000
	// maxCampaignIDs bounds the campaign codes remembered. An entry is
	// two short strings and a map slot, about 100 bytes: about 10 MB.
	maxCampaignIDs = 100_000
)

// DefaultStaleVoucherMax is the default of ServiceConfig.StaleVoucherMax.
const DefaultStaleVoucherMax = 10 * time.Minute

func newCatalog(store Store, clock func() time.Time, ttl, staleMax time.Duration) *catalog {
	return &catalog{store: store, clock: clock, ttl: ttl, staleMax: staleMax,
		vouchers: map[string]cachedVoucher{}, refreshing: map[string]chan struct{}{}, campaignIDs: map[string]campaignOfCode{}}
}

// definition returns the voucher (or campaign budget) a reservation or a
// validation of code goes by. A code in the definition cache is answered
// from it with pre nil. Any other code, known or not, is read with one
// ResolveCode (pre is then that read, of orderID's row too). Vouchers are
// cached, campaign codes never: a code someone looks up twice costs the
// same again, known or not. Only when the store cannot be read does a
// campaign code this process resolved before go by the campaign it
// resolved to, as in resolve.
func (c *catalog) definition(ctx context.Context, code, orderID string, now time.Time) (v Voucher, pre *Resolution, err error) {
	if c.cached(code) {
		v, err = c.resolve(ctx, code, now)
		return v, nil, err
	}
	res, err := c.store.ResolveCode(ctx, code, orderID)
	switch {
	case IsCode(err, CodeUnavailable):
		v, err = c.campaignAt(ctx, code, now, err, true)
		return v, nil, err
	case err != nil:
		return Voucher{}, nil, err
	case !res.Found:
		return Voucher{}, nil, Reject(CodeVoucherNotFound, "", Facts{Voucher: code})
	case res.ByCampaign:
		c.rememberCampaign(campaignOfCode{id: res.Voucher.Code, customer: res.Voucher.CustomerID, customerRead: true}, code)
	default:
		c.remember(code, res.Voucher, now)
	}
	return res.Voucher, &res, nil
}

// resolve returns the voucher code names, or the budget of the campaign
// whose code it is (whose Code is then the campaign id, not code). It
// reads the store as for a code never seen: an answer must not come faster
// for a code someone used before, which would tell a guesser that the code
// exists. Only when the store cannot be read does a code this process
// resolved before go by the campaign it resolved to (the budget's
// definition then comes from the voucher cache, which serves flash
// vouchers stale in Kafka mode: the sale goes on).
func (c *catalog) resolve(ctx context.Context, code string, now time.Time) (Voucher, error) {
	v, err := c.voucherAt(ctx, code, now)
	if IsCode(err, CodeVoucherNotFound) {
		v, err = c.campaignOf(ctx, code)
	}
	if IsCode(err, CodeUnavailable) {
		return c.campaignAt(ctx, code, now, err, false)
	}
	return v, err
}

// campaignAt answers code while the store cannot be read (unavailable):
// the budget of the campaign this process resolved code to before, serving
// the code's customer when it was read, or unavailable when the code was
// never resolved. A new reservation or validation (forEligibility) needs
// the code's customer: without it, unavailable too.
func (c *catalog) campaignAt(ctx context.Context, code string, now time.Time, unavailable error, forEligibility bool) (Voucher, error) {
	c.mu.Lock()
	e, ok := c.campaignIDs[code]
	c.mu.Unlock()
	if !ok || forEligibility && !e.customerRead {
		return Voucher{}, unavailable
	}
	v, err := c.voucherAt(ctx, e.id, now)
	v.CustomerID = e.customer
	return v, err
}

// known is resolve for the calls that act on a reservation the caller made
// (confirm, release, extension, reads, the expiry job): a code this
// process resolved before goes by its campaign without reading the store.
func (c *catalog) known(ctx context.Context, code string, now time.Time) (Voucher, error) {
	if id, ok := c.campaignID(code); ok {
		return c.voucherAt(ctx, id, now)
	}
	return c.resolve(ctx, code, now)
}

// campaignOf resolves a code that names no voucher: the budget of the
// campaign it belongs to, or CodeVoucherNotFound.
func (c *catalog) campaignOf(ctx context.Context, code string) (Voucher, error) {
	id, err := c.store.CodeCampaign(ctx, code)
	if err != nil {
		return Voucher{}, err
	}
	c.rememberCampaign(campaignOfCode{id: id}, code)
	return c.voucher(ctx, id)
}

// voucher returns the voucher definition of code, cached (voucherAt).
func (c *catalog) voucher(ctx context.Context, code string) (Voucher, error) {
	return c.voucherAt(ctx, code, c.clock())
}

// voucherAt returns the voucher definition, cached for the TTL, for a
// caller that read the clock (now) already. One caller at a time re-reads
// an expired definition; the others meanwhile use the expired one, for at
// most another TTL, and wait for that read when it is older (or there is
// none): a burst of requests after a quiet spell reads the store once, not
// once per request. While the store is unavailable, a Kafka-mode flash
// voucher is answered from its last read for up to staleMax, and the store
// is tried again once per TTL.
func (c *catalog) voucherAt(ctx context.Context, code string, now time.Time) (Voucher, error) {
	var cv cachedVoucher
	var ok bool
	for c.ttl > 0 {
		c.mu.Lock()
		cv, ok = c.vouchers[code]
		age := now.Sub(cv.fetched)
		reading := c.refreshing[code]
		switch {
		case ok && (age < c.ttl || now.Before(cv.retry) && c.servesStale(cv, now)):
			c.mu.Unlock()
			return cv.v, nil
		case ok && reading != nil && age < 2*c.ttl:
			c.mu.Unlock()
			return cv.v, nil
		case reading != nil:
			c.mu.Unlock()
			select {
			case <-reading:
			case <-ctx.Done():
				return Voucher{}, Unavailable(ctx.Err(), "voucher %s: gave up waiting for its definition", code)
			}
			continue // the read is done: look again (a failed one leaves the next read to this caller)
		}
		done := make(chan struct{})
		c.refreshing[code] = done
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			delete(c.refreshing, code)
			c.mu.Unlock()
			close(done)
		}()
		break
	}
	// Without the live counts: they read every held redemption, and a
	// reservation makes this read once a TTL.
	v, err := c.store.VoucherDefinition(ctx, code)
	if err != nil {
		if ok && IsCode(err, CodeUnavailable) && c.servesStale(cv, now) {
			cv.retry = now.Add(c.ttl)
			c.mu.Lock()
			c.vouchers[code] = cv
			c.mu.Unlock()
			return cv.v, nil
		}
		return Voucher{}, err
	}
	c.remember(code, v, now)
	return v, nil
}

// cached reports whether code has a definition in the cache, fresh or not.
func (c *catalog) cached(code string) bool {
	if c.ttl <= 0 {
		return false
	}
	c.mu.Lock()
	_, ok := c.vouchers[code]
	c.mu.Unlock()
	return ok
}

// remember caches v, read from the store at now, as code's definition.
func (c *catalog) remember(code string, v Voucher, now time.Time) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	if len(c.vouchers) > maxCachedVouchers {
		c.vouchers = map[string]cachedVoucher{}
	}
	c.vouchers[code] = cachedVoucher{v: v, fetched: now}
	c.mu.Unlock()
}

// servesStale reports whether cv may stand in for a store that cannot be
// read.
func (c *catalog) servesStale(cv cachedVoucher, now time.Time) bool {
	return c.staleMax > 0 && cv.v.FlashSale && now.Sub(cv.fetched) < c.staleMax
}

// forget drops code's cached definition after the store changed it.
func (c *catalog) forget(code string) {
	c.mu.Lock()
	delete(c.vouchers, code)
	c.mu.Unlock()
}

// rememberCampaign notes that code is a code of campaign e.id, for known
// and for resolving code while the store cannot be read; a customer read
// before is kept when e has none (a code never changes customer).
func (c *catalog) rememberCampaign(e campaignOfCode, code string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.campaignIDs) >= maxCampaignIDs {
		c.campaignIDs = make(map[string]campaignOfCode)
	}
	if old, ok := c.campaignIDs[code]; ok && old.customerRead && !e.customerRead {
		e.customer, e.customerRead = old.customer, true
	}
	c.campaignIDs[code] = e
}

// campaignID returns the campaign this process resolved code to before.
func (c *catalog) campaignID(code string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.campaignIDs[code]
	return e.id, ok
}

// codeUsed answers, from pre, a campaign code that its (fresh, eligible)
// budget would let a new order take but that another order holds, as
// voucherd_reserve_one and voucherd_validate answer it: nil when pre does
// not say so (no read, another kind of code, or an orderId with a row,
// which the store answers).
func codeUsed(code string, pre *Resolution) error {
	if pre == nil || !pre.ByCampaign || !pre.CodeHeld || pre.HasOrder {
		return nil
	}
	return Reject(CodeAlreadyUsed, ReasonCodeUsed, Facts{Voucher: code})
}
