package redisgate

import (
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// TestClaimOrder: the one-command claim (SET NX GET) and claim.lua, the
// fallback for a Redis older than 7.0, decide alike: the first claim of an
// orderId sets its owner and its expiry, a repeat or another code's claim
// finds that owner and changes nothing, an unclaim by the owner frees it.
func TestClaimOrder(t *testing.T) {
	t.Parallel()
	for _, scriptOnly := range []bool{false, true} {
		name := map[bool]string{false: "command", true: "script"}[scriptOnly]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g := newGate(t, Config{})
			g.claims.scriptOnly.Store(scriptOnly)
			ctx := t.Context()
			until := time.Now().Add(time.Hour).Truncate(time.Millisecond)

			owner, err := g.ClaimOrder(ctx, "o-1", "A", until)
			require.NoError(t, err)
			require.Equal(t, "A", owner, "the first claim is ours")
			client, err := g.conn()
			require.NoError(t, err)
			at, err := client.Do(ctx, client.B().Pexpiretime().Key(g.orderKey("o-1")).Build()).AsInt64()
			require.NoError(t, err)
			require.Equal(t, until.UnixMilli(), at, "the claim lives until the time asked")

			owner, err = g.ClaimOrder(ctx, "o-1", "A", until.Add(time.Hour))
			require.NoError(t, err)
			require.Equal(t, "A", owner, "a repeat finds its own claim")
			owner, err = g.ClaimOrder(ctx, "o-1", "B", until.Add(time.Hour))
			require.NoError(t, err)
			require.Equal(t, "A", owner, "another code finds the owner")
			at, err = client.Do(ctx, client.B().Pexpiretime().Key(g.orderKey("o-1")).Build()).AsInt64()
			require.NoError(t, err)
			require.Equal(t, until.UnixMilli(), at, "a claim that finds an owner leaves its expiry alone")

			require.NoError(t, g.UnclaimOrder(ctx, "o-1", "B"))
			owner, err = g.ClaimOrder(ctx, "o-1", "B", until)
			require.NoError(t, err)
			require.Equal(t, "A", owner, "only the owner's unclaim drops the claim")
			require.NoError(t, g.UnclaimOrder(ctx, "o-1", "A"))
			owner, err = g.ClaimOrder(ctx, "o-1", "B", until)
			require.NoError(t, err)
			require.Equal(t, "B", owner, "a dropped claim may be taken again")

			rec := voucher.StackRecord{OrderID: "st-1", CustomerID: "7", OrderAmount: 100, Codes: []string{"A", "B"},
				At: time.Now().UTC().Truncate(time.Millisecond)}
			got, err := g.ClaimStack(ctx, "st-1", rec, until)
			require.NoError(t, err)
			require.Equal(t, &rec, got.Stack)
			owner, err = g.ClaimOrder(ctx, "st-1", "A", until)
			require.NoError(t, err)
			require.Empty(t, owner, "a stack's claim names no voucher")
			require.Equal(t, scriptOnly, g.claims.scriptOnly.Load(), "a Redis that knows SET NX GET keeps the command")
		})
	}
}

// TestIsSyntaxError: the error a Redis gives for arguments it does not
// accept is what turns the gate to claim.lua, and no other error is.
func TestIsSyntaxError(t *testing.T) {
	t.Parallel()
	g := newGate(t, Config{})
	client, err := g.conn()
	require.NoError(t, err)
	ctx := t.Context()
	key := g.orderKey("syntax")
	// NX with XX is refused by every Redis version.
	err = client.Do(ctx, client.B().Arbitrary("SET").Keys(key).Args("v", "NX", "XX").Build()).Error()
	require.Error(t, err)
	require.True(t, isSyntaxError(err), "%v", err)
	require.NoError(t, client.Do(ctx, client.B().Hset().Key(key).FieldValue().FieldValue("f", "v").Build()).Error())
	err = client.Do(ctx, client.B().Get().Key(key).Build()).Error()
	require.Error(t, err)
	require.False(t, isSyntaxError(err), "WRONGTYPE is not a syntax error: %v", err)
	require.False(t, isSyntaxError(rueidis.Nil))
}
