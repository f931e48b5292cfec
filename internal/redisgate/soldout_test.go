package redisgate

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

func TestSoldOutCache(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := &soldOutCache{ttl: time.Second, now: clock.Now}
	copyOf := func() map[string]string { return map[string]string{"o-1": "H|1|0|0|0|0"} }

	require.Nil(t, c.get("A"))
	epoch := c.begin("A")
	require.False(t, c.renew("A", epoch, "7"), "nothing to renew")
	require.True(t, c.startFetch("A", epoch))
	require.False(t, c.startFetch("A", epoch), "one read per code at a time")
	require.True(t, c.startFetch("B", c.begin("B")), "other codes read on their own")
	c.set("A", epoch, clock.Now(), "7", copyOf(), false)
	c.endFetch("A")
	require.NotNil(t, c.get("A"))
	require.Nil(t, c.get("B"))
	require.False(t, c.startFetch("A", epoch), "cached: nothing to read")

	clock.Add(999 * time.Millisecond)
	require.NotNil(t, c.get("A"))
	clock.Add(time.Millisecond)
	require.Nil(t, c.get("A"), "expired at the TTL")

	// The same version renews the copy for another TTL, without a read;
	// another version (or none) does not.
	require.False(t, c.renew("A", epoch, "8"))
	require.False(t, c.renew("A", epoch, ""))
	require.True(t, c.renew("A", epoch, "7"))
	e := c.get("A")
	require.NotNil(t, e)
	require.Equal(t, copyOf(), e.orders)
	clock.Add(time.Second)
	require.Nil(t, c.get("A"))
	require.True(t, c.startFetch("A", c.begin("A")), "expired: read again")
	c.endFetch("A")

	// Not beyond copyMaxAge after the read, and then the sweep drops it.
	clock.Add(copyMaxAge)
	require.False(t, c.renew("A", epoch, "7"))
	c.set("B", c.begin("B"), clock.Now(), "1", copyOf(), false)
	_, kept := c.m.Load("A")
	require.False(t, kept, "swept")

	c.set("A", c.begin("A"), clock.Now(), "7", copyOf(), false)
	c.clear("A")
	require.Nil(t, c.get("A"))
	require.False(t, c.renew("A", c.begin("A"), "7"), "a clear drops the copy")

	// A copy whose read raced with a clear is not remembered: it may
	// predate the use given back.
	epoch = c.begin("A")
	require.True(t, c.startFetch("A", epoch))
	c.clear("A")
	c.set("A", epoch, clock.Now(), "7", copyOf(), false)
	c.endFetch("A")
	require.Nil(t, c.get("A"))
	require.False(t, c.startFetch("A", epoch), "a stale epoch starts no read")

	// A clear of another code spoils nothing here (A and B do not share a
	// counter).
	require.NotSame(t, c.epoch("A"), c.epoch("B"))
	epoch = c.begin("A")
	c.clear("B")
	c.set("A", epoch, clock.Now(), "7", copyOf(), false)
	require.NotNil(t, c.get("A"))
	c.clear("A")

	// A voucher with too many orders is neither cached nor read again for
	// a while, but a clear lets it be read at once.
	epoch = c.begin("A")
	c.skipCode("A", epoch)
	require.Nil(t, c.get("A"))
	require.False(t, c.startFetch("A", epoch))
	require.True(t, c.renew("A", epoch, "7"), "skipped: nothing to do")
	clock.Add(skipRecheck)
	require.False(t, c.renew("A", epoch, "7"))
	require.True(t, c.startFetch("A", epoch))
	c.endFetch("A")
	c.skipCode("A", epoch)
	c.clear("A")
	require.True(t, c.startFetch("A", c.begin("A")))
}

func TestSoldOutCacheDisabled(t *testing.T) {
	t.Parallel()
	c := &soldOutCache{ttl: -1, now: time.Now}
	require.False(t, c.startFetch("A", c.begin("A")))
	require.True(t, c.renew("A", c.begin("A"), "1"), "nothing to do")
	c.set("A", c.begin("A"), time.Now(), "1", map[string]string{}, false)
	require.Nil(t, c.get("A"))
}

// TestSoldOutEntryDecide checks that the copy answers as reserve.lua does.
func TestSoldOutEntryDecide(t *testing.T) {
	t.Parallel()
	held := testHold("o-held", 1)
	released := testHold("o-released", 2)
	released.Released = true
	pending := testHold("o-pending", 3)
	pending.Pending = true
	big := testHoldFor("o-big", strings.Repeat("A.b_c:d-e@f+", 5)+"long")
	e := &soldOutEntry{orders: map[string]string{
		held.OrderID:     encodeHold(stateHeld, held),
		released.OrderID: encodeHold(stateReleased, released),
		pending.OrderID:  encodeHold(statePending, pending),
		big.OrderID:      encodeHold(stateHeld, big),
		"o-garbage":      "X|1|2",
	}}
	tests := []struct {
		name     string
		orderID  string
		customer string
		pending  bool // the request is a Kafka-mode (pending) one
		want     voucher.GateDecision
		redis    bool // Redis must answer
	}{
		{"unknown", "o-new", "1", false, voucher.GateDecision{Outcome: voucher.GateSoldOut}, false},
		{"replay", held.OrderID, "1", false, voucher.GateDecision{Outcome: voucher.GateReplay, Hold: held}, false},
		{"conflict", held.OrderID, "9", false, voucher.GateDecision{Outcome: voucher.GateConflict, Hold: held}, false},
		{"released", released.OrderID, "2", false, voucher.GateDecision{Outcome: voucher.GateReleased, Hold: released}, false},
		{"released, other customer", released.OrderID, "9", false, voucher.GateDecision{Outcome: voucher.GateConflict, Hold: released}, false},
		{"longest customerId", big.OrderID, big.CustomerID, false, voucher.GateDecision{Outcome: voucher.GateReplay, Hold: big}, false},
		{"pending", pending.OrderID, "3", false, voucher.GateDecision{}, true},
		{"unknown, pending request", "o-new", "1", true, voucher.GateDecision{Outcome: voucher.GateSoldOut}, false},
		{"replay, pending request", held.OrderID, "1", true, voucher.GateDecision{}, true},
		{"released, pending request", released.OrderID, "2", true, voucher.GateDecision{Outcome: voucher.GateReleased, Hold: released}, false},
		{"conflict, pending request", held.OrderID, "9", true, voucher.GateDecision{Outcome: voucher.GateConflict, Hold: held}, false},
		{"unreadable", "o-garbage", "1", false, voucher.GateDecision{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, ok := e.decide(tc.orderID, tc.customer, "", tc.pending)
			require.Equal(t, !tc.redis, ok)
			require.Equal(t, tc.want, d)
		})
	}
}
