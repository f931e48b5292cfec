package redisgate

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Instance liveness. Each voucherd instance writes a beat key of its own
// with a TTL and registers its id in one set; a hold records the id of the
// instance that took it (hold.go), so that reconciliation can tell a hold
// whose writer is gone from one whose write may still be running.

// beatKey is an instance's beat key; the id is its own hash tag.
func (g *Gate) beatKey(instance string) string {
	return g.cfg.KeyPrefix + "instance:{" + instance + "}"
}

// instancesKey is the set of registered instance ids.
func (g *Gate) instancesKey() string { return g.cfg.KeyPrefix + "instances" }

// Beat records that instance is alive for ttl and registers it.
func (g *Gate) Beat(ctx context.Context, instance string, ttl time.Duration) error {
	client, err := g.conn()
	if err != nil {
		return interpretError(err, "beat", "")
	}
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	now := strconv.FormatInt(g.cfg.Clock().UnixMilli(), 10)
	for _, r := range client.DoMulti(ctx,
		client.B().Set().Key(g.beatKey(instance)).Value(now).Px(ttl).Build(),
		client.B().Sadd().Key(g.instancesKey()).Member(instance).Build(),
	) {
		if err := r.Error(); err != nil {
			return interpretError(err, "beat", "")
		}
	}
	return nil
}

// Alive reports, for each of instances, whether its beat is live.
func (g *Gate) Alive(ctx context.Context, instances []string) (map[string]bool, error) {
	out := make(map[string]bool, len(instances))
	if len(instances) == 0 {
		return out, nil
	}
	client, err := g.conn()
	if err != nil {
		return nil, interpretError(err, "alive", "")
	}
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	cmds := make(rueidis.Commands, len(instances))
	for i, id := range instances {
		cmds[i] = client.B().Exists().Key(g.beatKey(id)).Build()
	}
	for i, r := range client.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		if err != nil {
			return nil, interpretError(err, "alive", "")
		}
		out[instances[i]] = n == 1
	}
	return out, nil
}

// DeadInstances returns the registered instances whose beat has expired.
func (g *Gate) DeadInstances(ctx context.Context) ([]string, error) {
	client, err := g.conn()
	if err != nil {
		return nil, interpretError(err, "instances", "")
	}
	rctx, cancel := g.withTimeout(ctx)
	ids, err := client.Do(rctx, client.B().Smembers().Key(g.instancesKey()).Build()).AsStrSlice()
	cancel()
	if err != nil {
		return nil, interpretError(err, "instances", "")
	}
	alive, err := g.Alive(ctx, ids)
	if err != nil {
		return nil, err
	}
	var dead []string
	for _, id := range ids {
		if !alive[id] {
			dead = append(dead, id)
		}
	}
	return dead, nil
}

// ForgetInstance removes instance from the registry.
func (g *Gate) ForgetInstance(ctx context.Context, instance string) error {
	client, err := g.conn()
	if err != nil {
		return interpretError(err, "instances", "")
	}
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	if err := client.Do(ctx, client.B().Srem().Key(g.instancesKey()).Member(instance).Build()).Error(); err != nil {
		return interpretError(err, "instances", "")
	}
	return nil
}
