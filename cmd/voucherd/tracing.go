package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/voucherd/voucherd/internal/kafkalog"
	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/pii"
	"github.com/voucherd/voucherd/internal/redisgate"
	"github.com/voucherd/voucherd/internal/tracing"
)

// tracingFromEnv reads the OpenTelemetry variables that decide whether
// voucherd traces: OTEL_TRACES_EXPORTER=otlp turns tracing on (unset or
// "none", the default, leaves it off), OTEL_SDK_DISABLED=true turns it off
// whatever else is set, and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (or
// OTEL_EXPORTER_OTLP_PROTOCOL) picks http/protobuf (default) or grpc. The
// exporter and the SDK read the other OTEL_* variables themselves. It
// returns nil when tracing is off.
func tracingFromEnv(getenv func(string) string) (*tracing.Config, error) {
	if v := getenv("OTEL_SDK_DISABLED"); v != "" {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("OTEL_SDK_DISABLED=%q: want true or false", v)
		}
		if off {
			return nil, nil
		}
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "", "none":
		return nil, nil
	case "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: voucherd supports otlp or none", exp)
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", tracing.ProtocolHTTP, tracing.ProtocolGRPC:
	default:
		return nil, fmt.Errorf("OTLP protocol %q: voucherd supports %s or %s", proto, tracing.ProtocolHTTP, tracing.ProtocolGRPC)
	}
	return &tracing.Config{Protocol: proto, ServiceVersion: version}, nil
}

// openTracing builds the tracer provider when cfg.Tracing is set, and
// returns the logger that adds trace ids to the lines of traced requests.
// Without cfg.Tracing it returns nil and log unchanged: nothing is wrapped.
func openTracing(ctx context.Context, cfg Config, log *slog.Logger) (*tracing.Provider, *slog.Logger, error) {
	if cfg.Tracing == nil {
		return nil, log, nil
	}
	tp, err := tracing.New(ctx, *cfg.Tracing)
	if err != nil {
		return nil, nil, err
	}
	return tp, slog.New(tracing.LogHandler(log.Handler())), nil
}

// redactPII returns cfg and log set to replace customer e-mail addresses
// with a keyed hash (cfg.PIIKey, internal/pii) in every log line and, when
// tracing is on, every exported span.
func redactPII(cfg Config, log *slog.Logger) (Config, *slog.Logger, error) {
	red, err := pii.New([]byte(cfg.PIIKey))
	if err != nil {
		return cfg, nil, fmt.Errorf("VOUCHERD_PII_KEY: %w", err)
	}
	if cfg.Tracing != nil {
		tc := *cfg.Tracing
		tc.Redact = red.Redact
		cfg.Tracing = &tc
	}
	return cfg, slog.New(red.Handler(log.Handler())), nil
}

// closeTracing exports the spans still buffered, within a few seconds.
func closeTracing(tp *tracing.Provider, log *slog.Logger) {
	if tp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("tracing: spans not exported at shutdown", "err", err)
	}
}

// tracePostgres adds the statement tracer and the spans of combined writes.
func tracePostgres(pcfg pgstore.Config, tp *tracing.Provider) pgstore.Config {
	if tp != nil {
		pcfg.Tracer = tp.QueryTracer()
		pcfg.BatchContext = tp.BatchSpan("pgstore combined reserve")
	}
	return pcfg
}

// traceRedis adds the spans of Redis commands, scripts named.
func traceRedis(rcfg redisgate.Config, tp *tracing.Provider) redisgate.Config {
	if tp != nil {
		rcfg.WrapClient = func(c rueidis.Client) rueidis.Client { return tp.RedisClient(c, redisgate.ScriptName) }
	}
	return rcfg
}

// traceKafka adds kotel's hooks to the Kafka clients and puts the
// consumer's write in the records' traces.
func traceKafka(kcfg kafkalog.Config, tp *tracing.Provider) kafkalog.Config {
	if tp != nil {
		kcfg.ClientOpts = append(kcfg.ClientOpts, tp.KafkaOpts()...)
		kcfg.ApplyContext = tp.BatchSpan("kafkalog apply reserved")
	}
	return kcfg
}
