package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/multitracer"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/voucherd/voucherd/internal/benchcmd"
	"github.com/voucherd/voucherd/internal/tracing"
)

// tracedStack is a stack whose spans go to an in-memory exporter.
type tracedStack struct {
	*stack
	spans *tracetest.InMemoryExporter
	logs  *syncBuffer
}

func newTracedStack(t *testing.T, opts stackOptions) *tracedStack {
	exp := tracetest.NewInMemoryExporter()
	logs := &syncBuffer{}
	tweak := opts.tweak
	opts.tweak = func(c *Config) {
		c.Tracing = &tracing.Config{Exporter: exp}
		if tweak != nil {
			tweak(c)
		}
	}
	opts.logs = logs
	s := newStack(t, opts)
	require.NotNil(t, s.app.tracing)
	return &tracedStack{stack: s, spans: exp, logs: logs}
}

// reserveTraced reserves with a W3C traceparent of a new sampled trace, as
// a caller that traces its checkout sends it, and returns the trace and the
// caller's span.
func (s *tracedStack) reserveTraced(code string, customer int64, orderID string) (trace.TraceID, trace.SpanID) {
	return s.reserveWithParent(code, customer, orderID, true)
}

// reserveWithParent is reserveTraced with the caller's sampled flag.
func (s *tracedStack) reserveWithParent(code string, customer int64, orderID string, sampled bool) (trace.TraceID, trace.SpanID) {
	s.t.Helper()
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], fmt.Appendf(nil, "%016x", time.Now().UnixNano()))
	copy(sid[:], fmt.Appendf(nil, "%08x", s.codes.Add(1)))
	body := fmt.Sprintf(`{"customerId":%d,"orderId":%q,"orderAmount":5000}`, customer, orderID)
	req, err := http.NewRequest(http.MethodPost, s.base+"/vouchers/"+code+"/reservations", strings.NewReader(body))
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "Bearer "+testAPIToken)
	req.Header.Set("Content-Type", "application/json")
	flags := "00"
	if sampled {
		flags = "01"
	}
	req.Header.Set("traceparent", fmt.Sprintf("00-%s-%s-%s", tid, sid, flags))
	resp, err := httpClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	require.Equal(s.t, http.StatusCreated, resp.StatusCode)
	return tid, sid
}

