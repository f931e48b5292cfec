package voucher

import (
	"strings"
	"sync"
	"time"
)

// Defaults of the code-guessing limit.
const (
	// DefaultUnknownCodeLimit is the default of
	// ServiceConfig.UnknownCodeLimit: look-ups of unknown codes per
	// customer per minute.
	DefaultUnknownCodeLimit = 20
	// DefaultUnknownCodeBlock is the default of
	// ServiceConfig.UnknownCodeBlock.
	DefaultUnknownCodeBlock = time.Minute
	// DefaultUnknownCodeLimitPerClient is the default of
	// ServiceConfig.UnknownCodeLimitPerClient: look-ups of unknown codes
	// per client address per minute, whatever the customerIds.
	DefaultUnknownCodeLimitPerClient = 300
	// DefaultUnknownCodeLimitPerKey is the default of
	// ServiceConfig.UnknownCodeLimitPerKey: per API key per minute.
	DefaultUnknownCodeLimitPerKey = 3000
	// guessWindow is the window UnknownCodeLimit counts in.
	guessWindow = time.Minute
	// maxGuessers bounds the customers the limiter tracks; past it the
	// entries whose window ended and that are not blocked are dropped,
	// and if none is, new customers are not tracked until one is.
	maxGuessers = 100_000
)

// guessLimiter counts, per customer, look-ups of codes that do not exist in
// fixed one-minute windows; a customer past the limit is blocked for the
// block duration. State is per process: with several instances behind a
// load balancer a customer may look up about limit times the number of
// instances before every instance blocks it.
type guessLimiter struct {
	limit int
	block time.Duration

	mu sync.Mutex
	m  map[string]*guesser
	// swept is when the full map was last swept: at most once a second,
	// so that a flood of new customers costs each of them a map insert,
	// not a walk over maxGuessers entries.
	swept time.Time
}

type guesser struct {
	windowStart  time.Time
	misses       int
	blockedUntil time.Time
}

// blocked returns how long customer stays blocked at now, 0 when not.
func (l *guessLimiter) blocked(customer string, now time.Time) time.Duration {
	if l.limit <= 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.m[customer]
	if g == nil || !now.Before(g.blockedUntil) {
		return 0
	}
	return g.blockedUntil.Sub(now)
}

// miss counts a look-up of an unknown code by customer at now.
func (l *guessLimiter) miss(customer string, now time.Time) {
	if l.limit <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.m[customer]
	if g == nil {
		if len(l.m) >= maxGuessers {
			if now.Sub(l.swept) >= time.Second {
				l.swept = now
				l.sweep(now)
			}
			if len(l.m) >= maxGuessers {
				return
			}
		}
		g = &guesser{windowStart: now}
		l.m[customer] = g
	}
	if now.Sub(g.windowStart) >= guessWindow {
		g.windowStart, g.misses = now, 0
	}
	g.misses++
	if g.misses > l.limit {
		g.blockedUntil = now.Add(l.block)
	}
}

// sweep drops the entries that no longer count anything; l.mu is held.
func (l *guessLimiter) sweep(now time.Time) {
	for c, g := range l.m {
		if now.Sub(g.windowStart) >= guessWindow && !now.Before(g.blockedUntil) {
			delete(l.m, c)
		}
	}
}

// guessKey is the id the guess limiter counts customer under: an id that
// looks like an e-mail address (it has an `@`) in its NormalizeEmailAddress
// form, whatever the voucher's normalisation (an unknown code has none), so
// that `Jane+1@x.com` and `jane+2@x.com` are one guesser; any other id as
// it is. For limiting only: nothing stores or answers this form.
func guessKey(customer string) string {
	if strings.IndexByte(customer, '@') < 0 {
		return customer
	}
	return NormalizeEmailAddress(customer)
}

// guessCheck refuses a request of a customer, client address or API key
// blocked for guessing codes: CodeTooManyRequests with the time left,
// decided in memory.
func (s *Service) guessCheck(customer string, who Requester) error {
	now := s.cfg.Clock()
	d, by := s.guess.blocked(guessKey(customer), now), "customer"
	if d <= 0 && who.Client != "" {
		d, by = s.guessByClient.blocked(who.Client, now), "client address"
	}
	if d <= 0 && who.Key != "" {
		d, by = s.guessByKey.blocked(who.Key, now), "API key"
	}
	if d <= 0 {
		return nil
	}
	return &Error{Code: CodeTooManyRequests, RetryAfter: (d + time.Second - 1) / time.Second * time.Second,
		Message: "too many look-ups of unknown voucher codes by this " + by + "; retry later"}
}

// guessNoted counts err against customer, and the client address and key
// of who, when it says the code does not exist.
func (s *Service) guessNoted(customer string, who Requester, err error) {
	if !IsCode(err, CodeVoucherNotFound) {
		return
	}
	now := s.cfg.Clock()
	s.guess.miss(guessKey(customer), now)
	if who.Client != "" {
		s.guessByClient.miss(who.Client, now)
	}
	if who.Key != "" {
		s.guessByKey.miss(who.Key, now)
	}
}
