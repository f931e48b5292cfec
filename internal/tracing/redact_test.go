package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestRedactReachesEveryText: with Config.Redact, no text of an exported
// span (name, attributes, the server span's url.path, status, events)
// keeps what Redact replaces.
func TestRedactReachesEveryText(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	redact := func(s string) string { return strings.ReplaceAll(s, "alice@example.com", "REDACTED") }
	p, err := New(context.Background(), Config{Exporter: exp, Redact: redact})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })

	mux := http.NewServeMux()
	mux.HandleFunc("GET /customers/{customerId}/redemptions", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(p.Handler(mux))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/customers/alice@example.com/redemptions")
	require.NoError(t, err)
	resp.Body.Close()

	_, span := p.TracerProvider().Tracer("test").Start(context.Background(), "refuse alice@example.com")
	span.SetAttributes(attribute.String("customer", "alice@example.com"), attribute.Int("n", 7))
	span.RecordError(errors.New("customer alice@example.com holds 1"))
	span.SetStatus(codes.Error, "customer alice@example.com")
	span.End()

	spans := flushed(t, p, exp)
	require.Len(t, spans, 2)
	all := fmt.Sprintf("%+v", spans)
	require.NotContains(t, all, "alice@example.com")
	require.Contains(t, attrOf(spans[0].Attributes, "url.path"), "/customers/REDACTED/redemptions")
	require.Equal(t, "refuse REDACTED", spans[1].Name)
	require.Equal(t, "REDACTED", attrOf(spans[1].Attributes, "customer"))
	require.Equal(t, "7", attrOf(spans[1].Attributes, "n"))
	require.Equal(t, "customer REDACTED", spans[1].Status.Description)
	require.Len(t, spans[1].Events, 1)
	require.Equal(t, "customer REDACTED holds 1", attrOf(spans[1].Events[0].Attributes, "exception.message"))
}

func attrOf(attrs []attribute.KeyValue, key attribute.Key) string {
	for _, kv := range attrs {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}
