package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// redactingExporter passes each span to next with redact applied to its
// name, its string attributes, its status description and its events'
// names and string attributes: every text a span carries out of the
// process. Spans without anything to change are passed as they are.
type redactingExporter struct {
	next   sdktrace.SpanExporter
	redact func(string) string
}

// ExportSpans implements sdktrace.SpanExporter.
func (e redactingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		out[i] = e.span(s)
	}
	return e.next.ExportSpans(ctx, out)
}

// Shutdown implements sdktrace.SpanExporter.
func (e redactingExporter) Shutdown(ctx context.Context) error { return e.next.Shutdown(ctx) }

// redactedSpan is a span with some of its texts replaced.
type redactedSpan struct {
	sdktrace.ReadOnlySpan
	name   string
	attrs  []attribute.KeyValue
	status sdktrace.Status
	events []sdktrace.Event
}

func (s redactedSpan) Name() string                     { return s.name }
func (s redactedSpan) Attributes() []attribute.KeyValue { return s.attrs }
func (s redactedSpan) Status() sdktrace.Status          { return s.status }
func (s redactedSpan) Events() []sdktrace.Event         { return s.events }

func (e redactingExporter) span(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	r := redactedSpan{ReadOnlySpan: s, name: e.redact(s.Name()), status: s.Status()}
	changed := r.name != s.Name()
	var c bool
	r.attrs, c = e.attributes(s.Attributes())
	changed = changed || c
	if d := e.redact(r.status.Description); d != r.status.Description {
		r.status.Description, changed = d, true
	}
	events := s.Events()
	r.events = events
	for i, ev := range events {
		name := e.redact(ev.Name)
		attrs, c := e.attributes(ev.Attributes)
		if name == ev.Name && !c {
			continue
		}
		if len(r.events) > 0 && &r.events[0] == &events[0] {
			r.events = append([]sdktrace.Event(nil), events...)
		}
		r.events[i].Name, r.events[i].Attributes, changed = name, attrs, true
	}
	if !changed {
		return s
	}
	return r
}

// attributes returns attrs with their string values redacted, and whether
// any changed (attrs itself when none did).
func (e redactingExporter) attributes(attrs []attribute.KeyValue) ([]attribute.KeyValue, bool) {
	var out []attribute.KeyValue
	for i, kv := range attrs {
		if kv.Value.Type() != attribute.STRING {
			continue
		}
		red := e.redact(kv.Value.AsString())
		if red == kv.Value.AsString() {
			continue
		}
		if out == nil {
			out = append([]attribute.KeyValue(nil), attrs...)
		}
		out[i] = attribute.String(string(kv.Key), red)
	}
	if out == nil {
		return attrs, false
	}
	return out, true
}
