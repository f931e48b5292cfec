// Package tracing owns voucherd's OpenTelemetry traces: the tracer provider
// and its OTLP exporter, the instrumentation of each client the service uses
// (the HTTP server with otelhttp, pgx with otelpgx, franz-go with kotel,
// rueidis with a small wrapper), the spans of writes that carry several
// requests at once, and the slog handler that puts the trace id into log
// lines.
//
// Tracing is off unless cmd builds a Provider: nothing is wrapped then, so
// an untraced process pays nothing for it. The OTLP exporter reads its
// endpoint, headers and timeouts from the standard OTEL_EXPORTER_OTLP_*
// variables, the SDK reads the sampler from OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG, and the resource from OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Protocols of the OTLP exporter, as OTEL_EXPORTER_OTLP_PROTOCOL spells them.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// instrumentationName names the tracer of the spans this package starts
// itself (combined writes, Redis commands).
const instrumentationName = "github.com/voucherd/voucherd/internal/tracing"

// Config configures a Provider. Zero values mean the defaults.
type Config struct {
	// Protocol is the OTLP exporter's protocol: ProtocolHTTP (default) or
	// ProtocolGRPC.
	Protocol string
	// Exporter, when set, receives the spans instead of an OTLP exporter
	// (tests use the SDK's in-memory exporter).
	Exporter sdktrace.SpanExporter
	// ServiceName is the service.name resource attribute when
	// OTEL_SERVICE_NAME does not set it (default "voucherd").
	ServiceName string
	// ServiceVersion is the service.version resource attribute.
	ServiceVersion string
	// Redact, when set, is applied to every text a span carries out of
	// the process (its name, string attributes, status description and
	// events) before the exporter sees it: voucherd passes the e-mail
	// redaction of internal/pii, which covers the URL path of
	// /customers/{customerId}.
	Redact func(string) string
}

// Provider is an SDK tracer provider with the instrumentation of voucherd's
// clients. It is safe for concurrent use.
type Provider struct {
	tp     *sdktrace.TracerProvider
	prop   propagation.TextMapPropagator
	tracer trace.Tracer
}

// New builds the provider and its exporter. The exporter connects lazily:
// a collector that is down loses spans, it does not stop the service.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.ServiceName == "" {
		cfg.ServiceName = "voucherd"
	}
	exp := cfg.Exporter
	if exp == nil {
		var err error
		switch cfg.Protocol {
		case "", ProtocolHTTP:
			exp, err = otlptracehttp.New(ctx)
		case ProtocolGRPC:
			exp, err = otlptracegrpc.New(ctx)
		default:
			return nil, fmt.Errorf("tracing: OTLP protocol must be %s or %s, not %q", ProtocolHTTP, ProtocolGRPC, cfg.Protocol)
		}
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
		}
	}
	if cfg.Redact != nil {
		exp = redactingExporter{next: exp, redact: cfg.Redact}
	}
	// Later options win: the environment (OTEL_SERVICE_NAME,
	// OTEL_RESOURCE_ATTRIBUTES) overrides the defaults given here.
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", cfg.ServiceName),
			attribute.String("service.version", cfg.ServiceVersion)),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// No sampler option: the SDK takes OTEL_TRACES_SAMPLER and its argument,
	// by default parentbased_always_on.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Provider{
		tp:     tp,
		prop:   propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		tracer: tp.Tracer(instrumentationName),
	}, nil
}

// TracerProvider returns the SDK provider.
func (p *Provider) TracerProvider() trace.TracerProvider { return p.tp }

// ForceFlush exports the spans ended so far.
func (p *Provider) ForceFlush(ctx context.Context) error { return p.tp.ForceFlush(ctx) }

// Shutdown exports the spans still buffered, within ctx, and stops the
// exporter.
func (p *Provider) Shutdown(ctx context.Context) error { return p.tp.Shutdown(ctx) }

// Handler wraps h with otelhttp: a server span per request, named after the
// route pattern, continuing the caller's W3C traceparent. Probes and metric
// scrapes (untracedPaths) are served without a span.
func (p *Provider) Handler(h http.Handler) http.Handler {
	return otelhttp.NewHandler(h, "voucherd",
		otelhttp.WithTracerProvider(p.tp),
		otelhttp.WithPropagators(p.prop),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithFilter(func(r *http.Request) bool { return !untracedPaths[r.URL.Path] }),
	)
}

// untracedPaths are the routes of load balancers and scrapers: a trace per
// probe would be noise.
var untracedPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// QueryTracer returns an otelpgx tracer: a span per SQL statement, a child
// of the span in the statement's context. Statement parameters are not
// recorded (they hold order and customer ids).
func (p *Provider) QueryTracer() pgx.QueryTracer {
	return otelpgx.NewTracer(
		otelpgx.WithTracerProvider(p.tp),
		otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelpgx.WithDisableConnectionDetailsInAttributes(),
	)
}

// KafkaOpts returns the franz-go options that trace produce and fetch with
// kotel: a publish span per produced record, whose context travels in the
// record's headers, and a receive span per fetched record, continuing it.
func (p *Provider) KafkaOpts() []kgo.Opt {
	k := kotel.NewKotel(kotel.WithTracer(kotel.NewTracer(
		kotel.TracerProvider(p.tp),
		kotel.TracerPropagator(p.prop),
	)))
	return []kgo.Opt{kgo.WithHooks(k.Hooks()...)}
}
