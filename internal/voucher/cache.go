package voucher

import (
	"context"
	"time"
)

// cachedVoucher is one cached voucher definition; guarded by Service.mu.
type cachedVoucher struct {
	v       Voucher
	fetched time.Time // of the last successful read
	retry   time.Time // no read before this, after a failed one
}

// maxCachedVouchers bounds the voucher cache and the held-out cache; past
// it a cache starts over, so that requests for ever new codes cannot grow
// it without end.
const maxCachedVouchers = 100_000

// DefaultStaleVoucherMax is the default of ServiceConfig.StaleVoucherMax.
const DefaultStaleVoucherMax = 10 * time.Minute

// cachedVoucher returns the voucher definition, cached briefly: the hot path
// of a flash sale must not read the database per request. One caller at a
// time re-reads an expired definition; the others meanwhile use the expired
// one, for at most another VoucherCacheTTL. While the store is unavailable,
// a Kafka-mode flash voucher is answered from its last read for up to
// StaleVoucherMax, and the store is tried again once per VoucherCacheTTL.
func (s *Service) cachedVoucher(ctx context.Context, code string) (Voucher, error) {
	return s.cachedVoucherAt(ctx, code, s.cfg.Clock())
}

// cachedVoucherAt is cachedVoucher for a caller that read the clock (now)
// already.
func (s *Service) cachedVoucherAt(ctx context.Context, code string, now time.Time) (Voucher, error) {
	var c cachedVoucher
	var ok bool
	if s.cfg.VoucherCacheTTL > 0 {
		s.mu.Lock()
		c, ok = s.cache[code]
		age := now.Sub(c.fetched)
		switch {
		case ok && (age < s.cfg.VoucherCacheTTL || now.Before(c.retry) && s.servesStale(c, now)):
			s.mu.Unlock()
			return c.v, nil
		case ok && s.refreshing[code] && age < 2*s.cfg.VoucherCacheTTL:
			s.mu.Unlock()
			return c.v, nil
		}
		s.refreshing[code] = true
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.refreshing, code)
			s.mu.Unlock()
		}()
	}
	v, err := s.store.Voucher(ctx, code)
	if err != nil {
		if ok && IsCode(err, CodeUnavailable) && s.servesStale(c, now) {
			c.retry = now.Add(s.cfg.VoucherCacheTTL)
			s.mu.Lock()
			s.cache[code] = c
			s.mu.Unlock()
			return c.v, nil
		}
		return Voucher{}, err
	}
	s.remember(code, v, now)
	return v, nil
}

// cached reports whether code has a definition in the cache, fresh or not.
func (s *Service) cached(code string) bool {
	if s.cfg.VoucherCacheTTL <= 0 {
		return false
	}
	s.mu.Lock()
	_, ok := s.cache[code]
	s.mu.Unlock()
	return ok
}

// remember caches v, read from the store at now, as code's definition.
func (s *Service) remember(code string, v Voucher, now time.Time) {
	if s.cfg.VoucherCacheTTL <= 0 {
		return
	}
	s.mu.Lock()
	if len(s.cache) > maxCachedVouchers {
		s.cache = map[string]cachedVoucher{}
	}
	s.cache[code] = cachedVoucher{v: v, fetched: now}
	s.mu.Unlock()
}

// servesStale reports whether c may stand in for a store that cannot be read.
func (s *Service) servesStale(c cachedVoucher, now time.Time) bool {
	return s.cfg.FlashWrites == FlashKafka && c.v.FlashSale && now.Sub(c.fetched) < s.cfg.StaleVoucherMax
}

// forget drops code's cached definition after the store changed it.
func (s *Service) forget(code string) {
	s.mu.Lock()
	delete(s.cache, code)
	s.mu.Unlock()
}
