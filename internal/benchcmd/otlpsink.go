package benchcmd

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// OTLPSink is an OTLP/HTTP endpoint on loopback that accepts trace exports
// and discards them, counting what it got: `voucherd bench --otlp-sink`
// measures what tracing costs the servers without a collector's own load,
// and tests use it as a collector that is always there.
type OTLPSink struct {
	// URL is the endpoint's base, "http://127.0.0.1:port": the value of
	// OTEL_EXPORTER_OTLP_ENDPOINT that sends a process's spans here.
	URL string

	srv            *http.Server
	exports, bytes atomic.Int64
}

// StartOTLPSink listens on a free loopback port and serves POST /v1/traces
// until Close.
func StartOTLPSink() (*OTLPSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &OTLPSink{URL: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.exports.Add(1)
		s.bytes.Add(n)
		// An empty body is an empty ExportTraceServiceResponse: all accepted.
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Exports returns how many trace exports the sink received.
func (s *OTLPSink) Exports() int64 { return s.exports.Load() }

// Bytes returns how many bytes of trace exports the sink received.
func (s *OTLPSink) Bytes() int64 { return s.bytes.Load() }

// Close stops serving.
func (s *OTLPSink) Close() { _ = s.srv.Close() }

// tracesTo returns env pointing a process's OTLP trace exporter at the
// sink. The sink speaks http/protobuf only, so a protocol set otherwise
// in env is an error.
func (s *OTLPSink) tracesTo(env []string) ([]string, error) {
	for _, key := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p, _ := envValue(env, key); p != "" && p != "http/protobuf" {
			return nil, fmt.Errorf("--otlp-sink speaks http/protobuf, not %s=%s", key, p)
		}
	}
	var out []string
	for _, kv := range env {
		// A traces endpoint would win over the general one.
		if !strings.HasPrefix(kv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=") {
			out = append(out, kv)
		}
	}
	return append(out, "OTEL_EXPORTER_OTLP_ENDPOINT="+s.URL), nil
}