// waitSpans flushes until the spans of trace tid satisfy ok (the consumer
// writes asynchronously), and returns them.
func (s *tracedStack) waitSpans(tid trace.TraceID, ok func([]tracetest.SpanStub) bool) []tracetest.SpanStub {
	s.t.Helper()
	var got []tracetest.SpanStub
	deadline := time.Now().Add(30 * time.Second)
	for {
		require.NoError(s.t, s.app.tracing.ForceFlush(context.Background()))
		got = got[:0]
		for _, sp := range s.spans.GetSpans() {
			if sp.SpanContext.TraceID() == tid {
				got = append(got, sp)
			}
		}
		if ok(got) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func attr(sp tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range sp.Attributes {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// sqlSpan returns the first span of a statement whose text holds fn.
func sqlSpan(spans []tracetest.SpanStub, fn string) (tracetest.SpanStub, bool) {
	for _, sp := range spans {
		if strings.Contains(attr(sp, "db.query.text"), fn+"(") {
			return sp, true
		}
	}
	return tracetest.SpanStub{}, false
}

func spanNamed(spans []tracetest.SpanStub, name string) (tracetest.SpanStub, bool) {
	for _, sp := range spans {
		if sp.Name == name {
			return sp, true
		}
	}
	return tracetest.SpanStub{}, false
}

// descends reports whether span sp has ancestor anc among spans.
func descends(spans []tracetest.SpanStub, sp tracetest.SpanStub, anc trace.SpanID) bool {
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
	}
	for i := 0; i < len(spans)+1; i++ {
		p := sp.Parent.SpanID()
		if p == anc {
			return true
		}
		next, ok := byID[p]
		if !ok {
			return false
		}
		sp = next
	}
	return false
}

// requireLogsTraced checks that the request's log line carries the trace.
func (s *tracedStack) requireLogsTraced(tid trace.TraceID) {
	s.t.Helper()
	found := false
	for _, line := range strings.Split(s.logs.String(), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		require.NoError(s.t, json.Unmarshal([]byte(line), &rec), line)
		if rec["msg"] == "request" && rec["route"] == "POST /vouchers/{code}/reservations" && rec["trace_id"] == tid.String() {
			require.NotEmpty(s.t, rec["span_id"])
			found = true
		}
	}
	require.True(s.t, found, "no request log line with trace_id %s in:\n%s", tid, s.logs.String())
}

// TestTraceSync follows one flash reservation in sync mode from the
// caller's traceparent through the HTTP span, the Redis script and the SQL
// statement that wrote the row, all in the caller's trace.
func TestTraceSync(t *testing.T) {
	t.Parallel()
	s := newTracedStack(t, stackOptions{flash: true})
	code := s.createVoucher(voucherSpec{TotalLimit: 5})
	tid, caller := s.reserveTraced(code, 1, "trace-sync-1")

	spans := s.waitSpans(tid, func(sp []tracetest.SpanStub) bool {
		_, ok := sqlSpan(sp, "voucherd_reserve_one")
		return ok
	})
	server, ok := spanNamed(spans, "POST /vouchers/{code}/reservations")
	require.True(t, ok, "no HTTP span in %v", spanNames(spans))
	require.Equal(t, caller, server.Parent.SpanID(), "the HTTP span continues the caller's span")
	require.Equal(t, trace.SpanKindServer, server.SpanKind)
	redis, ok := spanNamed(spans, "EVALSHA reserve")
	require.True(t, ok, "no Redis script span in %v", spanNames(spans))
	require.True(t, descends(spans, redis, server.SpanContext.SpanID()))
	sql, ok := sqlSpan(spans, "voucherd_reserve_one")
	require.True(t, ok, "no SQL span in %v", spanNames(spans))
	require.True(t, descends(spans, sql, server.SpanContext.SpanID()))
	require.Equal(t, 1, s.state(code).reserved, "the row the trace wrote")
	s.requireLogsTraced(tid)
}

// TestTraceKafka follows one reservation in Kafka mode: the publish span is
// in the request's trace, and the consumer's write joins it through the
// record's headers.
func TestTraceKafka(t *testing.T) {
	t.Parallel()
	s := newTracedStack(t, stackOptions{kafka: true})
	code := s.createVoucher(voucherSpec{TotalLimit: 5})
	tid, caller := s.reserveTraced(code, 1, "trace-kafka-1")
	s.settle(code, 1)

	spans := s.waitSpans(tid, func(sp []tracetest.SpanStub) bool {
		_, ok := sqlSpan(sp, "voucherd_apply_reserved_codes")
		return ok
	})
	server, ok := spanNamed(spans, "POST /vouchers/{code}/reservations")
	require.True(t, ok, "no HTTP span in %v", spanNames(spans))
	require.Equal(t, caller, server.Parent.SpanID())
	_, ok = spanNamed(spans, "EVALSHA reserve")
	require.True(t, ok, "no Redis script span in %v", spanNames(spans))
	publish, ok := spanNamed(spans, s.cfg.KafkaTopic+" publish")
	require.True(t, ok, "no Kafka publish span in %v", spanNames(spans))
	require.True(t, descends(spans, publish, server.SpanContext.SpanID()))
	receive, ok := spanNamed(spans, s.cfg.KafkaTopic+" receive")
	require.True(t, ok, "no Kafka receive span in %v", spanNames(spans))
	require.Equal(t, publish.SpanContext.SpanID(), receive.Parent.SpanID(), "the consumer continues the record's trace")
	write, ok := sqlSpan(spans, "voucherd_apply_reserved_codes")
	require.True(t, ok, "no consumer write span in %v", spanNames(spans))
	require.True(t, descends(spans, write, server.SpanContext.SpanID()))
	require.Equal(t, 1, s.state(code).reserved, "the row the trace wrote")
	s.requireLogsTraced(tid)
}

// TestTraceCombinedBatch checks that a combined write links every
// reservation it carries, and that each traced request still reaches the
// write: through its parent or its link.
func TestTraceCombinedBatch(t *testing.T) {
	t.Parallel()
	s := newTracedStack(t, stackOptions{tweak: func(c *Config) { c.CombineWrites = true }})
	const n = 24
	code := s.createVoucher(voucherSpec{TotalLimit: 10 * n})
	for round := 0; round < 10; round++ {
		traces := make([]trace.TraceID, n)
		parallel(n, n, func(i int) {
			traces[i], _ = s.reserveTraced(code, int64(round*n+i+1), fmt.Sprintf("trace-batch-%d-%d", round, i))
		})
		require.NoError(t, s.app.tracing.ForceFlush(context.Background()))
		mine := map[trace.TraceID]bool{}
		for _, tid := range traces {
			mine[tid] = true
		}
		for _, sp := range s.spans.GetSpans() {
			if sp.Name != "pgstore combined reserve" || !mine[sp.SpanContext.TraceID()] {
				continue
			}
			require.GreaterOrEqual(t, len(sp.Links), 2)
			require.Equal(t, fmt.Sprint(len(sp.Links)), attr(sp, "voucherd.batch.size"))
			for _, l := range sp.Links {
				require.True(t, mine[l.SpanContext.TraceID()], "a link to a request of this round")
			}
			require.Equal(t, sp.Parent.TraceID(), sp.SpanContext.TraceID())
			require.True(t, mine[sp.Parent.TraceID()], "the write is a child of one of its requests")
			return
		}
	}
	t.Fatal("no combined write of two or more traced reservations in 10 rounds of concurrent requests")
}

func spanNames(spans []tracetest.SpanStub) []string {
	names := make([]string, len(spans))
	for i, sp := range spans {
		names[i] = sp.Name
	}
	return names
}

// TestTraceUnsampledCaller: a caller that did not sample its trace gets no
// spans recorded (the default sampler follows the parent), and the request's
// log line still carries its trace id.
func TestTraceUnsampledCaller(t *testing.T) {
	t.Parallel()
	s := newTracedStack(t, stackOptions{flash: true})
	code := s.createVoucher(voucherSpec{TotalLimit: 5})
	tid, _ := s.reserveWithParent(code, 1, "trace-unsampled-1", false)
	sampled, _ := s.reserveTraced(code, 2, "trace-unsampled-2")
	// The sampled request's spans are exported: the unsampled one's would
	// have been by the same flush.
	s.waitSpans(sampled, func(sp []tracetest.SpanStub) bool {
		_, ok := sqlSpan(sp, "voucherd_reserve_one")
		return ok
	})
	require.Empty(t, s.waitSpans(tid, func([]tracetest.SpanStub) bool { return true }))
	require.Equal(t, 2, s.state(code).reserved)
	s.requireLogsTraced(tid)
}

func TestTracingFromEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env     map[string]string
		on      bool
		proto   string
		wantErr string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, proto: "grpc"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, on: true, proto: "http/protobuf"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "false"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: "zipkin"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: "http/json"},
		{env: map[string]string{"OTEL_SDK_DISABLED": "maybe"}, wantErr: "OTEL_SDK_DISABLED"},
	} {
		cfg, err := tracingFromEnv(func(k string) string { return tc.env[k] })
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, "%v", tc.env)
			continue
		}
		require.NoError(t, err, "%v", tc.env)
		require.Equal(t, tc.on, cfg != nil, "%v", tc.env)
		if tc.on {
			require.Equal(t, tc.proto, cfg.Protocol)
		}
	}
}

