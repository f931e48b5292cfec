package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// BatchSpan returns a hook for a write that carries several requests at once
// (the store's combined reservations, the consumer's batch of records). The
// hook takes the write's own context and the contexts of the requests it
// carries, and returns the context to write with and the function that ends
// its span.
//
// A write that carries one request whose span is still open (a reservation
// waiting for its combined write) continues that span: its statements are
// children of the request, with no extra span. Otherwise the hook starts a
// span named name as a child of the first carried request that is sampled
// (or of the first one when none is), so that a sampled request's trace
// holds the statements that wrote it, with a link to each carried request
// when there are several: the others reach the write through their links.
func (p *Provider) BatchSpan(name string) func(ctx context.Context, carried []context.Context) (context.Context, func()) {
	return func(ctx context.Context, carried []context.Context) (context.Context, func()) {
		if len(carried) == 0 {
			return ctx, func() {}
		}
		if len(carried) == 1 {
			if sp := trace.SpanFromContext(carried[0]); sp.IsRecording() {
				return trace.ContextWithSpan(ctx, sp), func() {}
			}
		}
		parent := trace.SpanContextFromContext(carried[0])
		var links []trace.Link
		if len(carried) > 1 {
			links = make([]trace.Link, 0, len(carried))
		}
		for _, c := range carried {
			sc := trace.SpanContextFromContext(c)
			if !sc.IsValid() {
				continue
			}
			if sc.IsSampled() && !parent.IsSampled() {
				parent = sc
			}
			if links != nil {
				links = append(links, trace.Link{SpanContext: sc})
			}
		}
		ctx, span := p.tracer.Start(trace.ContextWithSpanContext(ctx, parent), name,
			trace.WithLinks(links...),
			trace.WithAttributes(attribute.Int("voucherd.batch.size", len(carried))))
		return ctx, func() { span.End() }
	}
}
