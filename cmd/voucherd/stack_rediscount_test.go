package main

import (
	"net/http"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/redisgate"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// TestStackRediscount: in flash-sync mode the gate's budget of B has
// drifted (6,000 more held than PostgreSQL holds), so the gate clips B's
// member of a stack to the 1,000 it sees left while the store gives the
// full 3,000. The member's gate hold then records the store's 3,000,
// still holding its use, and the gate's budget counts it.
func TestStackRediscount(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	redis := testenv.NewRedis(t)
	s := newStack(t, stackOptions{flash: true, redisAddrs: []string{redis.Addr}})
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redis.Addr}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)

	a := s.createStackableAs("A", map[string]any{"discountAmount": 1000}, 10, stackable)
	b := s.createStackableAs("B", map[string]any{"discountAmount": 3000, "budgetAmount": 10_000, "budgetShortfall": "clip"}, 10, stackable)
	r := s.reserve(b, 1, "rd-single", 20000)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	budget := redisgate.BudgetKey(s.cfg.RedisKeyPrefix, b)
	require.NoError(t, rc.Do(ctx, rc.B().Hincrby().Key(budget).Field("held").Increment(6_000).Build()).Error())

	r = s.reserveStack("7", "rd-stack", 20000, a, b)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	require.Equal(t, int64(3000), r.items()[b], "the store's discount: %s", r.raw)
	h, found, err := s.app.gate.Lookup(ctx, b, voucher.StackMemberOrderID("rd-stack", 2))
	require.NoError(t, err)
	require.True(t, found && !h.Released, "the member holds its use: %+v", h)
	require.Equal(t, int64(3000), h.DiscountAmount, "the gate's hold records the store's discount")
	held, err := rc.Do(ctx, rc.B().Hget().Key(budget).Field("held").Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(3000+6000+3000), held, "the drift stays; the member counts its 3,000")
	require.Equal(t, int64(8), s.gateRemaining(b))
}
