package redisgate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSoldOutCache(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := &soldOutCache{ttl: time.Second, now: clock.Now}

	require.False(t, c.hit("A"))
	c.mark("A", c.begin())
	require.True(t, c.hit("A"))
	require.False(t, c.hit("B"))
	clock.Add(999 * time.Millisecond)
	require.True(t, c.hit("A"))
	clock.Add(time.Millisecond)
	require.False(t, c.hit("A"), "expired at the TTL")
	require.EqualValues(t, 2, c.hits.Load())

	c.mark("A", c.begin())
	c.clear("A")
	require.False(t, c.hit("A"))

	// A sold-out answer that raced with a clear is not remembered: it may
	// predate the use given back.
	epoch := c.begin()
	c.clear("A")
	c.mark("A", epoch)
	require.False(t, c.hit("A"))
}

func TestSoldOutCacheDisabled(t *testing.T) {
	t.Parallel()
	c := &soldOutCache{ttl: -1, now: time.Now}
	c.mark("A", c.begin())
	require.False(t, c.hit("A"))
}
