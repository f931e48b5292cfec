// Package httpapi serves voucherd's HTTP API: routes, JSON
// transfer objects, bearer-token auth, strict decoding, and the one table
// that maps domain error codes to HTTP statuses.
package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/voucherd/voucherd/api"
	"github.com/voucherd/voucherd/internal/voucher"
)

// MaxBodyBytes is the largest request body accepted, but for an import of
// campaign codes (MaxImportBodyBytes).
const MaxBodyBytes = 16 << 10

// MaxImportBodyBytes is the largest body of POST /campaigns/{id}/codes:
// voucher.MaxImportCodes codes of 32 characters with customerIds of 64 fit.
const MaxImportBodyBytes = 2 << 20

// importRoute is the route whose body may be MaxImportBodyBytes long.
const importRoute = "POST /campaigns/{id}/codes"

// bodyLimit is the largest body route accepts.
func bodyLimit(route string) int {
	if route == importRoute {
		return MaxImportBodyBytes
	}
	return MaxBodyBytes
}

// metricsRoute serves Config.MetricsHandler.
const metricsRoute = "GET /metrics"

// statusOf is the one table from error codes to HTTP statuses.
var statusOf = map[voucher.ErrorCode]int{
	voucher.CodeInvalidRequest:       http.StatusBadRequest,
	voucher.CodeUnauthorized:         http.StatusUnauthorized,
	voucher.CodeForbidden:            http.StatusForbidden,
	voucher.CodeVoucherNotFound:      http.StatusNotFound,
	voucher.CodeCampaignNotFound:     http.StatusNotFound,
	voucher.CodeReservationNotFound:  http.StatusNotFound,
	voucher.CodeVoucherExists:        http.StatusConflict,
	voucher.CodeLimitBelowHeld:       http.StatusConflict,
	voucher.CodeReservationReleased:  http.StatusConflict,
	voucher.CodeReservationConfirmed: http.StatusConflict,
	voucher.CodeOutOfStock:           http.StatusConflict,
	voucher.CodeHeldOut:              http.StatusConflict,
	voucher.CodeBudgetExceeded:       http.StatusConflict,
	voucher.CodeBudgetNotSet:         http.StatusConflict,
	voucher.CodeWindowNotSet:         http.StatusConflict,
	voucher.CodeAlreadyUsed:          http.StatusConflict,
	voucher.CodeOrderConflict:        http.StatusConflict,
	voucher.CodeOrderReleased:        http.StatusConflict,
	voucher.CodePartOfStack:          http.StatusConflict,
	voucher.CodeReplacedOrderNotHeld: http.StatusConflict,
	voucher.CodeNotEligible:          http.StatusUnprocessableEntity,
	voucher.CodeNotFlashSale:         http.StatusConflict,
	voucher.CodeUnavailable:          http.StatusServiceUnavailable,
	voucher.CodeTooManyRequests:      http.StatusTooManyRequests,
	voucher.CodeInternal:             http.StatusInternalServerError,
	voucher.CodeWebhookNotFound:      http.StatusNotFound,
	voucher.CodeWebhookURLRefused:    http.StatusUnprocessableEntity,
	CodeNotFound:                     http.StatusNotFound,
	CodeMethodNotAllowed:             http.StatusMethodNotAllowed,
	CodeUnsupportedMediaType:         http.StatusUnsupportedMediaType,
}

