package pgstore_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// newProxiedStore returns a migrated store that reaches its database through
// a proxy that can cut answers.
func newProxiedStore(t *testing.T, combining pgstore.CombinerConfig) (*pgstore.Store, *testenv.Proxy) {
	t.Helper()
	ctx := context.Background()
	pg := testenv.Postgres(t)
	direct, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(direct.Close)
	require.NoError(t, direct.Migrate(ctx))
	host := direct.Pool().Config().ConnConfig
	proxy := testenv.NewProxy(t, net.JoinHostPort(host.Host, strconv.Itoa(int(host.Port))))
	s, err := pgstore.Open(ctx, pgstore.Config{URL: proxy.URL(t, pg.URL), MaxConns: 10, Combining: combining})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	t.Cleanup(func() { checkAllConsistent(t, s) })
	return s, proxy
}

// TestLostCommitReplyIsOutcomeUnknown: a reservation whose transaction
// committed but whose answer was lost is answered CodeUnavailable with
// OutcomeUnknown, alone or in a combined batch, and a retry with the same
// orderId settles it: the row is there, the retry is a replay.
func TestLostCommitReplyIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range combinings {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, proxy := newProxiedStore(t, c.cfg)
			v := newVoucher(t, s, "LOST1", 10, 1)

			cut := proxy.CutAnswerContaining([]byte("lost-one"), 300*time.Millisecond)
			_, err := s.Reserve(ctx, request(v.Code, 1, "lost-one"), now, ttl)
			testenv.WaitCut(t, cut)
			e := requireCode(t, err, voucher.CodeUnavailable)
			require.True(t, e.OutcomeUnknown, "the COMMIT's reply was lost: %v", err)
			row, err := s.Redemption(ctx, v.Code, "lost-one")
			require.NoError(t, err, "the transaction committed")
			require.Equal(t, voucher.StatusReserved, row.Status)
			res, err := s.Reserve(ctx, request(v.Code, 1, "lost-one"), now, ttl)
			require.NoError(t, err)
			require.True(t, res.Replay, "the retry finds the row")
			require.EqualValues(t, 1, readCounts(t, s, v.Code).UsedCount)
		})
	}
	t.Run("combined batch", func(t *testing.T) {
		t.Parallel()
		s, proxy := newProxiedStore(t, pgstore.CombinerConfig{})
		v := newVoucher(t, s, "LOST2", 10, 1)
		h := newHolder(s)
		// The first write is held while three more queue behind it; the
		// batch of three loses its answer after its COMMIT.
		cut := proxy.CutAnswerContaining([]byte("batch-c"), 300*time.Millisecond)
		elems := []elem{el(1, "batch-a"), el(2, "batch-b"), el(3, "batch-c"), el(4, "batch-d")}
		answers := reserveTogether(t, s, h, v.Code, now, elems)
		testenv.WaitCut(t, cut)
		require.Equal(t, "ok", answers[0].short())
		for i, e := range elems[1:] {
			a := answers[i+1]
			require.Equal(t, voucher.CodeUnavailable, a.Code, "%s: %s", e.order, a.short())
			require.True(t, a.OutcomeUnknown, "%s: the batch's COMMIT reply was lost", e.order)
		}
		for _, e := range elems {
			res, err := s.Reserve(ctx, e.request(v.Code), now, ttl)
			require.NoError(t, err)
			require.True(t, res.Replay, "%s: the batch committed; the retry is a replay", e.order)
		}
		require.EqualValues(t, 4, readCounts(t, s, v.Code).UsedCount)
	})
}
