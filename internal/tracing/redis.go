package tracing

import (
	"context"

	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// RedisClient wraps c so that every Do and DoMulti is a client span, a
// child of the span in the call's context. scriptName, when set, names the
// script an EVALSHA or EVAL runs, from the script's SHA-1 or source: the
// span of a script is then "EVALSHA reserve". Keys and arguments are not
// recorded (they hold order and customer ids). The other methods are c's.
func (p *Provider) RedisClient(c rueidis.Client, scriptName func(shaOrSource string) string) rueidis.Client {
	return &redisClient{Client: c, tracer: p.tracer, scriptName: scriptName}
}

type redisClient struct {
	rueidis.Client
	tracer     trace.Tracer
	scriptName func(string) string
}

var redisSystem = attribute.String("db.system.name", "redis")

// start starts the span of cmd. It reads cmd before the call: rueidis
// recycles a command once sent.
func (c *redisClient) start(ctx context.Context, cmd rueidis.Completed) (context.Context, trace.Span) {
	words := cmd.Commands()
	op := ""
	if len(words) > 0 {
		op = words[0]
	}
	name := op
	attrs := []attribute.KeyValue{redisSystem, attribute.String("db.operation.name", op)}
	if c.scriptName != nil && len(words) > 1 {
		switch op {
		case "EVALSHA", "EVALSHA_RO", "EVAL", "EVAL_RO":
			if s := c.scriptName(words[1]); s != "" {
				name = op + " " + s
				attrs = append(attrs, attribute.String("db.stored_procedure.name", s))
			}
		}
	}
	return c.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endRedis ends span, with err as its error unless err is a nil reply or
// NOSCRIPT (rueidis then sends the script with EVAL: the protocol, not a
// failure).
func endRedis(span trace.Span, err error) {
	if rueidis.IsRedisNil(err) {
		err = nil
	} else if re, ok := rueidis.IsRedisErr(err); ok && re.IsNoScript() {
		err = nil
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Do implements rueidis.Client.
func (c *redisClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	ctx, span := c.start(ctx, cmd)
	res := c.Client.Do(ctx, cmd)
	endRedis(span, res.Error())
	return res
}

// DoMulti implements rueidis.Client.
func (c *redisClient) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	ctx, span := c.tracer.Start(ctx, "pipeline", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(redisSystem, attribute.String("db.operation.name", "PIPELINE"),
			attribute.Int("db.operation.batch.size", len(multi))))
	res := c.Client.DoMulti(ctx, multi...)
	var err error
	for _, r := range res {
		if e := r.Error(); e != nil && !rueidis.IsRedisNil(e) {
			err = e
			break
		}
	}
	endRedis(span, err)
	return res
}
