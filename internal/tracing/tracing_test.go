package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/voucherd/voucherd/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func newTestProvider(t *testing.T) (*Provider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	p, err := New(context.Background(), Config{Exporter: exp})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p, exp
}

func flushed(t *testing.T, p *Provider, exp *tracetest.InMemoryExporter) tracetest.SpanStubs {
	t.Helper()
	require.NoError(t, p.ForceFlush(context.Background()))
	return exp.GetSpans()
}

func TestNewRefusesUnknownProtocol(t *testing.T) {
	t.Parallel()
	_, err := New(context.Background(), Config{Protocol: "http/json"})
	require.ErrorContains(t, err, "http/json")
}

// TestNewOTLPIsLazy: an OTLP exporter whose collector is not there does not
// stop the service from starting, and shutting down is bounded.
func TestNewOTLPIsLazy(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"", ProtocolHTTP, ProtocolGRPC} {
		p, err := New(context.Background(), Config{Protocol: proto})
		require.NoError(t, err, proto)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = p.Shutdown(ctx)
		cancel()
	}
}

// TestHandlerContinuesTraceparent: the server span is a child of the
// caller's W3C traceparent and named after the route.
func TestHandlerContinuesTraceparent(t *testing.T) {
	t.Parallel()
	p, exp := newTestProvider(t)
	mux := http.NewServeMux()
	var inHandler trace.SpanContext
	mux.HandleFunc("POST /vouchers/{code}/reservations", func(w http.ResponseWriter, r *http.Request) {
		inHandler = trace.SpanContextFromContext(r.Context())
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	srv := httptest.NewServer(p.Handler(mux))
	defer srv.Close()
	probe, err := http.Get(srv.URL + "/healthz")
	require.NoError(t, err)
	probe.Body.Close()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/vouchers/X/reservations", nil)
	require.NoError(t, err)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()

	spans := flushed(t, p, exp)
	require.Len(t, spans, 1, "no span for the probe")
	require.Equal(t, "POST /vouchers/{code}/reservations", spans[0].Name)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", spans[0].SpanContext.TraceID().String())
	require.Equal(t, "00f067aa0ba902b7", spans[0].Parent.SpanID().String())
	require.Equal(t, spans[0].SpanContext, inHandler)
}

func TestLogHandler(t *testing.T) {
	t.Parallel()
	p, _ := newTestProvider(t)
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	ctx, span := p.tracer.Start(context.Background(), "request")
	log.InfoContext(ctx, "traced")
	span.End()
	log.Info("untraced")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	var traced, untraced map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &traced))
	require.NoError(t, json.Unmarshal(lines[1], &untraced))
	require.Equal(t, span.SpanContext().TraceID().String(), traced["trace_id"])
	require.Equal(t, span.SpanContext().SpanID().String(), traced["span_id"])
	require.Equal(t, "test", traced["component"], "WithAttrs keeps the wrapper")
	require.NotContains(t, untraced, "trace_id")
}

// TestBatchSpanOne: a write of one request whose span is open adds no span:
// its statements are the request's children.
func TestBatchSpanOne(t *testing.T) {
	t.Parallel()
	p, exp := newTestProvider(t)
	hook := p.BatchSpan("write")
	rctx, req := p.tracer.Start(context.Background(), "request")
	ctx, done := hook(context.Background(), []context.Context{rctx})
	require.Equal(t, req, trace.SpanFromContext(ctx))
	done()
	req.End()
	require.Len(t, flushed(t, p, exp), 1)
}

// TestBatchSpanEndedParent: a record whose receive span has ended gets a
// write span of its own, a child in the same trace.
func TestBatchSpanEndedParent(t *testing.T) {
	t.Parallel()
	p, exp := newTestProvider(t)
	rctx, rec := p.tracer.Start(context.Background(), "receive")
	rec.End()
	ctx, done := p.BatchSpan("write")(context.Background(), []context.Context{rctx})
	require.True(t, trace.SpanFromContext(ctx).IsRecording())
	done()
	var write tracetest.SpanStub
	for _, s := range flushed(t, p, exp) {
		if s.Name == "write" {
			write = s
		}
	}
	require.Equal(t, rec.SpanContext().SpanID(), write.Parent.SpanID())
	require.Empty(t, write.Links)
}

// TestBatchSpanLinks: a write of several requests links each and is a child
// of the first sampled one.
func TestBatchSpanLinks(t *testing.T) {
	t.Parallel()
	p, exp := newTestProvider(t)
	unsampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1},
	}))
	a, sa := p.tracer.Start(context.Background(), "a")
	b, sb := p.tracer.Start(context.Background(), "b")
	ctx, done := p.BatchSpan("write")(context.Background(), []context.Context{unsampled, a, b, context.Background()})
	require.Equal(t, sa.SpanContext().TraceID(), trace.SpanContextFromContext(ctx).TraceID())
	done()
	sa.End()
	sb.End()
	var write tracetest.SpanStub
	for _, s := range flushed(t, p, exp) {
		if s.Name == "write" {
			write = s
		}
	}
	require.Equal(t, sa.SpanContext().SpanID(), write.Parent.SpanID(), "child of the first sampled request")
	require.Len(t, write.Links, 3, "a link to each request with a span")
	require.Equal(t, trace.TraceID{1}, write.Links[0].SpanContext.TraceID())
	require.Equal(t, sa.SpanContext(), write.Links[1].SpanContext)
	require.Equal(t, sb.SpanContext(), write.Links[2].SpanContext)
}

// TestRedisClient runs a script and a pipeline through the wrapper against
// a real Redis.
func TestRedisClient(t *testing.T) {
	t.Parallel()
	p, exp := newTestProvider(t)
	raw, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.Redis(t).Addr}, DisableCache: true})
	require.NoError(t, err)
	defer raw.Close()
	const src = "return redis.call('GET', KEYS[1])"
	script := rueidis.NewLuaScript(src)
	c := p.RedisClient(raw, func(s string) string {
		if s == src || len(s) == 40 {
			return "get"
		}
		return ""
	})
	ctx, req := p.tracer.Start(context.Background(), "request")
	key := "tracing-test:" + t.Name()
	err = script.Exec(ctx, c, []string{key}, nil).Error()
	require.True(t, rueidis.IsRedisNil(err), "%v", err)
	res := c.DoMulti(ctx, c.B().Set().Key(key).Value("1").Build(), c.B().Del().Key(key).Build())
	require.Len(t, res, 2)
	req.End()

	byName := map[string]tracetest.SpanStub{}
	for _, s := range flushed(t, p, exp) {
		byName[s.Name] = s
	}
	sha, ok := byName["EVALSHA get"]
	require.True(t, ok, "%v", byName)
	require.Equal(t, req.SpanContext().SpanID(), sha.Parent.SpanID())
	require.Equal(t, trace.SpanKindClient, sha.SpanKind)
	pipe, ok := byName["pipeline"]
	require.True(t, ok)
	require.Equal(t, req.SpanContext().SpanID(), pipe.Parent.SpanID())
	for _, s := range byName {
		require.NotEqual(t, "Error", s.Status.Code.String(), "a nil reply is not an error: %s", s.Name)
	}
}
