package pgstore

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// The schema and the stored functions are kept apart. migrations/ holds the
// versioned schema changes (tables, indexes, constraints, and the DROP
// FUNCTION a changed signature needs), each applied once and recorded by
// version in voucherd_migration; a released migration's file is never
// checksummed, so its text may lose what it no longer needs to say (the
// function bodies that functions/ now holds) without touching the databases
// that ran it. functions/ holds one file per stored function with its
// current CREATE OR REPLACE, applied after the migrations when its checksum
// is new to the database, like a repeatable migration. voucherd_function
// keeps every checksum applied, in order, so that an instance of an older
// release starting while a newer one runs (a rolling upgrade) recognises
// its texts as superseded and leaves the newer ones in place.
// docs/rules.md tells how to change either.

//go:embed migrations/*.sql
var migrationFS embed.FS

//go:embed functions/*.sql
var functionFS embed.FS

// migrateLockKey is the advisory lock that serializes migrators of one
// database (advisory locks are per database), so several instances starting
// at once apply each migration and function once.
const migrateLockKey int64 = 0x766f75636865 // "vouche"

const createMigrationTable = `CREATE TABLE IF NOT EXISTS voucherd_migration (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// createFunctionTable records each text of each function ever applied; the
// highest seq of a name is its current text.
const createFunctionTable = `CREATE TABLE IF NOT EXISTS voucherd_function (
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    seq        bigserial   NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, checksum)
)`

// Migration is one embedded schema change, migrations/NNN_name.sql.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Function is one embedded stored function, functions/<Name>.sql: its
// current CREATE OR REPLACE FUNCTION and the SHA-256 of that text.
type Function struct {
	Name     string
	SQL      string
	Checksum string
}

var (
	migrationName = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.sql$`)
	functionName  = regexp.MustCompile(`^(voucherd_[a-z0-9_]+)\.sql$`)
)

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("pgstore: read migrations: %w", err)
	}
	var out []Migration
	seen := map[int]string{}
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("pgstore: migration file %q is not named NNN_name.sql", e.Name())
		}
		version, _ := strconv.Atoi(m[1])
		if prev, dup := seen[version]; dup {
			return nil, fmt.Errorf("pgstore: migrations %s and %s share version %d", prev, e.Name(), version)
		}
		seen[version] = e.Name()
		body, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("pgstore: read migration %s: %w", e.Name(), err)
		}
		out = append(out, Migration{Version: version, Name: m[2], SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Functions returns the embedded stored functions sorted by name.
func Functions() ([]Function, error) {
	entries, err := fs.ReadDir(functionFS, "functions")
	if err != nil {
		return nil, fmt.Errorf("pgstore: read functions: %w", err)
	}
	var out []Function
	for _, e := range entries {
		m := functionName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("pgstore: function file %q is not named voucherd_name.sql", e.Name())
		}
		body, err := functionFS.ReadFile("functions/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("pgstore: read function %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(body)
		out = append(out, Function{Name: m[1], SQL: string(body), Checksum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Migrate brings the database up to date in one transaction under an
// advisory lock: the migrations it has not recorded, in version order, then
// every function whose text the database has never had (or whose current
// text it is but that a migration dropped); a text the database had before
// another one is older than it, and left alone. It is idempotent and safe to
// run from several processes at once; a failure changes nothing.
//
// Functions are created in name order with PostgreSQL's checks on: a
// PL/pgSQL body is parsed then, but what it calls is looked up only when it
// runs, while a LANGUAGE sql body is checked whole, so a sql function may
// call only functions whose names sort before its own.
func (s *Store) Migrate(ctx context.Context) error {
	migrations, err := Migrations()
	if err != nil {
		return err
	}
	functions, err := Functions()
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockKey); err != nil {
			return fmt.Errorf("pgstore: migration lock: %w", err)
		}
		for _, q := range []string{createMigrationTable, createFunctionTable} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("pgstore: migration tables: %w", err)
			}
		}
		for _, m := range migrations {
			if err := applyMigration(ctx, tx, m); err != nil {
				return fmt.Errorf("pgstore: migration %03d_%s: %w", m.Version, m.Name, err)
			}
		}
		for _, f := range functions {
			if err := applyFunction(ctx, tx, f); err != nil {
				return fmt.Errorf("pgstore: function %s: %w", f.Name, err)
			}
		}
		return nil
	})
}

// applyMigration applies m unless it is recorded.
func applyMigration(ctx context.Context, tx pgx.Tx, m Migration) error {
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM voucherd_migration WHERE version = $1)", m.Version).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	// No arguments: pgx sends it with the simple protocol, which runs a
	// file of several statements.
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO voucherd_migration (version, name) VALUES ($1, $2)", m.Version, m.Name)
	return err
}

// applyFunction runs f's CREATE OR REPLACE when the database never had its
// text, or has it as the current one but lacks the function.
func applyFunction(ctx context.Context, tx pgx.Tx, f Function) error {
	var seen, current, exists bool
	if err := tx.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM voucherd_function WHERE name = $1 AND checksum = $2),
		       coalesce((SELECT checksum = $2 FROM voucherd_function WHERE name = $1 ORDER BY seq DESC LIMIT 1), false),
		       EXISTS (SELECT 1 FROM pg_proc WHERE proname = $1 AND pronamespace = current_schema()::regnamespace)`,
		f.Name, f.Checksum).Scan(&seen, &current, &exists); err != nil {
		return err
	}
	if seen && (!current || exists) {
		return nil
	}
	if _, err := tx.Exec(ctx, f.SQL); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO voucherd_function (name, checksum) VALUES ($1, $2)
		ON CONFLICT (name, checksum) DO UPDATE SET seq = DEFAULT, applied_at = now()`, f.Name, f.Checksum)
	return err
}

// Migrate opens the database at url, applies the pending migrations and
// changed functions and closes it; for `voucherd migrate`.
func Migrate(ctx context.Context, url string) error {
	s, err := Open(ctx, Config{URL: url, MaxConns: 1})
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Migrate(ctx)
}
