package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/voucherd/voucherd/internal/localproc"
)

// pgStartTimeout bounds initdb plus server start; generous because test
// binaries of several packages start servers at once on a small machine.
const pgStartTimeout = 90 * time.Second

// PG is a fresh, empty database created for one test.
type PG struct {
	// URL connects to the database as the superuser "postgres".
	URL string
	// Database is the database's name.
	Database string
}

// PGServer is a PostgreSQL server. Postgres uses one per test binary;
// NewPostgres starts a private one that a test may stop, kill and start.
type PGServer struct {
	base *url.URL           // the server's "postgres" database, as a superuser
	dir  string             // temp dir holding data/, the log and the socket; "" when external
	proc *localproc.Process // nil when the server is external
}

var sharedPG struct {
	once sync.Once
	srv  *PGServer
	err  error
}

// Postgres returns a fresh database on the PostgreSQL server shared by the
// test binary, starting the server on first use (or using
// VOUCHERD_TEST_DATABASE_URL when set). The database is dropped, with any
// connections still open to it, when the test ends.
func Postgres(t testing.TB) *PG {
	t.Helper()
	return sharedPostgres(t).NewDatabase(t)
}

// PostgresICU returns a fresh database like Postgres whose default
// collation is the ICU locale's (for example "en-US"): text without a
// collation of its own sorts in that language's order, not in byte order,
// as in the databases many managed services create.
func PostgresICU(t testing.TB, locale string) *PG {
	t.Helper()
	return sharedPostgres(t).newDatabase(t,
		" TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C' LOCALE_PROVIDER icu ICU_LOCALE "+quoteLiteral(locale))
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// sharedPostgres is the PostgreSQL server shared by the test binary.
func sharedPostgres(t testing.TB) *PGServer {
	t.Helper()
	sharedPG.once.Do(func() {
		if raw := os.Getenv("VOUCHERD_TEST_DATABASE_URL"); raw != "" {
			sharedPG.srv, sharedPG.err = externalPG(raw)
			return
		}
		sharedPG.srv, sharedPG.err = startPG(3, false)
		if sharedPG.err == nil {
			registerCleanup(sharedPG.srv.shutdown)
		}
	})
	if sharedPG.err != nil {
		t.Fatalf("testenv: shared PostgreSQL: %v", sharedPG.err)
	}
	return sharedPG.srv
}

// NewPostgres starts a PostgreSQL server for this test only, removed at the
// test's cleanup. Its URL, data and port survive Stop, Kill and Start.
// Unlike the shared server it commits synchronously, so that every commit a
// client saw acknowledged survives Kill, as fault tests expect (fsync stays
// off: the kernel keeps what a killed process wrote).
func NewPostgres(t testing.TB) *PGServer {
	t.Helper()
	srv, err := startPG(3, true)
	if err != nil {
		t.Fatalf("testenv: private PostgreSQL: %v", err)
	}
	t.Cleanup(srv.shutdown)
	return srv
}

// NewPostgresFsync is NewPostgres with fsync and full-page writes on: each
// commit waits until its WAL is flushed to the disk, as in production. For
// benchmarks that weigh commit latency; slower than NewPostgres.
func NewPostgresFsync(t testing.TB) *PGServer {
	t.Helper()
	srv, err := startPGWith(3, true, nil, "-c", "fsync=on", "-c", "full_page_writes=on")
	if err != nil {
		t.Fatalf("testenv: private PostgreSQL with fsync: %v", err)
	}
	t.Cleanup(srv.shutdown)
	return srv
}

// NewPostgresTLS is NewPostgres with ssl=on and the server certificate of
// certs. Clients choose: URL keeps sslmode=disable, TLSURL connects with
// sslmode=verify-full.
func NewPostgresTLS(t testing.TB, certs *Certs) *PGServer {
	t.Helper()
	srv, err := startPGWith(3, true, certs)
	if err != nil {
		t.Fatalf("testenv: private PostgreSQL with TLS: %v", err)
	}
	t.Cleanup(srv.shutdown)
	return srv
}

// AddPasswordUser creates a superuser role that must log in with password
// over TLS (a hostssl scram-sha-256 line put first in pg_hba.conf), as a
// managed database's users do; the server's own superuser stays trusted.
func (s *PGServer) AddPasswordUser(t testing.TB, role, password string) {
	t.Helper()
	s.mustOwn(t, "AddPasswordUser")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hba := filepath.Join(s.dir, "data", "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err == nil {
		line := fmt.Sprintf("hostssl all %s 127.0.0.1/32 scram-sha-256\n", role)
		// WriteFile keeps the file's owner, the server's user.
		err = os.WriteFile(hba, append([]byte(line), old...), 0o600)
	}
	if err == nil {
		err = s.exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN SUPERUSER PASSWORD '%s'", pgx.Identifier{role}.Sanitize(),
			strings.ReplaceAll(password, "'", "''")))
	}
	if err == nil {
		err = s.exec(ctx, "SELECT pg_reload_conf()")
	}
	if err != nil {
		t.Fatalf("testenv: add PostgreSQL user %s: %v", role, err)
	}
}

