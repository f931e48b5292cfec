package pgstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrateLockKey is the advisory lock that serializes migrators of one
// database (advisory locks are per database), so several instances starting
// at once apply each migration once.
const migrateLockKey int64 = 0x766f75636865 // "vouche"

const createMigrationTable = `CREATE TABLE IF NOT EXISTS voucherd_migration (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// Migration is one embedded schema change, migrations/NNN_name.sql.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

var migrationName = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.sql$`)

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

// Migrate applies the embedded migrations that the database has not applied
// yet, each in its own transaction under an advisory lock. It is idempotent
// and safe to run from several processes at once.
func (s *Store) Migrate(ctx context.Context) error {
	migrations, err := Migrations()
	if err != nil {
		return err
	}
	for _, m := range migrations {
		if _, err := s.applyMigration(ctx, m); err != nil {
			return fmt.Errorf("pgstore: migration %03d_%s: %w", m.Version, m.Name, err)
		}
	}
	return nil
}

// applyMigration applies m unless it is recorded; it reports whether it did.
func (s *Store) applyMigration(ctx context.Context, m Migration) (bool, error) {
	applied := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockKey); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, createMigrationTable); err != nil {
			return err
		}
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
		if _, err := tx.Exec(ctx, "INSERT INTO voucherd_migration (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			return err
		}
		applied = true
		return nil
	})
	return applied, err
}

// Migrate opens the database at url, applies the pending migrations and
// closes it; for `voucherd migrate`.
func Migrate(ctx context.Context, url string) error {
	s, err := Open(ctx, Config{URL: url, MaxConns: 1})
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Migrate(ctx)
}
