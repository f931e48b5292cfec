package redisgate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// laterField is a field a later release appends to a hold, after the
// ones this release knows.
const laterField = "|later-1"

// TestHoldKeepsALaterReleasesFields: during a rolling upgrade instances of
// this release share the gate with a later release's, which may write
// holds with more fields than this one knows. Every script of this release
// that rewrites a hold (commit, confirm, extend, release, replace,
// unreplace) keeps them, and every read decodes such a hold as if they
// were not there.
func TestHoldKeepsALaterReleasesFields(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{})
	v := testVoucher("LATER", 10, 5)
	loadEmpty(t, g, v)
	c := rawClient(t, g)
	k := keysFor(g.cfg.KeyPrefix, v.Code)
	raw := func(orderID string) string {
		t.Helper()
		s, err := c.Do(ctx, c.B().Hget().Key(k.orders).Field(orderID).Build()).ToString()
		require.NoError(t, err)
		return s
	}
	// reserve takes a use for orderID and appends the later field to its hold.
	reserve := func(orderID string, pending bool) voucher.Hold {
		t.Helper()
		h := testHold(orderID, 7)
		h.Pending = pending
		dec, err := g.Reserve(ctx, v.Code, v.PerUserLimit, h)
		require.NoError(t, err)
		require.Equal(t, voucher.GateTaken, dec.Outcome)
		s := raw(orderID)
		s += strings.Repeat("|", holdFields-len(strings.Split(s, "|"))) + laterField
		require.NoError(t, c.Do(ctx, c.B().Hset().Key(k.orders).FieldValue().FieldValue(orderID, s).Build()).Error())
		return h
	}
	// kept checks that orderID's hold is in state and still has the field.
	kept := func(orderID string, state byte) {
		t.Helper()
		s := raw(orderID)
		require.Equal(t, state, s[0], s)
		require.True(t, strings.HasSuffix(s, laterField), s)
		got, found, err := g.Lookup(ctx, v.Code, orderID)
		require.NoError(t, err)
		require.True(t, found)
		want, err := decodeHold(orderID, strings.TrimRight(strings.TrimSuffix(s, laterField), "|"))
		require.NoError(t, err)
		require.Equal(t, want, got)
	}

	pending := reserve("o-commit", true)
	kept("o-commit", statePending)
	committed, err := g.Commit(ctx, v.Code, pending)
	require.NoError(t, err)
	require.True(t, committed)
	kept("o-commit", stateHeld)
	extended, err := g.Extend(ctx, v.Code, "o-commit", time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.True(t, extended)
	kept("o-commit", stateHeld)
	_, err = g.Confirm(ctx, v.Code, "o-commit", "")
	require.NoError(t, err)
	kept("o-commit", stateConfirmed)

	reserve("o-release", false)
	released, err := g.Release(ctx, v.Code, "o-release", voucher.ReleaseMark)
	require.NoError(t, err)
	require.True(t, released)
	kept("o-release", stateReleased)

	reserve("o-replaced", false)
	dec, err := g.Replace(ctx, v.Code, testHold("o-new", 7), "o-replaced")
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, dec.Outcome)
	kept("o-replaced", stateReleased)
	undone, err := g.Unreplace(ctx, v.Code, "o-new", "o-replaced")
	require.NoError(t, err)
	require.True(t, undone)
	kept("o-replaced", stateHeld)

	var holds []voucher.Hold
	for cursor := uint64(0); ; {
		page, next, err := g.ScanOrders(ctx, v.Code, cursor)
		require.NoError(t, err)
		holds = append(holds, page...)
		if cursor = next; cursor == 0 {
			break
		}
	}
	require.Len(t, holds, 3, "every hold read, the replacement's undone")
	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.Equal(t, int64(8), st.Remaining, "two uses held: o-commit and o-replaced")
}
