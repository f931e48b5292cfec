package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/voucherd/voucherd/internal/kafkalog"
	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/tlserr"
)

// Managed services: credentials and TLS of the connections to Redis and
// Kafka (PostgreSQL takes both in VOUCHERD_DATABASE_URL). Every secret can
// come from the variable itself or from a file named by the variable with
// _FILE appended (a Kubernetes secret mounted as a file), never both.

// ManagedConfig is how voucherd authenticates to its dependencies and
// encrypts its connections to them. The zero value connects in plain text
// without credentials, as voucherd always did.
type ManagedConfig struct {
	Redis RedisSecurity
	Kafka KafkaSecurity
}

// TLSFiles is the TLS of the connections to one dependency.
type TLSFiles struct {
	// Enabled turns TLS on; the files below are refused without it.
	Enabled bool
	// CAFile holds the PEM certificates the server's certificate must chain
	// to; empty trusts the system's roots.
	CAFile string
	// CertFile and KeyFile are a client certificate and its key (PEM),
	// both or neither.
	CertFile, KeyFile string
	// ServerName is the name the server's certificate must carry; empty
	// checks the host name of each address dialled.
	ServerName string
}

// RedisSecurity is the ACL user and TLS of the gate's Redis connections.
type RedisSecurity struct {
	// Username is the ACL user; empty with a Password authenticates as the
	// default user (requirepass).
	Username string
	Password string
	TLS      TLSFiles
}

// KafkaSecurity is the TLS and SASL of every Kafka client.
type KafkaSecurity struct {
	TLS TLSFiles
	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty
	// disables SASL.
	SASLMechanism string
	SASLUsername  string
	SASLPassword  string
}

// managedFromEnv reads the VOUCHERD_REDIS_* and VOUCHERD_KAFKA_* security
// variables. It reads the files the *_FILE variables name, but not the
// certificate files (tlsConfig does); an error names the dependency and the
// variable.
func managedFromEnv(getenv func(string) string) (ManagedConfig, error) {
	var m ManagedConfig
	var errs []error
	str := func(dep, name string) string {
		v, err := secretEnv(getenv, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", dep, err))
		}
		return v
	}
	boolean := func(dep, name string) bool {
		v := getenv(name)
		if v == "" {
			return false
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s=%q is not a boolean", dep, name, v))
		}
		return b
	}
	tlsFiles := func(dep, prefix string) TLSFiles {
		return TLSFiles{
			Enabled:    boolean(dep, prefix+"TLS"),
			CAFile:     getenv(prefix + "CA_FILE"),
			CertFile:   getenv(prefix + "CERT_FILE"),
			KeyFile:    getenv(prefix + "KEY_FILE"),
			ServerName: getenv(prefix + "SERVER_NAME"),
		}
	}
	m.Redis = RedisSecurity{
		Username: getenv("VOUCHERD_REDIS_USERNAME"),
		Password: str("redis", "VOUCHERD_REDIS_PASSWORD"),
		TLS:      tlsFiles("redis", "VOUCHERD_REDIS_"),
	}
	m.Kafka = KafkaSecurity{
		TLS:           tlsFiles("kafka", "VOUCHERD_KAFKA_"),
		SASLMechanism: getenv("VOUCHERD_KAFKA_SASL_MECHANISM"),
		SASLUsername:  getenv("VOUCHERD_KAFKA_SASL_USERNAME"),
		SASLPassword:  str("kafka", "VOUCHERD_KAFKA_SASL_PASSWORD"),
	}
	if err := errors.Join(errs...); err != nil {
		return m, err
	}
	return m, m.check()
}