// StatusOf returns the HTTP status for an error code.
func StatusOf(code voucher.ErrorCode) int {
	if s, ok := statusOf[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Metrics receives one observation per request. Route is the pattern that
// matched (for example "POST /vouchers/{code}/reservations"), outcome "ok" or
// the error code, key the name of the API key (AnonymousKey when none
// matched).
type Metrics interface {
	ObserveRequest(route, key, outcome string, status int, d time.Duration)
}

// Config configures the API server.
type Config struct {
	// Service is required.
	Service *voucher.Service
	// Keys are the named API keys; nil means the keyring of APIToken
	// (named "api") and AdminToken (named "admin").
	Keys *Keyring
	// APIToken guards the reservation routes when Keys is nil; empty means
	// loopback-only.
	APIToken string
	// AdminToken guards voucher administration when Keys is nil; empty
	// means loopback-only.
	AdminToken string
	// Ready reports whether the instance should receive traffic (/readyz).
	Ready func(ctx context.Context) error
	// Logger receives request logs (default: discard).
	Logger *slog.Logger
	// ReconcileGrace is the grace period of admin-triggered reconciliations
	// (default 30s).
	ReconcileGrace time.Duration
	// Metrics receives request observations (optional).
	Metrics Metrics
	// MetricsHandler serves /metrics on the serving port to read and admin
	// keys (optional; leave it nil when metrics have a listener of their
	// own). Metrics name vouchers and keys: they are never public.
	MetricsHandler http.Handler
	// RateLimits are the per-key and per-client limits and how the client
	// address is found (default: no limit; the TCP peer).
	RateLimits RateLimits
	// Extra registers more routes on the same mux (admin and ops features
	// of other packages).
	Extra func(mux *http.ServeMux, wrap func(route string, admin bool, h HandlerFunc) http.Handler)
}

// HandlerFunc is a route handler that returns an error instead of writing
// it; the error is written once, through the status table.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Server is the HTTP API.
type Server struct {
	cfg      Config
	svc      *voucher.Service
	mux      *http.ServeMux
	keys     *Keyring
	log      *slog.Logger
	draining atomic.Bool
	// byKey and byClient are the rate limits' buckets; nil when off.
	byKey, byClient *buckets
}

// New returns a Server with every route registered.
func New(cfg Config) (*Server, error) {
	if cfg.Service == nil {
		return nil, errors.New("httpapi: Config.Service is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ReconcileGrace <= 0 {
		cfg.ReconcileGrace = 30 * time.Second
	}
	if cfg.Keys == nil {
		var keys []Key
		if cfg.APIToken != "" {
			keys = append(keys, Key{Name: "api", Secret: cfg.APIToken})
		}
		if cfg.AdminToken != "" {
			keys = append(keys, Key{Name: "admin", Secret: cfg.AdminToken, Admin: true})
		}
		k, err := NewKeyring(keys)
		if err != nil {
			return nil, err
		}
		cfg.Keys = k
	}
	s := &Server{cfg: cfg, svc: cfg.Service, mux: http.NewServeMux(), keys: cfg.Keys, log: cfg.Logger,
		byKey: newBuckets(cfg.RateLimits.PerKey), byClient: newBuckets(cfg.RateLimits.PerClient)}
	s.routes()
	return s, nil
}

// Handler returns the root handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Drain makes /readyz fail so that load balancers stop sending traffic
// before shutdown.
func (s *Server) Drain() { s.draining.Store(true) }

func (s *Server) routes() {
	s.mux.Handle("POST /vouchers", s.wrap("POST /vouchers", true, s.createVoucher))
	s.mux.Handle("GET /vouchers/{code}", s.wrap("GET /vouchers/{code}", false, s.getVoucher))
	s.mux.Handle("PATCH /vouchers/{code}", s.wrap("PATCH /vouchers/{code}", true, s.patchVoucher))
	s.mux.Handle("POST /vouchers/{code}/warmup", s.wrap("POST /vouchers/{code}/warmup", true, s.warmup))
	s.mux.Handle("GET /vouchers/{code}/reconciliation", s.wrap("GET /vouchers/{code}/reconciliation", true, s.reconcile(false)))
	s.mux.Handle("POST /vouchers/{code}/reconciliation", s.wrap("POST /vouchers/{code}/reconciliation", true, s.reconcile(true)))
	s.mux.Handle("POST /vouchers/{code}/reservations", s.wrap("POST /vouchers/{code}/reservations", false, s.reserve))
	s.mux.Handle("POST /vouchers/{code}/validation", s.wrap("POST /vouchers/{code}/validation", false, s.validate))
	s.mux.Handle("GET /vouchers/{code}/reservations/{orderId}", s.wrap("GET /vouchers/{code}/reservations/{orderId}", false, s.getReservation))
	s.mux.Handle("POST /vouchers/{code}/reservations/{orderId}/confirm", s.wrap("POST /vouchers/{code}/reservations/{orderId}/confirm", false, s.confirm))
	s.mux.Handle("DELETE /vouchers/{code}/reservations/{orderId}", s.wrap("DELETE /vouchers/{code}/reservations/{orderId}", false, s.release))
	s.mux.Handle("POST /vouchers/{code}/reservations/{orderId}/extend", s.wrap("POST /vouchers/{code}/reservations/{orderId}/extend", false, s.extend))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.Handle("GET /readyz", s.wrap("GET /readyz", false, s.readyz))
	s.mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(api.OpenAPI)
	})
	s.adminRoutes()
	s.campaignRoutes()
	s.stackRoutes()
	if h := s.cfg.MetricsHandler; h != nil {
		s.mux.Handle(metricsRoute, s.wrap(metricsRoute, false, func(w http.ResponseWriter, r *http.Request) error {
			h.ServeHTTP(w, r)
			return nil
		}))
	}
	if s.cfg.Extra != nil {
		s.cfg.Extra(s.mux, s.wrap)
	}
	s.mux.Handle("/", s.wrap("unmatched", false, s.unmatched))
}

// probeMethods are the methods unmatched tries on a path to fill Allow.
var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// unmatched answers a request no route took: 405 with Allow when the path
// has routes for other methods, 404 otherwise.
func (s *Server) unmatched(w http.ResponseWriter, r *http.Request) error {
	var allow []string
	for _, m := range probeMethods {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		return voucher.Errorf(CodeNotFound, "no route for %s %s", r.Method, r.URL.Path)
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	return voucher.Errorf(CodeMethodNotAllowed, "%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", "))
}

// wrap adds request ids, auth (the role of roleOf), body limits, error writing, logging and
// metrics around a route handler. Admin routes carry the key's name as the
// audit trail's actor (voucher.WithActor); no other route changes what the
// audit trail records. Exposed to Config.Extra.
func (s *Server) wrap(route string, admin bool, h HandlerFunc) http.Handler {
	public := route == "GET /readyz"
	want := roleOf(route, admin)
	limit := bodyLimit(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		x := &exchange{statusRecorder: statusRecorder{ResponseWriter: w}}
		w.Header()["X-Request-Id"] = x.requestID(r.Header["X-Request-Id"])
		if r.Body != nil && (r.ContentLength < 0 || r.ContentLength > int64(limit)) {
			// A body of a known length within the limit ends at that
			// length: net/http reads no further.
			r.Body = http.MaxBytesReader(w, r.Body, int64(limit))
		}
		rec := &x.statusRecorder
		var err error
		key := AnonymousKey
		if !public {
			rec.client = s.clientAddr(r)
			err = s.limitClient(rec.client, start)
			if err == nil {
				key, err = s.authenticate(r, want)
			}
			if err == nil {
				err = s.limitKey(key, rec.client, start)
			}
			rec.key = key
		}
		if err == nil {
			if admin {
				r = r.WithContext(voucher.WithActor(r.Context(), key))
			}
			err = h(rec, r)
		}
		if err != nil {
			s.writeError(rec, r, err)
		}
		outcome := "ok"
		if err != nil {
			outcome = string(voucher.CodeOf(err))
		}
		d := time.Since(start)
		if s.cfg.Metrics != nil {
			s.cfg.Metrics.ObserveRequest(route, key, outcome, rec.status, d)
		}
		level := slog.LevelDebug
		if rec.status >= 500 {
			level = failureLevel(r)
		}
		ctx := r.Context()
		if !s.log.Enabled(ctx, level) {
			return
		}
		s.log.LogAttrs(ctx, level, "request", slog.String("request_id", x.id[0]), slog.String("route", route),
			slog.String("key", key), slog.Int("status", rec.status), slog.String("outcome", outcome), slog.Duration("duration", d))
	})
}

// exchange is what wrap keeps per request, in one allocation.
type exchange struct {
	statusRecorder
	id    [1]string // the X-Request-Id header's value
	idBuf [16]byte  // the bytes of id[0] when generated; never changed after
}

// requestID returns the X-Request-Id header value of the answer: the
// client's (its first value, when of 1-128 bytes without CR or LF), else a
// new one (see newRequestID).
func (x *exchange) requestID(got []string) []string {
	if len(got) > 0 && got[0] != "" && len(got[0]) <= 128 && !strings.ContainsAny(got[0], "\r\n") {
		x.id[0] = got[0]
		return x.id[:]
	}
	newRequestID(&x.idBuf)
	// idBuf lives as long as the string (it is part of the same object) and
	// is never written again, so the string may share its bytes.
	x.id[0] = unsafe.String(&x.idBuf[0], len(x.idBuf)) //nolint:gosec // G103: audited, see the comment above
	return x.id[:]
}

func isLoopback(remote string) bool {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().IsLoopback()
	}
	ip, err := netip.ParseAddr(remote)
	return err == nil && ip.IsLoopback()
}

// requestIDs numbers the request ids this process makes, after a random
// prefix drawn at start so that ids of different processes differ.
var (
	requestIDPrefix = func() uint64 {
		var b [4]byte
		_, _ = rand.Read(b[:])
		return uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
	}()
	requestIDs atomic.Uint64
)

// newRequestID writes a request id unique in this process into b (16 hex
// digits: the process's prefix, then a counter).
func newRequestID(b *[16]byte) {
	const hexDigits = "0123456789abcdef"
	n := requestIDPrefix<<32 | requestIDs.Add(1)&0xffffffff
	for i := 15; i >= 0; i-- {
		b[i] = hexDigits[n&0xf]
		n >>= 4
	}
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e, ok := err.(*voucher.Error) // the common case, without errors.As's reflection
	if !ok {
		e = asError(err)
	}
	status := StatusOf(e.Code)
	if status >= 500 {
		s.log.Log(r.Context(), failureLevel(r), "request failed", "request_id", w.Header().Get("X-Request-Id"),
			"code", e.Code, "err", err, "client_left", r.Context().Err() != nil)
	}
	enc := encodeError(e, status)
	h := w.Header()
	if enc.retryAfter != nil {
		h["Retry-After"] = enc.retryAfter
	}
	h["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(enc.body)
}

// failureLevel is the log level of a request answered 5xx: an error,
// unless the client left before the answer (its context ended: net/http
// cancels it when the connection closes), which most often is why the
// work failed ("context canceled"), and which is the client's doing.
func failureLevel(r *http.Request) slog.Level {
	if r.Context().Err() != nil {
		return slog.LevelWarn
	}
	return slog.LevelError
}

// asError returns the *voucher.Error in err's chain, or an internal error
// wrapping err.
func asError(err error) *voucher.Error {
	var e *voucher.Error
	if errors.As(err, &e) {
		return e
	}
	return &voucher.Error{Code: voucher.CodeInternal, Message: "internal error", Err: err}
}

// jsonContentType is the Content-Type of every JSON answer; header maps may
// share it since nothing writes to it.
var jsonContentType = []string{"application/json"}

// encodedError is the wire form of an error answer.
type encodedError struct {
	err        *voucher.Error
	body       []byte
	retryAfter []string // the Retry-After header's value; nil for none
}

// lastStockError is the encoded form of the last sold-out or held-out error
// written. The service answers a sold-out flash voucher with one shared
// *voucher.Error for as long as its answer stays the same (never changed
// once returned), so the rush after a sell-out is answered from here
// without encoding.
var lastStockError atomic.Pointer[encodedError]

// encodeError returns the wire form of e with status.
func encodeError(e *voucher.Error, status int) *encodedError {
	shared := e.Code == voucher.CodeHeldOut || e.Code == voucher.CodeOutOfStock
	if shared {
		if last := lastStockError.Load(); last != nil && last.err == e {
			return last
		}
	}
	msg := e.Message
	if e.Code == voucher.CodeInternal {
		msg = "internal error"
	}
	body := errorJSON{Error: string(e.Code), Message: msg, Reason: string(e.Reason), OutcomeUnknown: e.OutcomeUnknown,
		Limit: string(e.Limit), FailedCode: e.FailedCode}
	if e.Code == voucher.CodeBudgetExceeded {
		remaining := e.BudgetRemaining
		body.BudgetRemaining = &remaining
	}
	if !e.NextWindowAt.IsZero() {
		next := e.NextWindowAt.UTC()
		body.NextWindowAt = &next
	}
	enc := &encodedError{err: e}
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
		body.RetryAfter = &secs
		enc.retryAfter = []string{strconv.FormatInt(secs, 10)}
	} else if status == http.StatusServiceUnavailable {
		enc.retryAfter = []string{"1"}
	}
	enc.body = body.appendJSON(make([]byte, 0, 64+len(msg)))
	if shared {
		lastStockError.Store(enc)
	}
	return enc
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, `{"error":"INTERNAL","message":"encoding failed"}`, http.StatusInternalServerError)
		return
	}
	w.Header()["Content-Type"] = jsonContentType
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// decodeBody reads the request body (see readBody) and hands it to dec,
// which must not keep it.
func decodeBody(r *http.Request, dec func([]byte) error) error {
	return decodeBodyUpTo(r, MaxBodyBytes, dec)
}

// decodeBodyUpTo is decodeBody for a body of at most limit bytes.
func decodeBodyUpTo(r *http.Request, limit int, dec func([]byte) error) error {
	bp, err := readBody(r, limit)
	if err != nil {
		return err
	}
	err = dec(*bp)
	putBody(bp)
	return err
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	// key and client are who sent the request (see requester).
	key, client string
}

func (r *statusRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Flush lets streaming handlers flush through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
