package redisgate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testPrefix is a key prefix of its own for one test on a shared Redis.
func testPrefix(tb testing.TB) string {
	var b [6]byte
	_, err := rand.Read(b[:])
	require.NoError(tb, err)
	return "test:" + hex.EncodeToString(b[:]) + ":"
}

// newGate opens a Gate on addrs (the shared Redis when none) with its own key
// prefix, closed at cleanup. cfg may set anything but Addrs and KeyPrefix.
func newGate(tb testing.TB, cfg Config, addrs ...string) *Gate {
	tb.Helper()
	if len(addrs) == 0 {
		addrs = []string{testenv.Redis(tb).Addr}
	}
	cfg.Addrs = addrs
	cfg.KeyPrefix = testPrefix(tb)
	g, err := New(cfg)
	require.NoError(tb, err)
	tb.Cleanup(g.Close)
	return g
}

// testVoucher is a flash voucher running now, ending in a day.
func testVoucher(code string, total, perUser int32) voucher.Voucher {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return voucher.Voucher{
		Code: code, DiscountAmount: 100000, TotalLimit: total, PerUserLimit: perUser,
		StartsAt: now.Add(-time.Hour), EndsAt: now.Add(24 * time.Hour), FlashSale: true,
	}
}

// loadEmpty loads a voucher with no redemptions.
func loadEmpty(tb testing.TB, g *Gate, v voucher.Voucher) {
	tb.Helper()
	wrote, err := g.Load(context.Background(), voucher.Snapshot{Voucher: v})
	require.NoError(tb, err)
	require.True(tb, wrote)
}

// testHold is the hold a customer asks for with an orderId.
func testHold(orderID string, customer int64) voucher.Hold {
	return testHoldFor(orderID, strconv.FormatInt(customer, 10))
}

// testHoldFor is testHold for any customerId.
func testHoldFor(orderID, customer string) voucher.Hold {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return voucher.Hold{
		OrderID: orderID, CustomerID: customer, OrderAmount: 250000, DiscountAmount: 100000,
		ReservedAt: now, ExpiresAt: now.Add(15 * time.Minute),
	}
}

func orderID(i int) string { return "order-" + strconv.Itoa(i) }

// rawClient returns the gate's Redis client; the gate must be connected.
func rawClient(tb testing.TB, g *Gate) rueidis.Client {
	tb.Helper()
	c, err := g.conn()
	require.NoError(tb, err)
	return c
}

// rawTTL returns the PTTL of a key as Redis reports it (-2 absent, -1 none).
func rawTTL(tb testing.TB, g *Gate, key string) time.Duration {
	tb.Helper()
	c := rawClient(tb, g)
	ms, err := c.Do(context.Background(), c.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(tb, err)
	if ms < 0 {
		return time.Duration(ms)
	}
	return time.Duration(ms) * time.Millisecond
}

// rawExists counts the keys of a voucher that exist.
func rawExists(tb testing.TB, g *Gate, code string) int64 {
	tb.Helper()
	c := rawClient(tb, g)
	n, err := c.Do(context.Background(), c.B().Exists().Key(keysFor(g.cfg.KeyPrefix, code).all()...).Build()).AsInt64()
	require.NoError(tb, err)
	return n
}
