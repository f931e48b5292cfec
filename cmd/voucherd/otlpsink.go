package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// otlpSink is an OTLP/HTTP endpoint on loopback that accepts trace exports
// and discards them, counting what it got: `voucherd bench --otlp-sink`
// measures what tracing costs the server without a collector's own load.
type otlpSink struct {
	srv            *http.Server
	url            string
	exports, bytes atomic.Int64
}

func startOTLPSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{url: "http://" + ln.Addr().String()}
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

// useForTraces points this process's OTLP trace exporter at the sink.
func (s *otlpSink) useForTraces() error {
	if p := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p != "" && p != "http/protobuf" {
		return fmt.Errorf("--otlp-sink speaks http/protobuf, not OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=%s", p)
	}
	if p := os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" && p != "http/protobuf" {
		return fmt.Errorf("--otlp-sink speaks http/protobuf, not OTEL_EXPORTER_OTLP_PROTOCOL=%s", p)
	}
	if err := os.Unsetenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); err != nil {
		return err
	}
	return os.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", s.url)
}

func (s *otlpSink) close(w io.Writer) {
	_ = s.srv.Close()
	fmt.Fprintf(w, "voucherd bench: the OTLP sink received %d exports, %d bytes\n", s.exports.Load(), s.bytes.Load())
}
