package localstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/voucherd/voucherd/internal/localproc"
)

// PostgresConfig says where and how to run one PostgreSQL server.
type PostgresConfig struct {
	// Dir holds the cluster (Dir/data), the log (Dir/postgres.log) and the
	// server's socket. It is made when missing; a cluster already in
	// Dir/data is started as it is, so its data survives a restart of the
	// stack. Required.
	Dir string
	// Port is the port on 127.0.0.1; 0 lets StartPostgres choose a free
	// one, and choose again when another process takes it first.
	Port int
	// User is the superuser initdb creates, trusted without a password;
	// "" means "voucherd".
	User string
	// Database is created at the first start that does not find it; ""
	// creates none (URL then names the "postgres" database).
	Database string
	// Settings are more server settings, each "name=value" (passed as -c).
	// Commits are durable unless a setting says otherwise.
	Settings []string
	// StartTimeout bounds a start until the server answers; 0 means 60s.
	StartTimeout time.Duration
}

// Postgres is a PostgreSQL server started by StartPostgres.
type Postgres struct {
	// URL connects to the Database (without TLS) as the User.
	URL string

	admin string // the "postgres" database, for creating Database
	cfg   PostgresConfig
	proc  *localproc.Process
}

// StartPostgres creates a cluster in cfg.Dir unless one is there, starts
// the server and waits until it accepts connections and cfg.Database
// exists. A server that does not become ready is killed. When this process
// runs as root the server runs as an unprivileged user
// (localproc.ServerCredential), who must be able to reach cfg.Dir.
func StartPostgres(ctx context.Context, cfg PostgresConfig) (*Postgres, error) {
	if cfg.Dir == "" || cfg.Port < 0 {
		return nil, errors.New("localstack: PostgresConfig needs Dir")
	}
	if cfg.User == "" {
		cfg.User = "voucherd"
	}
	if cfg.Port > 0 {
		return startPostgresOn(ctx, cfg)
	}
	for attempt := 1; ; attempt++ {
		port, err := localproc.FreePort()
		if err != nil {
			return nil, err
		}
		on := cfg
		on.Port = port
		p, err := startPostgresOn(ctx, on)
		var taken *portTakenError
		if err == nil || attempt == postgresPortTries || !errors.As(err, &taken) {
			return p, err
		}
	}
}

// postgresPortTries is how many free ports StartPostgres tries when it
// chooses the port and another process takes it before the server binds
// it.
const postgresPortTries = 3

// startPostgresOn is StartPostgres on cfg.Port. A server whose log says
// its address is in use fails with a *portTakenError.
func startPostgresOn(ctx context.Context, cfg PostgresConfig) (*Postgres, error) {
	initdb, postgres, err := localproc.FindPostgres()
	if err != nil {
		return nil, err
	}
	if err := portFree(cfg.Port); err != nil {
		return nil, err
	}
	cred, err := localproc.ServerCredential()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if cred != nil {
		// postgres runs as an unprivileged user and must own its folder.
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		cmd := exec.Command(initdb, "-D", data, "-U", cfg.User, "-A", "trust", "-E", "UTF8", "--no-sync")
		cmd.SysProcAttr = localproc.SysProcAttr(cred)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("initdb: %v\n%s", err, out)
		}
	}
	args := []string{"-D", data, "-p", strconv.Itoa(cfg.Port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"}
	for _, s := range cfg.Settings {
		args = append(args, "-c", s)
	}
	db := cfg.Database
	if db == "" {
		db = "postgres"
	}
	p := &Postgres{
		URL:   fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", cfg.User, cfg.Port, db),
		admin: fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", cfg.User, cfg.Port),
		cfg:   cfg,
		proc: &localproc.Process{Name: "postgres", Path: postgres, Args: args,
			LogPath: filepath.Join(dir, "postgres.log"), Cred: cred},
	}
	if err := p.Start(ctx); err != nil {
		if strings.Contains(localproc.LogTail(p.proc.LogPath), "Address already in use") {
			err = &portTakenError{port: cfg.Port, err: err}
		}
		return nil, err
	}
	return p, nil
}

// Start starts the server again on its data and port after Stop, and waits
// as StartPostgres does.
func (p *Postgres) Start(ctx context.Context) error {
	if err := p.proc.Start(); err != nil {
		return err
	}
	err := p.proc.WaitReady(ctx, orDefault(p.cfg.StartTimeout), p.ready)
	if err != nil {
		p.proc.Kill()
		return fmt.Errorf("%w; see %s", err, p.proc.LogPath)
	}
	return nil
}

// ready succeeds once the server accepts a connection and the database
// exists, creating it on the way.
func (p *Postgres) ready(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, p.admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if p.cfg.Database == "" {
		return nil
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", p.cfg.Database).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{p.cfg.Database}.Sanitize())
	}
	return err
}

// Stop shuts the server down the fast way (SIGINT: open sessions end,
// committed work is kept) and waits for it; it is killed after 15 s. It
// returns false when it had to be killed.
func (p *Postgres) Stop() bool { return p.proc.Stop(syscall.SIGINT, stopGrace) }

// PID returns the postmaster's process id, 0 when it is not running.
func (p *Postgres) PID() int { return p.proc.PID() }
