package main

import (
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
)

// clusterMasters returns a function giving the port of the master that
// serves the slot of a code's keys (their hash tag is {code}) in cluster.
func clusterMasters(t *testing.T, cluster *testenv.RedisCluster) func(code string) int64 {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cluster.Addrs, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	slots, err := rc.Do(t.Context(), rc.B().ClusterSlots().Build()).ToArray()
	require.NoError(t, err)
	return func(code string) int64 {
		slot, err := rc.Do(t.Context(), rc.B().ClusterKeyslot().Key("{"+code+"}").Build()).AsInt64()
		require.NoError(t, err)
		for _, r := range slots {
			rng, err := r.ToArray()
			require.NoError(t, err)
			lo, _ := rng[0].AsInt64()
			hi, _ := rng[1].AsInt64()
			if slot >= lo && slot <= hi {
				node, err := rng[2].ToArray()
				require.NoError(t, err)
				port, err := node[1].AsInt64()
				require.NoError(t, err)
				return port
			}
		}
		t.Fatalf("no master serves slot %d", slot)
		return 0
	}
}

// TestStackReplacementRaceRedisCluster is TestStackReplacementRace in
// flash-sync mode on a Redis Cluster of three masters, with X, Y and Z
// each on another master than H: the kept use of H moves in one script on
// its master while the other codes are taken and given back on theirs.
func TestStackReplacementRaceRedisCluster(t *testing.T) {
	t.Parallel()
	cluster := testenv.NewRedisCluster(t)
	s := newStack(t, stackOptions{flash: true, redisAddrs: cluster.Addrs, tweak: raceWrites})
	masterOf := clusterMasters(t, cluster)
	h := s.createStackable(map[string]any{"discountAmount": 100}, 30, stackable)
	// awayFrom creates a code of the given limit on another master than H.
	awayFrom := func(limit int) string {
		t.Helper()
		for range 100 {
			c := s.createStackable(map[string]any{"discountAmount": 100}, limit, stackable)
			if masterOf(c) != masterOf(h) {
				return c
			}
		}
		t.Fatalf("no code on another master than %s", h)
		return ""
	}
	runStackReplacementRace(t, s, h, awayFrom(1000), awayFrom(1000), awayFrom(5))
}