// TestTracingOffWrapsNothing: without tracing (the default) the server,
// the pgx pool and the Redis client are the plain ones.
func TestTracingOffWrapsNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true})
	require.Nil(t, s.app.tracing)
	require.Same(t, s.app.api.Handler(), s.app.server.Handler)
	_, multi := s.app.store.Pool().Config().ConnConfig.Tracer.(*multitracer.Tracer)
	require.False(t, multi, "only the statement counter traces pgx")
}

// TestTracingOTLPFromEnv: the OTEL_* variables alone turn tracing on and
// send the spans over OTLP/HTTP to the endpoint they name.
func TestTracingOTLPFromEnv(t *testing.T) {
	sink, err := benchcmd.StartOTLPSink()
	require.NoError(t, err)
	defer sink.Close()
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_SERVICE_NAME", "voucherd-test")
	s := newStack(t, stackOptions{tweak: func(c *Config) {
		c.Tracing, c.tracingEnvErr = tracingFromEnv(os.Getenv)
	}})
	require.NotNil(t, s.app.tracing)
	code := s.createVoucher(voucherSpec{})
	require.Equal(t, http.StatusCreated, s.reserve(code, 1, "otlp-env-1", 5000).status)
	require.NoError(t, s.app.tracing.ForceFlush(context.Background()))
	require.Positive(t, sink.Exports())
	require.Positive(t, sink.Bytes())
}