// TLSURL returns a superuser URL for the database db that connects with
// sslmode=verify-full, checking the server against the CA in rootCAFile.
func (s *PGServer) TLSURL(db, rootCAFile string) string {
	return s.TLSURLAs(db, rootCAFile, url.User("postgres"))
}

// TLSURLAs is TLSURL as another user (see AddPasswordUser).
func (s *PGServer) TLSURLAs(db, rootCAFile string, user *url.Userinfo) string {
	u := *s.base
	u.User = user
	u.Path = "/" + db
	u.RawPath = ""
	u.RawQuery = url.Values{"sslmode": {"verify-full"}, "sslrootcert": {rootCAFile}}.Encode()
	return u.String()
}

// URL returns a superuser URL for the database db on this server.
func (s *PGServer) URL(db string) string {
	u := *s.base
	u.Path = "/" + db
	u.RawPath = ""
	return u.String()
}

// NewDatabase creates a fresh, empty database on the server and drops it
// (with any connections still open to it) when the test ends.
func (s *PGServer) NewDatabase(t testing.TB) *PG {
	t.Helper()
	return s.newDatabase(t, "")
}

// newDatabase is NewDatabase with options appended to CREATE DATABASE.
func (s *PGServer) newDatabase(t testing.TB, options string) *PG {
	t.Helper()
	name := "t_" + randomSuffix(8)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.createDatabase(ctx, name+options); err != nil {
		t.Fatalf("testenv: create database %s on %s: %v", name, s.redacted(), err)
	}
	t.Cleanup(func() {
		if !s.running() {
			return // a stopped private server is removed whole
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("testenv: drop database %s: %v", name, err)
		}
	})
	return &PG{URL: s.URL(name), Database: name}
}

// Stop shuts the server down cleanly (fast shutdown: open sessions are
// ended, committed work is kept).
func (s *PGServer) Stop(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "Stop")
	if !s.proc.Stop(syscall.SIGINT, 30*time.Second) {
		t.Logf("testenv: postgres did not stop within 30s and was killed\n%s", localproc.LogTail(s.proc.LogPath))
	}
}

// StopImmediate stops the server as `pg_ctl stop -m immediate` does
// (SIGQUIT): every backend quits at once without answering its client,
// so a COMMIT in progress may complete with its answer lost. Start
// recovers it from its write-ahead log.
func (s *PGServer) StopImmediate(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "StopImmediate")
	if !s.proc.Stop(syscall.SIGQUIT, 30*time.Second) {
		t.Logf("testenv: postgres did not stop within 30s and was killed\n%s", localproc.LogTail(s.proc.LogPath))
	}
}

// Kill ends the server and its backends with SIGKILL, as a crash would.
// Start recovers it from its write-ahead log.
func (s *PGServer) Kill(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "Kill")
	s.proc.Kill()
}

// Start starts a stopped or killed server again on the same data and port,
// and waits until it accepts connections.
func (s *PGServer) Start(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "Start")
	if s.running() {
		t.Fatalf("testenv: PGServer.Start: postgres is already running")
	}
	// Backends of a killed server exit a moment after it (they notice their
	// parent died); until then the data directory is in use and postgres
	// refuses to start, so try again for a while.
	deadline := time.Now().Add(pgStartTimeout)
	for {
		err := s.startOnce()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: restart postgres: %s", failure(s.proc, err))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *PGServer) mustOwn(t testing.TB, method string) {
	t.Helper()
	if s.proc == nil {
		t.Fatalf("testenv: PGServer.%s needs a server started by NewPostgres, not an external one", method)
	}
}

func (s *PGServer) running() bool {
	return s.proc == nil || s.proc.Running()
}

// startOnce starts the process and waits until it answers.
func (s *PGServer) startOnce() error {
	if err := s.proc.Start(); err != nil {
		return err
	}
	err := s.proc.WaitReady(context.Background(), pgStartTimeout, s.ping)
	if err != nil {
		s.proc.Kill()
	}
	return err
}