// secretEnv returns the variable name, or the content of the file that
// name_FILE names with its trailing line break removed; both set is an
// error, so that a deployment never has two sources of one secret.
func secretEnv(getenv func(string) string, name string) (string, error) {
	v, file := getenv(name), getenv(name+"_FILE")
	switch {
	case file == "":
		return v, nil
	case v != "":
		return "", fmt.Errorf("both %s and %s_FILE are set; set one", name, name)
	}
	b, err := os.ReadFile(file) //nolint:gosec // the operator names the secret's file in the environment; reading it is the point
	if err != nil {
		return "", fmt.Errorf("%s_FILE: %w", name, err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// check refuses half-made settings, naming the dependency and variables.
func (m ManagedConfig) check() error {
	var errs []error
	if err := m.Redis.TLS.check("VOUCHERD_REDIS_"); err != nil {
		errs = append(errs, fmt.Errorf("redis: %w", err))
	}
	if m.Redis.Username != "" && m.Redis.Password == "" {
		errs = append(errs, errors.New("redis: VOUCHERD_REDIS_USERNAME needs VOUCHERD_REDIS_PASSWORD (or VOUCHERD_REDIS_PASSWORD_FILE)"))
	}
	if err := m.Kafka.TLS.check("VOUCHERD_KAFKA_"); err != nil {
		errs = append(errs, fmt.Errorf("kafka: %w", err))
	}
	k := m.Kafka
	switch {
	case k.SASLMechanism == "" && (k.SASLUsername != "" || k.SASLPassword != ""):
		errs = append(errs, errors.New("kafka: VOUCHERD_KAFKA_SASL_USERNAME and _PASSWORD need VOUCHERD_KAFKA_SASL_MECHANISM (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"))
	case k.SASLMechanism != "" && (k.SASLUsername == "" || k.SASLPassword == ""):
		errs = append(errs, fmt.Errorf("kafka: VOUCHERD_KAFKA_SASL_MECHANISM=%s needs VOUCHERD_KAFKA_SASL_USERNAME and VOUCHERD_KAFKA_SASL_PASSWORD (or _PASSWORD_FILE)", k.SASLMechanism))
	}
	if _, err := k.mechanism(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// check refuses TLS files without TLS and a certificate without its key.
func (f TLSFiles) check(prefix string) error {
	if !f.Enabled {
		for _, v := range []struct{ name, value string }{
			{"CA_FILE", f.CAFile}, {"CERT_FILE", f.CertFile}, {"KEY_FILE", f.KeyFile}, {"SERVER_NAME", f.ServerName},
		} {
			if v.value != "" {
				return fmt.Errorf("%s%s is set but %sTLS is not true", prefix, v.name, prefix)
			}
		}
		return nil
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return fmt.Errorf("%sCERT_FILE and %sKEY_FILE go together: set both or neither", prefix, prefix)
	}
	return nil
}

// tlsConfig loads the files into a client tls.Config; nil when TLS is off.
func (f TLSFiles) tlsConfig(prefix string) (*tls.Config, error) {
	if !f.Enabled {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%sCA_FILE: %w", prefix, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%sCA_FILE %s holds no PEM certificate", prefix, f.CAFile)
		}
	}
	if f.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%sCERT_FILE/KEY_FILE: %w", prefix, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// redisTLS is the TLS of the gate's connections, or nil.
func (m ManagedConfig) redisTLS() (*tls.Config, error) {
	c, err := m.Redis.TLS.tlsConfig("VOUCHERD_REDIS_")
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return c, nil
}

// kafka returns the TLS and SASL of every Kafka client; nil for each that
// is off.
func (m ManagedConfig) kafka() (*tls.Config, sasl.Mechanism, error) {
	c, err := m.Kafka.TLS.tlsConfig("VOUCHERD_KAFKA_")
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: %w", err)
	}
	mech, err := m.Kafka.mechanism()
	return c, mech, err
}

// mechanism builds the SASL mechanism, nil without one.
func (k KafkaSecurity) mechanism() (sasl.Mechanism, error) {
	switch strings.ToUpper(k.SASLMechanism) {
	case "":
		return nil, nil
	case "PLAIN":
		return plain.Auth{User: k.SASLUsername, Pass: k.SASLPassword}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: k.SASLUsername, Pass: k.SASLPassword}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: k.SASLUsername, Pass: k.SASLPassword}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("kafka: VOUCHERD_KAFKA_SASL_MECHANISM must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, not %q", k.SASLMechanism)
}

// load checks the settings and loads every certificate file, so that a
// missing or unreadable file stops the start before any connection.
func (m ManagedConfig) load() error {
	if err := m.check(); err != nil {
		return err
	}
	if _, err := m.redisTLS(); err != nil {
		return err
	}
	_, _, err := m.kafka()
	return err
}

// databaseURLFromEnv is the default of --database-url: VOUCHERD_DATABASE_URL
// or the file VOUCHERD_DATABASE_URL_FILE names (the URL holds the password),
// else def.
func databaseURLFromEnv(getenv func(string) string, def string) (string, error) {
	v, err := secretEnv(getenv, "VOUCHERD_DATABASE_URL")
	if err != nil {
		return def, fmt.Errorf("postgres: %w", err)
	}
	if v == "" {
		return def, nil
	}
	return v, nil
}

// kafkaSecure adds the TLS and SASL of cfg.Managed to kcfg.
func kafkaSecure(kcfg kafkalog.Config, cfg Config) (kafkalog.Config, error) {
	var err error
	kcfg.TLS, kcfg.SASL, err = cfg.Managed.kafka()
	return kcfg, err
}

// kafkaStartError says what Kafka refused when err is a refusal of the
// credentials or certificates; callers prefix "kafka: ".
func kafkaStartError(err error) error {
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("SASL authentication failed (check VOUCHERD_KAFKA_SASL_*): %w", err)
	case kafkalog.IsConfigError(err):
		return fmt.Errorf("TLS or SASL settings refused (check VOUCHERD_KAFKA_TLS, _CA_FILE, _CERT_FILE, _SASL_*): %w", err)
	}
	return err
}

// checkPostgres fails when PostgreSQL answers but refuses voucherd's
// credentials or TLS (a wrong password, a certificate that does not verify
// under sslmode=verify-full): retrying cannot fix those. A PostgreSQL that
// does not answer is left to the callers, as before.
func checkPostgres(ctx context.Context, store *pgstore.Store) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := store.Ping(ctx)
	if err == nil {
		return nil
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && strings.HasPrefix(pe.Code, "28") {
		// Class 28: invalid authorization (a wrong password or user, or no
		// pg_hba.conf entry, e.g. for a client without TLS).
		return fmt.Errorf("postgres: credentials refused: %w", err)
	}
	if tlserr.Permanent(err) {
		return fmt.Errorf("postgres: TLS certificate refused (check sslmode, sslrootcert in VOUCHERD_DATABASE_URL): %w", err)
	}
	return nil
}
