package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
)

// TestManagedSettingsRefuseHalfConfigurations checks that the security
// variables of Redis and Kafka are refused when incomplete or
// contradictory, with a message naming the dependency and the variable,
// and that the *_FILE variables are read.
func TestManagedSettingsRefuseHalfConfigurations(t *testing.T) {
	t.Parallel()
	certs := testenv.NewCerts(t)
	secret := filepath.Join(t.TempDir(), "password")
	require.NoError(t, os.WriteFile(secret, []byte("s3cret\n"), 0o600))
	for _, tc := range []struct {
		name string
		env  map[string]string
		err  string // "" means accepted
	}{
		{"nothing set", nil, ""},
		{"redis ACL user", map[string]string{"VOUCHERD_REDIS_USERNAME": "app", "VOUCHERD_REDIS_PASSWORD": "pw"}, ""},
		{"redis password only", map[string]string{"VOUCHERD_REDIS_PASSWORD": "pw"}, ""},
		{"redis user without password", map[string]string{"VOUCHERD_REDIS_USERNAME": "app"}, "redis: VOUCHERD_REDIS_USERNAME needs VOUCHERD_REDIS_PASSWORD"},
		{"redis password twice", map[string]string{"VOUCHERD_REDIS_PASSWORD": "pw", "VOUCHERD_REDIS_PASSWORD_FILE": secret}, "redis: both VOUCHERD_REDIS_PASSWORD and VOUCHERD_REDIS_PASSWORD_FILE are set"},
		{"redis password file missing", map[string]string{"VOUCHERD_REDIS_PASSWORD_FILE": "/nonexistent/pw"}, "redis: VOUCHERD_REDIS_PASSWORD_FILE: open /nonexistent/pw"},
		{"redis CA without TLS", map[string]string{"VOUCHERD_REDIS_CA_FILE": certs.CAFile}, "redis: VOUCHERD_REDIS_CA_FILE is set but VOUCHERD_REDIS_TLS is not true"},
		{"redis TLS not a boolean", map[string]string{"VOUCHERD_REDIS_TLS": "yes please"}, "redis: VOUCHERD_REDIS_TLS=\"yes please\" is not a boolean"},
		{"redis cert without key", map[string]string{"VOUCHERD_REDIS_TLS": "true", "VOUCHERD_REDIS_CERT_FILE": certs.ClientCert}, "redis: VOUCHERD_REDIS_CERT_FILE and VOUCHERD_REDIS_KEY_FILE go together"},
		{"redis key without cert", map[string]string{"VOUCHERD_REDIS_TLS": "true", "VOUCHERD_REDIS_KEY_FILE": certs.ClientKey}, "redis: VOUCHERD_REDIS_CERT_FILE and VOUCHERD_REDIS_KEY_FILE go together"},
		{"redis full TLS", map[string]string{"VOUCHERD_REDIS_TLS": "true", "VOUCHERD_REDIS_CA_FILE": certs.CAFile,
			"VOUCHERD_REDIS_CERT_FILE": certs.ClientCert, "VOUCHERD_REDIS_KEY_FILE": certs.ClientKey, "VOUCHERD_REDIS_SERVER_NAME": "localhost"}, ""},
		{"redis CA file not PEM", map[string]string{"VOUCHERD_REDIS_TLS": "true", "VOUCHERD_REDIS_CA_FILE": secret}, "redis: VOUCHERD_REDIS_CA_FILE " + secret + " holds no PEM certificate"},
		{"redis key does not match", map[string]string{"VOUCHERD_REDIS_TLS": "true", "VOUCHERD_REDIS_CERT_FILE": certs.ClientCert, "VOUCHERD_REDIS_KEY_FILE": certs.ServerKey}, "redis: VOUCHERD_REDIS_CERT_FILE/KEY_FILE: tls: private key does not match public key"},
		{"kafka SASL SCRAM", map[string]string{"VOUCHERD_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "VOUCHERD_KAFKA_SASL_USERNAME": "app", "VOUCHERD_KAFKA_SASL_PASSWORD_FILE": secret}, ""},
		{"kafka SASL PLAIN over TLS", map[string]string{"VOUCHERD_KAFKA_TLS": "true", "VOUCHERD_KAFKA_SASL_MECHANISM": "PLAIN", "VOUCHERD_KAFKA_SASL_USERNAME": "app", "VOUCHERD_KAFKA_SASL_PASSWORD": "pw"}, ""},
		{"kafka unknown mechanism", map[string]string{"VOUCHERD_KAFKA_SASL_MECHANISM": "GSSAPI", "VOUCHERD_KAFKA_SASL_USERNAME": "app", "VOUCHERD_KAFKA_SASL_PASSWORD": "pw"}, "kafka: VOUCHERD_KAFKA_SASL_MECHANISM must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, not \"GSSAPI\""},
		{"kafka mechanism without password", map[string]string{"VOUCHERD_KAFKA_SASL_MECHANISM": "PLAIN", "VOUCHERD_KAFKA_SASL_USERNAME": "app"}, "kafka: VOUCHERD_KAFKA_SASL_MECHANISM=PLAIN needs VOUCHERD_KAFKA_SASL_USERNAME and VOUCHERD_KAFKA_SASL_PASSWORD"},
		{"kafka password without mechanism", map[string]string{"VOUCHERD_KAFKA_SASL_USERNAME": "app", "VOUCHERD_KAFKA_SASL_PASSWORD": "pw"}, "kafka: VOUCHERD_KAFKA_SASL_USERNAME and _PASSWORD need VOUCHERD_KAFKA_SASL_MECHANISM"},
		{"kafka password twice", map[string]string{"VOUCHERD_KAFKA_SASL_PASSWORD": "pw", "VOUCHERD_KAFKA_SASL_PASSWORD_FILE": secret}, "kafka: both VOUCHERD_KAFKA_SASL_PASSWORD and VOUCHERD_KAFKA_SASL_PASSWORD_FILE are set"},
		{"kafka cert without TLS", map[string]string{"VOUCHERD_KAFKA_CERT_FILE": certs.ClientCert, "VOUCHERD_KAFKA_KEY_FILE": certs.ClientKey}, "kafka: VOUCHERD_KAFKA_CERT_FILE is set but VOUCHERD_KAFKA_TLS is not true"},
		{"kafka CA missing", map[string]string{"VOUCHERD_KAFKA_TLS": "1", "VOUCHERD_KAFKA_CA_FILE": "/nonexistent/ca.pem"}, "kafka: VOUCHERD_KAFKA_CA_FILE: open /nonexistent/ca.pem"},
		{"database URL twice", map[string]string{"VOUCHERD_DATABASE_URL": "postgres://a@b/c", "VOUCHERD_DATABASE_URL_FILE": secret}, "postgres: both VOUCHERD_DATABASE_URL and VOUCHERD_DATABASE_URL_FILE are set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(name string) string { return tc.env[name] }
			_, dbErr := databaseURLFromEnv(getenv, defaultDatabaseURL)
			m, err := managedFromEnv(getenv)
			if err == nil {
				err = m.load()
			}
			if dbErr != nil {
				err = dbErr
			}
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// TestManagedSettingsReadFiles checks that the *_FILE variables give the
// file's content without its trailing line break, and that TLS settings
// become the client configuration of each dependency.
func TestManagedSettingsReadFiles(t *testing.T) {
	t.Parallel()
	certs := testenv.NewCerts(t)
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	env := map[string]string{
		"VOUCHERD_DATABASE_URL_FILE":        file("url", "postgres://app:pw@db/voucherd?sslmode=verify-full\n"),
		"VOUCHERD_REDIS_USERNAME":           "app",
		"VOUCHERD_REDIS_PASSWORD_FILE":      file("redis", "redis pw\r\n"),
		"VOUCHERD_REDIS_TLS":                "true",
		"VOUCHERD_REDIS_CA_FILE":            certs.CAFile,
		"VOUCHERD_REDIS_SERVER_NAME":        "redis.internal",
		"VOUCHERD_KAFKA_TLS":                "true",
		"VOUCHERD_KAFKA_CERT_FILE":          certs.ClientCert,
		"VOUCHERD_KAFKA_KEY_FILE":           certs.ClientKey,
		"VOUCHERD_KAFKA_SASL_MECHANISM":     "scram-sha-256",
		"VOUCHERD_KAFKA_SASL_USERNAME":      "app",
		"VOUCHERD_KAFKA_SASL_PASSWORD_FILE": file("kafka", "kafka pw"),
	}
	getenv := func(name string) string { return env[name] }
	url, err := databaseURLFromEnv(getenv, defaultDatabaseURL)
	require.NoError(t, err)
	require.Equal(t, "postgres://app:pw@db/voucherd?sslmode=verify-full", url)
	m, err := managedFromEnv(getenv)
	require.NoError(t, err)
	require.Equal(t, "redis pw", m.Redis.Password)
	require.Equal(t, "kafka pw", m.Kafka.SASLPassword)
	redisTLS, err := m.redisTLS()
	require.NoError(t, err)
	require.Equal(t, "redis.internal", redisTLS.ServerName)
	require.True(t, redisTLS.RootCAs.Equal(certs.Pool))
	require.Empty(t, redisTLS.Certificates)
	kafkaTLS, mech, err := m.kafka()
	require.NoError(t, err)
	require.Nil(t, kafkaTLS.RootCAs, "no CA file: the system's roots")
	require.Len(t, kafkaTLS.Certificates, 1)
	require.Equal(t, "SCRAM-SHA-256", mech.Name())

	// Nothing set: no TLS, no SASL, the default URL.
	none := func(string) string { return "" }
	url, err = databaseURLFromEnv(none, defaultDatabaseURL)
	require.NoError(t, err)
	require.Equal(t, defaultDatabaseURL, url)
	m, err = managedFromEnv(none)
	require.NoError(t, err)
	require.Equal(t, ManagedConfig{}, m)
	kafkaTLS, mech, err = m.kafka()
	require.NoError(t, err)
	require.Nil(t, kafkaTLS)
	require.Nil(t, mech)
}
