package pgstore_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
)

// formatCorpus returns edge cases and random strings over the characters
// the format rules allow, some they refuse and one multibyte letter, of 0
// to 70 characters.
func formatCorpus(seed uint64, n int) []string {
	out := []string{"", "a", "0", "00", "9", "-", "_", ".", ":", "@", "+", "a b", "a\n", "\na", "é", "aé",
		strings.Repeat("a", 32), strings.Repeat("a", 33), strings.Repeat("Z", 64), strings.Repeat("Z", 65),
		strings.Repeat("é", 16), strings.Repeat("é", 32), strings.Repeat("1", 19), strings.Repeat("9", 20),
		"9223372036854775807", "9223372036854775808", "1000000000000000000", "0042", "-5", "1e5", "١٢"}
	const alphabet = "aZ09._:-@+_ /\n*$^é"
	letters := []rune(alphabet)
	rng := rand.New(rand.NewPCG(seed, 14))
	for range n {
		var b strings.Builder
		for range rng.IntN(71) {
			if rng.IntN(4) == 0 {
				b.WriteRune(letters[rng.IntN(len(letters))])
			} else {
				b.WriteByte("abcXYZ0123456789"[rng.IntN(16)])
			}
		}
		out = append(out, b.String())
	}
	return out
}

// The format CHECKs say without a counted repetition what the regexes they
// replaced said (migration 014): for every string, the installed constraint
// accepts it exactly when the old regex matched. voucherd_customer_legacy
// likewise maps every string as its regex form did.
func TestFormatChecksMatchTheirRegexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.Postgres(t)
	s, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.NoError(t, s.Migrate(ctx))
	conn, err := pgx.Connect(ctx, pg.URL)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	corpus := formatCorpus(1, 5000)

	cases := []struct {
		table, constraint, column, regex string
	}{
		{"voucher", "voucher_code_format", "code", `^[A-Za-z0-9_-]{1,32}$`},
		{"campaign_code", "campaign_code_format", "code", `^[A-Za-z0-9_-]{1,32}$`},
		{"voucher_redemption", "voucher_redemption_order_id_format", "order_id", `^[A-Za-z0-9._:-]{1,64}$`},
		{"voucher_redemption", "voucher_redemption_customer_format", "customer", `^[A-Za-z0-9._:@+-]{1,64}$`},
	}
	for _, tc := range cases {
		var def string
		require.NoError(t, conn.QueryRow(ctx, `SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
			WHERE c.conrelid = $1::regclass AND c.conname = $2`, tc.table, tc.constraint).Scan(&def))
		require.NotContains(t, def, "{", "%s still has a counted repetition: %s", tc.constraint, def)
		expr := strings.TrimSuffix(strings.TrimPrefix(def, "CHECK "), " NOT VALID")
		rows, err := conn.Query(ctx, `SELECT v, v ~ $2, coalesce(`+expr+`, true)
			FROM unnest($1::text[]) AS u(v), LATERAL (SELECT v AS `+tc.column+`) AS c`, corpus, tc.regex)
		require.NoError(t, err)
		n := 0
		for rows.Next() {
			var v string
			var want, got bool
			require.NoError(t, rows.Scan(&v, &want, &got))
			require.Equal(t, want, got, "%s on %q", tc.constraint, v)
			n++
		}
		require.NoError(t, rows.Err())
		require.Equal(t, len(corpus), n)
	}

	rows, err := conn.Query(ctx, `SELECT v, CASE
			WHEN v ~ '^[1-9][0-9]{0,18}$' AND (length(v) < 19 OR v COLLATE "C" <= '9223372036854775807') THEN v::bigint
			ELSE -1 - (hashtextextended(v, 0) & 9223372036854775807) END,
		voucherd_customer_legacy(v)
		FROM unnest($1::text[]) AS u(v)`, append(corpus, formatCorpusDigits(2, 2000)...))
	require.NoError(t, err)
	for rows.Next() {
		var v string
		var want, got int64
		require.NoError(t, rows.Scan(&v, &want, &got))
		require.Equal(t, want, got, "voucherd_customer_legacy(%q)", v)
	}
	require.NoError(t, rows.Err())
}

// formatCorpusDigits returns random strings of 0 to 21 digits, a third of
// them with a leading zero.
func formatCorpusDigits(seed uint64, n int) []string {
	rng := rand.New(rand.NewPCG(seed, 14))
	out := make([]string, 0, n)
	for range n {
		var b strings.Builder
		if rng.IntN(3) == 0 {
			b.WriteByte('0')
		}
		for range rng.IntN(21) {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		out = append(out, b.String())
	}
	return out
}