// shutdown stops the server and removes its files; for Main and t.Cleanup.
func (s *PGServer) shutdown() {
	if s.proc == nil {
		return
	}
	s.proc.Stop(syscall.SIGINT, 10*time.Second)
	_ = os.RemoveAll(s.dir)
}

func (s *PGServer) ping(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.base.String())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

func (s *PGServer) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.base.String())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func (s *PGServer) createDatabase(ctx context.Context, nameAndOptions string) error {
	for {
		err := s.exec(ctx, "CREATE DATABASE "+nameAndOptions)
		// 55006 object_in_use: someone is connected to template1; it is
		// brief, so wait and retry.
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// redacted is the server's URL without a password, for messages.
func (s *PGServer) redacted() string {
	return s.base.Redacted()
}

// externalPG uses an existing server; it must accept connections now.
func externalPG(raw string) (*PGServer, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("VOUCHERD_TEST_DATABASE_URL must be a postgres:// URL, got %q", raw)
	}
	srv := &PGServer{base: u}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.ping(ctx); err != nil {
		return nil, fmt.Errorf("VOUCHERD_TEST_DATABASE_URL %s does not answer: %w", u.Redacted(), err)
	}
	return srv, nil
}

// startPG creates a cluster in a new temp dir and starts a server on a free
// port, trying up to tries ports in case another process takes the port
// between freePort and the server's bind. With durable, commits wait for
// the WAL write; without, the last commits may be lost when it is killed.
func startPG(tries int, durable bool) (*PGServer, error) { return startPGWith(tries, durable, nil) }

// startPGWith is startPG with TLS on (ssl=on) when certs is not nil, the
// server's certificate and key copied into the server's folder, owned by
// the server's user as PostgreSQL requires. extra are more server
// arguments, after (so overriding) the test settings.
func startPGWith(tries int, durable bool, certs *Certs, extra ...string) (*PGServer, error) {
	initdb, postgres, err := localproc.FindPostgres()
	if err != nil {
		return nil, err
	}
	cred, err := localproc.ServerCredential()
	if err != nil {
		return nil, err
	}
	dir, err := tempDir("voucherd-pg-")
	if err != nil {
		return nil, err
	}
	if cred != nil {
		// postgres runs as an unprivileged user and must own its directory.
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("chown %s: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	initCmd := exec.Command(initdb, "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C")
	initCmd.SysProcAttr = localproc.SysProcAttr(cred)
	if out, err := initCmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("%s -D %s failed: %v\n%s\n%s", initdb, data, err, strings.TrimSpace(string(out)), installHint)
	}

	syncCommit := "synchronous_commit=off"
	if durable {
		syncCommit = "synchronous_commit=on"
	}
	var tlsArgs []string
	if certs != nil {
		for _, f := range []struct{ from, to string }{{certs.ServerCert, "server.crt"}, {certs.ServerKey, "server.key"}} {
			b, err := os.ReadFile(f.from)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, f.to), b, 0o600)
			}
			if err == nil && cred != nil {
				err = os.Chown(filepath.Join(dir, f.to), int(cred.Uid), int(cred.Gid))
			}
			if err != nil {
				_ = os.RemoveAll(dir)
				return nil, err
			}
		}
		tlsArgs = []string{"-c", "ssl=on", "-c", "ssl_cert_file=" + filepath.Join(dir, "server.crt"),
			"-c", "ssl_key_file=" + filepath.Join(dir, "server.key")}
	}
	for attempt := 1; ; attempt++ {
		port, err := localproc.FreePort()
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		srv := &PGServer{
			base: &url.URL{
				Scheme:   "postgres",
				User:     url.User("postgres"),
				Host:     fmt.Sprintf("127.0.0.1:%d", port),
				Path:     "/postgres",
				RawQuery: "sslmode=disable",
			},
			dir: dir,
			proc: &localproc.Process{
				Name: "postgres",
				Path: postgres,
				Args: append([]string{
					"-D", data,
					"-p", strconv.Itoa(port),
					"-k", dir,
					"-c", "listen_addresses=127.0.0.1",
					"-c", "fsync=off",
					"-c", syncCommit,
					"-c", "full_page_writes=off",
					"-c", "max_connections=400",
					"-c", "shared_buffers=128MB",
				}, append(tlsArgs, extra...)...),
				LogPath: filepath.Join(dir, "postgres.log"),
				Cred:    cred,
			},
		}
		err = srv.startOnce()
		if err == nil {
			return srv, nil
		}
		if attempt < tries && strings.Contains(localproc.LogTail(srv.proc.LogPath), "could not bind") {
			continue
		}
		msg := failure(srv.proc, err)
		_ = os.RemoveAll(dir)
		return nil, errors.New(msg)
	}
}
