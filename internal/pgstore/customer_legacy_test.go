package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
)

// voucherd_customer_legacy maps a customerId to the bigint the previous
// release reads, and is inlined into the statements that write rows: a call
// that is not inlined runs through the SQL-function executor once per row
// and cost a batch of 25 reservations about an eighth of its time.
func TestCustomerLegacy(t *testing.T) {
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

	cases := []struct {
		customer *string
		positive bool  // the id itself, as the previous release wrote it
		want     int64 // when positive
	}{
		{customer: ptr("42"), positive: true, want: 42},
		{customer: ptr("9223372036854775807"), positive: true, want: 9223372036854775807},
		{customer: ptr("1000000000000000000"), positive: true, want: 1000000000000000000},
		{customer: ptr("9223372036854775808")},
		{customer: ptr("99999999999999999999")},
		{customer: ptr("0042")},
		{customer: ptr("0")},
		{customer: ptr("-5")},
		{customer: ptr("jane@shop.example")},
		{customer: nil},
	}
	for _, tc := range cases {
		var got *int64
		require.NoError(t, conn.QueryRow(ctx, "SELECT voucherd_customer_legacy($1::text)", tc.customer).Scan(&got))
		switch {
		case tc.customer == nil:
			require.Nil(t, got, "NULL gives NULL")
		case tc.positive:
			require.NotNil(t, got)
			require.Equal(t, tc.want, *got, *tc.customer)
		default:
			require.NotNil(t, got)
			require.Negative(t, *got, *tc.customer)
		}
	}

	var plan strings.Builder
	rows, err := conn.Query(ctx, "EXPLAIN (VERBOSE, COSTS OFF) SELECT voucherd_customer_legacy(c) FROM unnest($1::text[]) AS u(c)",
		[]string{"42", "jane@shop.example"})
	require.NoError(t, err)
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan.WriteString(line + "\n")
	}
	require.NoError(t, rows.Err())
	require.NotContains(t, plan.String(), "voucherd_customer_legacy", "the call is inlined:\n%s", plan.String())
	require.Contains(t, plan.String(), "hashtextextended", "the inlined body is in the plan:\n%s", plan.String())
}

func ptr(s string) *string { return &s }
