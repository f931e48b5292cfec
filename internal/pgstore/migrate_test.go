package pgstore_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// releasedDir holds the migrations as the last release shipped them, stored
// functions included: the schema a database upgraded in place starts from.
const releasedDir = "testdata/released"

// migrateReleased applies the released migrations to the database at url as
// the released migrator did (each file, then its version recorded), and
// returns the store, not yet migrated by this version.
func migrateReleased(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Config{URL: url, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	_, err = s.Pool().Exec(ctx, `CREATE TABLE voucherd_migration (
	    version    integer     PRIMARY KEY,
	    name       text        NOT NULL,
	    applied_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(releasedDir, "*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	name := regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.sql$`)
	for _, f := range files {
		m := name.FindStringSubmatch(filepath.Base(f))
		require.NotNil(t, m, f)
		body, err := os.ReadFile(f)
		require.NoError(t, err)
		_, err = s.Pool().Exec(ctx, string(body))
		require.NoError(t, err, f)
		version, _ := strconv.Atoi(m[1])
		_, err = s.Pool().Exec(ctx, "INSERT INTO voucherd_migration (version, name) VALUES ($1, $2)", version, m[2])
		require.NoError(t, err)
	}
	return s
}

// catalog is what the schema of a database is made of, as comparable text:
// every voucherd function with its definition, every column, index,
// constraint and table option of the current schema.
func catalog(t *testing.T, s *pgstore.Store) map[string][]string {
	t.Helper()
	queries := map[string]string{
		"functions": `SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' || E'\n' || pg_get_functiondef(p.oid)
			FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'voucherd%' ORDER BY 1`,
		"columns": `SELECT format('%s.%s %s %s null=%s default=%s', c.table_name, c.column_name, c.ordinal_position,
			       c.data_type, c.is_nullable, coalesce(c.column_default, ''))
			FROM information_schema.columns c WHERE c.table_schema = current_schema() ORDER BY 1`,
		"indexes": `SELECT i.indexname || ' ' || i.indexdef FROM pg_indexes i WHERE i.schemaname = current_schema() ORDER BY 1`,
		"constraints": `SELECT format('%s %s %s', c.conrelid::regclass, c.conname, pg_get_constraintdef(c.oid))
			FROM pg_constraint c WHERE c.connamespace = current_schema()::regnamespace ORDER BY 1`,
		"tables": `SELECT format('%s %s %s', c.relname, c.relkind, coalesce(c.reloptions::text, ''))
			FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
			ORDER BY 1`,
	}
	out := map[string][]string{}
	for kind, q := range queries {
		rows, err := s.Pool().Query(context.Background(), q)
		require.NoError(t, err, kind)
		items, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err, kind)
		out[kind] = items
	}
	return out
}

// difference returns the items of a that b lacks, each cut to its first
// line (a function's name and arguments).
func difference(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			first, _, _ := strings.Cut(x, "\n")
			out = append(out, first)
		}
	}
	return out
}

// signatures returns the arguments and result of each function the
// previous release's statements call, by name: one entry per overload.
func signatures(t *testing.T, s *pgstore.Store) map[string][]string {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `
		SELECT p.proname, pg_get_function_arguments(p.oid) || ' -> ' || pg_get_function_result(p.oid)
		FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace AND p.proname = ANY ($1)
		ORDER BY 1, 2`,
		calledByReleasedQueries(t))
	require.NoError(t, err)
	out := map[string][]string{}
	for rows.Next() {
		var name, sig string
		require.NoError(t, rows.Scan(&name, &sig))
		out[name] = append(out[name], sig)
	}
	require.NoError(t, rows.Err())
	return out
}

// calledByReleasedQueries lists the stored functions the previous
// release's statements call (integerRelease): the interface an instance of
// it depends on while this release runs beside it.
func calledByReleasedQueries(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(integerRelease, "queries", "*.sql"))
	require.NoError(t, err)
	seen := map[string]bool{}
	var names []string
	call := regexp.MustCompile(`\b(voucherd_[a-z_]+)\s*\(`)
	for _, f := range files {
		body, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range call.FindAllStringSubmatch(string(body), -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				names = append(names, m[1])
			}
		}
	}
	require.NotEmpty(t, names)
	return names
}

