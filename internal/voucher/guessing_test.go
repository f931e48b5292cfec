package voucher

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGuessLimiter(t *testing.T) {
	t.Parallel()
	l := guessLimiter{limit: 3, block: time.Minute, m: map[string]*guesser{}}
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		l.miss("1", t0.Add(time.Duration(i)*time.Second))
	}
	require.Zero(t, l.blocked("1", t0.Add(3*time.Second)), "at the limit, not past it")
	l.miss("1", t0.Add(4*time.Second))
	require.Equal(t, time.Minute, l.blocked("1", t0.Add(4*time.Second)))
	require.Zero(t, l.blocked("2", t0.Add(4*time.Second)), "other customers are not blocked")
	require.Zero(t, l.blocked("1", t0.Add(4*time.Second+time.Minute)), "the block ends")

	// A new window starts the count again.
	l.miss("3", t0)
	l.miss("3", t0)
	l.miss("3", t0)
	l.miss("3", t0.Add(time.Minute))
	require.Zero(t, l.blocked("3", t0.Add(time.Minute)))

	off := guessLimiter{limit: -1, m: map[string]*guesser{}}
	for range 100 {
		off.miss("1", t0)
	}
	require.Zero(t, off.blocked("1", t0))
	require.Empty(t, off.m)
}
