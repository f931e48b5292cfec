package redisgate

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// TestVoidRefusesTheVoidedAttemptOnly: an attempt voided before its script
// ran takes nothing when the script arrives late, with Reserve and Replace
// alike, while another attempt of the same orderId (a retry, another
// ReservedAt) takes; Void of an attempt whose script ran returns its hold.
func TestVoidRefusesTheVoidedAttemptOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	v := testVoucher("VOIDED", 3, 2)
	loadEmpty(t, g, v)

	late := testHold("o-1", 1)
	_, found, err := g.Void(ctx, v.Code, late)
	require.NoError(t, err)
	require.False(t, found)
	_, err = g.Reserve(ctx, v.Code, 2, late)
	require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), "the voided attempt takes nothing: %v", err)
	require.False(t, errors.Is(err, voucher.ErrGateUnanswered), "Redis answered")
	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.EqualValues(t, 3, st.Remaining)

	retry := late
	retry.ReservedAt = late.ReservedAt.Add(time.Second)
	d, err := g.Reserve(ctx, v.Code, 2, retry)
	require.NoError(t, err)
	require.Equal(t, voucher.GateTaken, d.Outcome)
	// The voided attempt arriving after the retry is a replay.
	d, err = g.Reserve(ctx, v.Code, 2, late)
	require.NoError(t, err)
	require.Equal(t, voucher.GateReplay, d.Outcome)

	// Void of an attempt whose script ran returns that attempt's hold.
	ran := testHold("o-2", 2)
	_, err = g.Reserve(ctx, v.Code, 2, ran)
	require.NoError(t, err)
	stored, found, err := g.Void(ctx, v.Code, ran)
	require.NoError(t, err)
	require.True(t, found)
	require.True(t, stored.ReservedAt.Equal(ran.ReservedAt))

	// A voided replacement attempt takes nothing either.
	repl := testHold("o-3", 1)
	repl.Replaces = "o-1"
	_, found, err = g.Void(ctx, v.Code, repl)
	require.NoError(t, err)
	require.False(t, found)
	_, err = g.Replace(ctx, v.Code, repl, "o-1")
	require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), "the voided replacement takes nothing: %v", err)
	h, found, err := g.Lookup(ctx, v.Code, "o-1")
	require.NoError(t, err)
	require.True(t, found)
	require.False(t, h.Released, "the replaced order still holds its use")
}

// TestVoidKeepsEveryVoidedAttempt: several attempts of one orderId, each
// voided before its script arrives (retries on two instances while Redis
// hung, their voids and scripts reaching it in any order), all take
// nothing: voiding a later attempt does not let an earlier one through.
func TestVoidKeepsEveryVoidedAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate(t, Config{SoldOutTTL: -1})
	v := testVoucher("VOIDALL", 3, 2)
	loadEmpty(t, g, v)

	first := testHold("o-1", 1)
	second := first
	second.ReservedAt = first.ReservedAt.Add(500 * time.Millisecond)
	for _, h := range []voucher.Hold{first, second} {
		_, found, err := g.Void(ctx, v.Code, h)
		require.NoError(t, err)
		require.False(t, found)
	}
	for _, h := range []voucher.Hold{first, second} {
		_, err := g.Reserve(ctx, v.Code, 2, h)
		require.True(t, voucher.IsCode(err, voucher.CodeUnavailable), "a voided attempt takes nothing: %v", err)
	}
	st, err := g.Inspect(ctx, v.Code)
	require.NoError(t, err)
	require.EqualValues(t, 3, st.Remaining)
}

// TestTakeWithoutAnswerIsMarked: a take that times out says it may have
// run; one refused before it was sent does not.
func TestTakeWithoutAnswerIsMarked(t *testing.T) {
	t.Parallel()
	require.True(t, unanswered(context.DeadlineExceeded))
	require.False(t, unanswered(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}))
	err := interpretTakeError(context.DeadlineExceeded, "reserve", "X")
	require.True(t, errors.Is(err, voucher.ErrGateUnanswered))
	require.True(t, voucher.IsCode(err, voucher.CodeUnavailable))
}
