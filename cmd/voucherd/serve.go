package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/voucherd/voucherd/internal/pgstore"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	fs := newFlagSet("serve", "", stderr)
	registerServeFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return err
	}
	app, err := NewApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	if err := app.Start(ctx); err != nil {
		_ = app.Close() // the start's error is the one to report
		return err
	}
	werr := app.Wait(ctx)
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout.String())
	cerr := app.Close()
	if werr != nil {
		return werr
	}
	return cerr
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("migrate", "", stderr)
	dbURL, dbURLErr := databaseURLFromEnv(os.Getenv, defaultDatabaseURL)
	url := fs.String("database-url", dbURL, "PostgreSQL URL, or VOUCHERD_DATABASE_URL_FILE naming a file that holds it (VOUCHERD_DATABASE_URL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if dbURLErr != nil {
		return dbURLErr
	}
	store, err := pgstore.Open(ctx, pgstore.Config{URL: *url})
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "migrations applied")
	return nil
}
