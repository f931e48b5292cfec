package voucher

import (
	"context"
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
	// guessWindow is the window UnknownCodeLimit counts in.
	guessWindow = time.Minute
	// maxGuessers bounds the customers the limiter tracks; past it the
	// entries whose window ended and that are not blocked are dropped,
	// and if none is, new customers are not tracked until one is.
	maxGuessers = 100_000
)

// GuessObserver is an optional extension of Observer: a reservation or a
// validation of a code that does not exist (keyName is the API key's name,
// ActorOf), and a request refused because its customer looked up too many
// of them.
type GuessObserver interface {
	UnknownCode(keyName string)
	GuessBlocked(keyName string)
}

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
			l.sweep(now)
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

// guessCheck refuses a request of a customer blocked for guessing codes:
// CodeTooManyRequests with the time left, decided in memory.
func (s *Service) guessCheck(ctx context.Context, customer string) error {
	d := s.guess.blocked(customer, s.cfg.Clock())
	if d <= 0 {
		return nil
	}
	if o, ok := s.obs.(GuessObserver); ok {
		o.GuessBlocked(ActorOf(ctx))
	}
	return &Error{Code: CodeTooManyRequests, RetryAfter: (d + time.Second - 1) / time.Second * time.Second,
		Message: "too many look-ups of unknown voucher codes by this customer; retry later"}
}

// guessNoted counts err against customer when it says the code does not
// exist.
func (s *Service) guessNoted(ctx context.Context, customer string, err error) {
	if !IsCode(err, CodeVoucherNotFound) {
		return
	}
	s.guess.miss(customer, s.cfg.Clock())
	if o, ok := s.obs.(GuessObserver); ok {
		o.UnknownCode(ActorOf(ctx))
	}
}
