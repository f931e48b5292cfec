package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
)

// TestManagedServices runs voucherd against dependencies secured as managed
// services are: PostgreSQL with TLS checked under sslmode=verify-full,
// Redis (one server and a Cluster) with TLS only and an ACL user (the
// default user off), and Kafka
// with a SASL_SSL listener and SCRAM users. A flash sale in Kafka mode goes
// through all three; then each wrong credential or CA stops the start with
// a message naming the dependency. One broker serves every subtest.
func TestManagedServices(t *testing.T) {
	t.Parallel()
	certs := testenv.NewCerts(t)
	pgSrv := testenv.NewPostgresTLS(t, certs)
	pgSrv.AddPasswordUser(t, "app", "pg-secret")
	redis := testenv.NewRedisWith(t, testenv.RedisOptions{TLS: certs, Users: [][]string{
		{"voucherd", "on", ">redis-secret", "~*", "&*", "+@all"},
		{"default", "off"},
	}})
	kafka := testenv.NewKafkaSASL(t, certs, map[string]string{"voucherd": "kafka-secret"})

	secrets := t.TempDir()
	writeSecret := func(name, value string) string {
		p := secrets + "/" + name
		require.NoError(t, os.WriteFile(p, []byte(value+"\n"), 0o600))
		return p
	}
	redisPassword := writeSecret("redis-password", "redis-secret")
	kafkaPassword := writeSecret("kafka-password", "kafka-secret")
	// secure is how a deployment would set it: the passwords in files,
	// each dependency checked against the test's CA.
	secure := func(env map[string]string) ManagedConfig {
		base := map[string]string{
			"VOUCHERD_REDIS_USERNAME": "voucherd", "VOUCHERD_REDIS_PASSWORD_FILE": redisPassword,
			"VOUCHERD_REDIS_TLS": "true", "VOUCHERD_REDIS_CA_FILE": certs.CAFile,
			"VOUCHERD_KAFKA_TLS": "true", "VOUCHERD_KAFKA_CA_FILE": certs.CAFile,
			"VOUCHERD_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256", "VOUCHERD_KAFKA_SASL_USERNAME": "voucherd",
			"VOUCHERD_KAFKA_SASL_PASSWORD_FILE": kafkaPassword,
		}
		for k, v := range env {
			if v == "" {
				delete(base, k)
			} else {
				base[k] = v
			}
		}
		m, err := managedFromEnv(func(name string) string { return base[name] })
		require.NoError(t, err)
		return m
	}
	kafkaMode := func(t *testing.T, m ManagedConfig) func(*Config) {
		topic := testenv.Topic(t, kafka.Brokers, 3)
		return func(cfg *Config) {
			cfg.FlashWrites = "kafka"
			cfg.KafkaBrokers = kafka.SASLBrokers
			cfg.KafkaTopic = topic
			cfg.KafkaDLQTopic = topic + ".dlq"
			cfg.KafkaEventsTopic = topic + ".events"
			cfg.KafkaGroup = "g-" + topic
			cfg.Managed = m
		}
	}

	t.Run("flash sale", func(t *testing.T) {
		start := time.Now()
		db := pgSrv.NewDatabase(t)
		s := newStack(t, stackOptions{flash: true, databaseURL: pgSrv.TLSURL(db.Database, certs.CAFile),
			redisAddrs: []string{redis.Addr}, tweak: kafkaMode(t, secure(nil))})
		// Kafka mode came from tweak (the SASL_SSL broker, not the shared
		// one): settle must wait for the consumer as in Kafka mode.
		s.opts.kafka = true
		var ssl bool
		require.NoError(t, s.db.QueryRow(context.Background(), "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl))
		require.True(t, ssl, "the test's own connection, made with the same URL, uses TLS")

		code := s.createVoucher(voucherSpec{TotalLimit: 3})
		for i := 1; i <= 4; i++ {
			r := s.reserve(code, int64(i), fmt.Sprintf("m-%d", i), 100)
			if i <= 3 {
				require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			} else {
				require.Equal(t, "HELD_OUT", r.str("error"), string(r.raw))
			}
		}
		s.settle(code, 3) // the consumer, over SASL_SSL, wrote them to PostgreSQL
		s.confirmEventually(code, "m-1")
		require.Equal(t, http.StatusOK, s.do(http.MethodDelete, "/vouchers/"+code+"/reservations/m-2", nil).status)
		r := s.reserve(code, 5, "m-5", 100)
		require.Equal(t, http.StatusCreated, r.status, "the released use is reserved again: %s", r.raw)
		s.settle(code, 3)
		s.assertConsistent(code)
		r = s.do(http.MethodGet, "/readyz", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		t.Logf("flash sale over TLS PostgreSQL, TLS+ACL Redis, SASL_SSL Kafka: %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("postgres password from a file", func(t *testing.T) {
		db := pgSrv.NewDatabase(t)
		urlFile := writeSecret("database-url", pgSrv.TLSURLAs(db.Database, certs.CAFile, url.UserPassword("app", "pg-secret")))
		dbURL, err := databaseURLFromEnv(func(name string) string {
			return map[string]string{"VOUCHERD_DATABASE_URL_FILE": urlFile}[name]
		}, defaultDatabaseURL)
		require.NoError(t, err)
		s := newStack(t, stackOptions{databaseURL: dbURL})
		var user string
		var ssl bool
		require.NoError(t, s.db.QueryRow(context.Background(),
			"SELECT current_user, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&user, &ssl))
		require.Equal(t, "app", user)
		require.True(t, ssl)
		code := s.createVoucher(voucherSpec{TotalLimit: 1})
		require.Equal(t, http.StatusCreated, s.reserve(code, 1, "p-1", 100).status)
	})

	t.Run("redis cluster", func(t *testing.T) {
		cluster := testenv.NewRedisClusterWith(t, testenv.RedisOptions{TLS: certs, Users: [][]string{
			{"voucherd", "on", ">redis-secret", "~*", "&*", "+@all"},
			{"default", "off"},
		}})
		db := pgSrv.NewDatabase(t)
		s := newStack(t, stackOptions{flash: true, databaseURL: pgSrv.TLSURL(db.Database, certs.CAFile),
			redisAddrs: cluster.Addrs, tweak: kafkaMode(t, secure(nil))})
		s.opts.kafka = true
		for i := range 3 {
			code := s.createVoucher(voucherSpec{TotalLimit: 2}) // codes hash to different nodes
			require.Equal(t, http.StatusCreated, s.reserve(code, 1, fmt.Sprintf("c-%d", i), 100).status)
			s.settle(code, 1)
			s.assertConsistent(code)
		}
	})

	// The other mechanisms and a Redis client certificate: the start
	// succeeds and the dependencies are ready.
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"kafka PLAIN", map[string]string{"VOUCHERD_KAFKA_SASL_MECHANISM": "PLAIN"}},
		{"kafka SCRAM-SHA-512", map[string]string{"VOUCHERD_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512"}},
		{"redis client certificate", map[string]string{"VOUCHERD_REDIS_CERT_FILE": certs.ClientCert, "VOUCHERD_REDIS_KEY_FILE": certs.ClientKey,
			"VOUCHERD_REDIS_SERVER_NAME": "localhost"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := pgSrv.NewDatabase(t)
			s := newStack(t, stackOptions{flash: true, databaseURL: pgSrv.TLSURL(db.Database, certs.CAFile),
				redisAddrs: []string{redis.Addr}, tweak: kafkaMode(t, secure(tc.env))})
			s.opts.kafka = true
			r := s.do(http.MethodGet, "/readyz", nil)
			require.Equal(t, http.StatusOK, r.status, string(r.raw))
			code := s.createVoucher(voucherSpec{TotalLimit: 2})
			require.Equal(t, http.StatusCreated, s.reserve(code, 1, "a-1", 100).status)
			s.settle(code, 1)
		})
	}

	// Each wrong setting alone: the start fails, naming the dependency.
	for _, tc := range []struct {
		name    string
		env     map[string]string
		pgCA    string
		want    []string
		noKafka bool
		// pgUser connects as this user instead of the trusted superuser.
		pgUser *url.Userinfo
		// noEvents turns threshold events off, so that the Kafka-mode log,
		// not the events producer, is the first client to meet the broker.
		noEvents bool
	}{
		{name: "redis wrong password", env: map[string]string{"VOUCHERD_REDIS_PASSWORD_FILE": writeSecret("wrong-redis", "nope")},
			want: []string{"redis:", "WRONGPASS"}},
		{name: "redis no password", env: map[string]string{"VOUCHERD_REDIS_USERNAME": "", "VOUCHERD_REDIS_PASSWORD_FILE": ""},
			want: []string{"redis:", "NOAUTH"}},
		{name: "redis unknown CA", env: map[string]string{"VOUCHERD_REDIS_CA_FILE": certs.OtherCAFile},
			want: []string{"redis:", "certificate signed by unknown authority"}},
		{name: "kafka wrong password", env: map[string]string{"VOUCHERD_KAFKA_SASL_PASSWORD_FILE": writeSecret("wrong-kafka", "nope")},
			want: []string{"kafka:", "SASL authentication failed"}},
		{name: "kafka SCRAM-SHA-512 wrong password", env: map[string]string{"VOUCHERD_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "VOUCHERD_KAFKA_SASL_PASSWORD_FILE": writeSecret("wrong-kafka", "nope")},
			want: []string{"kafka:", "SASL authentication failed"}},
		{name: "kafka wrong password, no threshold events", noEvents: true,
			env:  map[string]string{"VOUCHERD_KAFKA_SASL_PASSWORD_FILE": writeSecret("wrong-kafka", "nope")},
			want: []string{"kafka: open: SASL authentication failed", "create topics"}},
		{name: "kafka unknown CA", env: map[string]string{"VOUCHERD_KAFKA_CA_FILE": certs.OtherCAFile},
			want: []string{"kafka:", "certificate signed by unknown authority"}},
		{name: "postgres wrong password", pgUser: url.UserPassword("app", "nope"), noKafka: true,
			want: []string{"postgres: credentials refused", "28P01"}},
		{name: "postgres unknown CA", pgCA: certs.OtherCAFile, noKafka: true,
			want: []string{"postgres:", "certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := pgSrv.NewDatabase(t)
			pgCA := certs.CAFile
			if tc.pgCA != "" {
				pgCA = tc.pgCA
			}
			pgUser := tc.pgUser
			if pgUser == nil {
				pgUser = url.User("postgres")
			}
			cfg := Config{
				Addr: "127.0.0.1:0", DatabaseURL: pgSrv.TLSURLAs(db.Database, pgCA, pgUser), FlashWrites: "sync",
				ReservationTTL: time.Minute, ExpiryInterval: time.Second, MigrateOnStart: true,
				ShutdownTimeout: 5 * time.Second, MaxDBConns: 4, HeartbeatTTL: 3 * time.Second,
				RedisAddrs: []string{redis.Addr}, RedisKeyPrefix: "bad:", RedisTimeout: 3 * time.Second,
				ProduceTimeout: 2 * time.Second, WriteTimeout: 5 * time.Second, KafkaPartitions: 1, RunConsumer: true,
				Managed: secure(tc.env),
			}
			if !tc.noKafka {
				kafkaMode(t, secure(tc.env))(&cfg)
			}
			if tc.noEvents {
				cfg.LowStockShare = -1
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			app, err := NewApp(ctx, cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				_ = app.Close()
			}
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			require.Less(t, time.Since(start), 20*time.Second, "a refused credential fails fast: %v", err)
			t.Logf("refused in %s: %v", time.Since(start).Round(time.Millisecond), err)
		})
	}
}