// A database upgraded in place from the released schema and a fresh one end
// with the same functions, columns, indexes and constraints.
func TestMigrateFromReleasedEqualsFresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	upgraded := migrateReleased(t, testenv.Postgres(t).URL)
	before := signatures(t, upgraded)
	require.NoError(t, upgraded.Migrate(ctx))

	fresh, err := pgstore.Open(ctx, pgstore.Config{URL: testenv.Postgres(t).URL, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(fresh.Close)
	require.NoError(t, fresh.Migrate(ctx))

	want, got := catalog(t, fresh), catalog(t, upgraded)
	for _, kind := range []string{"functions", "columns", "indexes", "constraints", "tables"} {
		require.NotEmpty(t, want[kind], kind)
		onlyFresh, onlyUpgraded := difference(want[kind], got[kind]), difference(got[kind], want[kind])
		require.Empty(t, onlyFresh, "%s of the fresh database missing or different in the upgraded one", kind)
		require.Empty(t, onlyUpgraded, "%s of the upgraded database missing or different in the fresh one", kind)
	}

	// A binary of the previous release keeps working while both run: every
	// function its statements call keeps its arguments and result columns
	// (this release adds overloads beside them: voucherd_reserve_batch and
	// voucherd_apply_reserved with text customerIds, whose calls name their
	// array types, so the previous release's calls still resolve to the
	// bigint ones; voucherd_reserve keeps its one signature, as a wrapper of
	// voucherd_reserve_one).
	require.NotEmpty(t, before)
	after := signatures(t, upgraded)
	for name, sigs := range before {
		for _, sig := range sigs {
			require.Contains(t, after[name], sig, "signature of %s, which the previous release's statements call", name)
		}
	}
	fresh81 := signatures(t, fresh)
	for _, name := range calledByReleasedQueries(t) {
		require.NotEmpty(t, fresh81[name], "%s, which the previous release's statements call, exists in a fresh database", name)
	}
}

// Migrate applies a function file only when the database never had its
// text, or has it as the current one but lacks the function; it never
// replaces a text applied after its own (an older release starting while a
// newer one runs).
func TestMigrateFunctionsByChecksum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Config{URL: testenv.Postgres(t).URL, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.NoError(t, s.Migrate(ctx))

	functions, err := pgstore.Functions()
	require.NoError(t, err)
	create := regexp.MustCompile(`(?m)^CREATE OR REPLACE FUNCTION (voucherd_[a-z0-9_]+)\(`)
	for _, f := range functions {
		m := create.FindAllStringSubmatch(f.SQL, -1)
		require.Len(t, m, 1, "%s defines one function", f.Name)
		require.Equal(t, f.Name, m[0][1], "file name and function name")
	}

	// current returns each function's current checksum and its seq.
	current := func() map[string]string {
		rows, err := s.Pool().Query(ctx, `
			SELECT DISTINCT ON (name) name, checksum || ' ' || seq FROM voucherd_function ORDER BY name, seq DESC`)
		require.NoError(t, err)
		out := map[string]string{}
		for rows.Next() {
			var n, c string
			require.NoError(t, rows.Scan(&n, &c))
			out[n] = c
		}
		require.NoError(t, rows.Err())
		return out
	}
	first := current()
	require.Len(t, first, len(functions))
	for _, f := range functions {
		require.True(t, strings.HasPrefix(first[f.Name], f.Checksum+" "), f.Name)
	}
	require.NoError(t, s.Migrate(ctx))
	require.Equal(t, first, current(), "unchanged files are not applied again")

	exec := func(sql string) {
		t.Helper()
		_, err := s.Pool().Exec(ctx, sql)
		require.NoError(t, err)
	}
	retryMS := func() int64 {
		var ms int64
		require.NoError(t, s.Pool().QueryRow(ctx, "SELECT voucherd_retry_ms(now() + interval '2 seconds', now())").Scan(&ms))
		return ms
	}
	// A newer release replaced voucherd_retry_ms: this one leaves it.
	exec(`CREATE OR REPLACE FUNCTION voucherd_retry_ms(p_at timestamptz, p_now timestamptz)
	      RETURNS bigint LANGUAGE sql IMMUTABLE AS $$ SELECT 7::bigint $$`)
	exec(`INSERT INTO voucherd_function (name, checksum) VALUES ('voucherd_retry_ms', 'newer')`)
	// The database has an older text of voucherd_reserve_one only.
	exec(`DELETE FROM voucherd_function WHERE name = 'voucherd_reserve_one'`)
	exec(`INSERT INTO voucherd_function (name, checksum) VALUES ('voucherd_reserve_one', 'older')`)
	// A migration dropped voucherd_quota_facts, whose text is current.
	exec(`DROP FUNCTION voucherd_quota_facts(text, text, integer)`)
	require.NoError(t, s.Migrate(ctx))

	again := current()
	require.Equal(t, int64(7), retryMS(), "a newer text stays")
	require.True(t, strings.HasPrefix(again["voucherd_retry_ms"], "newer "))
	for name, was := range first {
		switch name {
		case "voucherd_retry_ms":
		case "voucherd_reserve_one", "voucherd_quota_facts":
			require.NotEqual(t, was, again[name], name)
			require.Equal(t, strings.Fields(was)[0], strings.Fields(again[name])[0], "%s is this release's text again", name)
		default:
			require.Equal(t, was, again[name], name)
		}
	}
	var n int
	require.NoError(t, s.Pool().QueryRow(ctx, "SELECT count(*) FROM pg_proc WHERE proname = 'voucherd_quota_facts'").Scan(&n))
	require.Equal(t, 1, n)
}

// A binary of the released version reads a rejection as MESSAGE = the code,
// HINT = the NOT_ELIGIBLE reason (VD001) or the milliseconds to wait
// (VD004), and the batch's o_error, o_reason and o_retry_ms columns: the
// functions of this version still answer so. Only the wording differs
// (DETAIL and o_message carry facts, which such a binary shows as they are).
func TestRejectionProtocolOfReleasedBinaries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
	newVoucher(t, s, "PROTO", 1, 1, func(v *voucher.Voucher) { v.MinOrderAmount = 100 })
	_, err := s.Reserve(ctx, request("PROTO", 1, "p-1"), now, ttl)
	require.NoError(t, err)

	raised := func(customer int64, order string, amount int64) *pgconn.PgError {
		t.Helper()
		rows, err := s.Pool().Query(ctx, "SELECT * FROM voucherd_reserve($1, $2, $3, $4, $5, $6)",
			"PROTO", customer, order, amount, now, ttl)
		require.NoError(t, err)
		rows.Close()
		var pgErr *pgconn.PgError
		require.ErrorAs(t, rows.Err(), &pgErr)
		return pgErr
	}
	e := raised(2, "p-2", 10)
	require.Equal(t, []string{"VD001", "NOT_ELIGIBLE", "ORDER_AMOUNT_TOO_LOW"}, []string{e.Code, e.Message, e.Hint})
	e = raised(2, "p-1", 250_000)
	require.Equal(t, []string{"VD001", "ORDER_CONFLICT", ""}, []string{e.Code, e.Message, e.Hint})
	e = raised(2, "p-3", 250_000)
	require.Equal(t, []string{"VD004", "HELD_OUT"}, []string{e.Code, e.Message})
	ms, err := strconv.ParseInt(e.Hint, 10, 64)
	require.NoError(t, err)
	require.Equal(t, ttl.Milliseconds(), ms)

	answers, err := reserveBatchSQL(ctx, s, "PROTO", now, []elem{el(2, "p-4"), {customer: "3", order: "p-5", amount: 10}})
	require.NoError(t, err)
	require.Equal(t, voucher.CodeHeldOut, answers[0].Code)
	require.Equal(t, ttl, answers[0].RetryAfter)
	require.Equal(t, voucher.CodeNotEligible, answers[1].Code)
	require.Equal(t, voucher.ReasonOrderAmountTooLow, answers[1].Reason)

	_, err = s.Confirm(ctx, "PROTO", "p-1", now)
	require.NoError(t, err)
	e = raised(2, "p-6", 250_000)
	require.Equal(t, []string{"VD001", "OUT_OF_STOCK", ""}, []string{e.Code, e.Message, e.Hint})
}
