package httpapi

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/voucherd/voucherd/internal/live"
	"github.com/voucherd/voucherd/internal/voucher"
)

// The live sale view:
//
//	GET /vouchers/{code}/live   Server-Sent Events: "snapshot" events with a
//	                            live.Snapshot as JSON, about once per
//	                            second, the first at once; "stale" events
//	                            ({error, message}) when a tick's read failed;
//	                            comment heartbeats.
//	GET /ui/vouchers/{code}     a self-contained HTML page that shows the
//	                            stream's numbers and a rolling chart.
//
// The stream needs a key: a read key (see Key), or a reservation or admin
// key in the Authorization header. A browser's EventSource cannot send an
// Authorization header, so this route, and only this one, also accepts a
// token as ?token=, and there only a read key: tokens in URLs end up in
// proxy logs and browser history, and a read key can change nothing. The
// page passes on the token of its own URL. It is sent with Referrer-Policy
// no-referrer so its URL (and token) does not leak to other sites.

const (
	liveRoute = "GET /vouchers/{code}/live"
	pageRoute = "GET /ui/vouchers/{code}"
	// liveHeartbeat keeps idle proxies from closing the stream and finds
	// clients that went away without closing.
	liveHeartbeat = 15 * time.Second
	// liveWriteTimeout bounds each write to a stream, so that a client that
	// stops reading frees its watcher instead of blocking forever.
	liveWriteTimeout = 10 * time.Second
	// liveRetry is the reconnection delay EventSource clients are told to use.
	liveRetry = 2 * time.Second
)

//go:embed ui/live.html
var livePage []byte

// livePageCSP allows the page's own inline script and style (by hash) and
// connections to this origin, nothing else.
var livePageCSP = pageCSP(livePage)

// LiveRoutes returns a Config.Extra function that registers the live sale
// view's routes: the event stream (a key; a read key also as ?token=) and
// the page.
func LiveRoutes(hub *live.Hub) func(mux *http.ServeMux, wrap func(route string, admin bool, h HandlerFunc) http.Handler) {
	return func(mux *http.ServeMux, wrap func(string, bool, HandlerFunc) http.Handler) {
		stream := wrap(liveRoute, false, liveStream(hub))
		mux.Handle(liveRoute, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tok := r.URL.Query().Get("token"); tok != "" && r.Header.Get("Authorization") == "" {
				r = withURLToken(r, tok)
			}
			stream.ServeHTTP(w, r)
		}))
		mux.Handle(pageRoute, livePageHandler())
	}
}

// liveStream streams a voucher's snapshots until the client leaves or the
// hub closes. Errors before the first snapshot (unknown voucher, too many
// watchers, database down) are answered as ordinary JSON errors.
func liveStream(hub *live.Hub) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		watch, err := hub.Watch(r.PathValue("code"))
		if err != nil {
			return err
		}
		defer watch.Close()
		ctx := r.Context()
		var first live.Update
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-watch.C():
			if !ok {
				return voucher.Unavailable(live.ErrClosed, "the server is shutting down")
			}
			if u.Err != nil {
				return u.Err
			}
			first = u
		}

		rc := http.NewResponseController(w)
		// The server's read and write timeouts are meant for ordinary
		// requests; a stream lives as long as its client. An expired read
		// deadline would also cancel the request's context.
		_ = rc.SetReadDeadline(time.Time{})
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "retry: %d\n\n", liveRetry.Milliseconds())
		if err := writeEvent(&buf, first); err != nil {
			return err
		}
		send := func() bool {
			_ = rc.SetWriteDeadline(time.Now().Add(liveWriteTimeout))
			_, err := w.Write(buf.Bytes())
			buf.Reset()
			return err == nil && rc.Flush() == nil
		}
		w.WriteHeader(http.StatusOK)
		if !send() {
			return nil
		}
		heartbeat := time.NewTicker(liveHeartbeat)
		defer heartbeat.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-heartbeat.C:
				buf.WriteString(": keep-alive\n\n")
			case u, ok := <-watch.C():
				if !ok {
					// The hub closed: the server is shutting down. The client
					// reconnects, to another instance if there is one.
					return nil
				}
				if err := writeEvent(&buf, u); err != nil {
					return nil
				}
			}
			if !send() {
				return nil
			}
		}
	}
}

// writeEvent appends one SSE event: "snapshot" or, for a failed read,
// "stale" with the error body the API would have answered. (Not "error":
// EventSource fires its own "error" events for connection problems.)
func writeEvent(buf *bytes.Buffer, u live.Update) error {
	event, v := "snapshot", any(u.Snapshot)
	if u.Err != nil {
		var e *voucher.Error
		if !errors.As(u.Err, &e) {
			e = &voucher.Error{Code: voucher.CodeInternal}
		}
		msg := e.Message
		if e.Code == voucher.CodeInternal {
			msg = "internal error"
		}
		event, v = "stale", errorJSON{Error: string(e.Code), Message: msg}
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	// JSON has no raw newlines, so the data fits on one data: line.
	buf.WriteString("event: " + event + "\ndata: ")
	buf.Write(data)
	buf.WriteString("\n\n")
	return nil
}

// livePageHandler serves the page for any code that could exist (a valid
// code; others are 404 as in the API), without reading anything: the page
// holds no data, and answering alike for real and unknown codes keeps it
// from telling which codes exist, and from costing a database read per
// request. What the code is worth is learnt only from the stream,
// which needs a key. The voucher code is read by the page's script from
// its own URL, so nothing from the request is written into it.
func livePageHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code := r.PathValue("code"); !voucher.ValidCode(code) {
			writeJSON(w, http.StatusNotFound, errorJSON{Error: string(voucher.CodeVoucherNotFound), Message: "voucher " + strconv.Quote(code) + " not found"})
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(len(livePage)))
		h.Set("Content-Security-Policy", livePageCSP)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(livePage)
	})
}

// pageCSP builds a Content-Security-Policy that allows exactly the page's
// inline <script> and <style> blocks by their SHA-256 hashes.
func pageCSP(page []byte) string {
	hashes := func(tag string) string {
		var out []string
		rest := string(page)
		for {
			_, after, ok := strings.Cut(rest, "<"+tag+">")
			if !ok {
				break
			}
			body, after, ok := strings.Cut(after, "</"+tag+">")
			if !ok {
				break
			}
			sum := sha256.Sum256([]byte(body))
			out = append(out, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
			rest = after
		}
		if len(out) == 0 {
			return "'none'"
		}
		return strings.Join(out, " ")
	}
	return "default-src 'none'; script-src " + hashes("script") + "; style-src " + hashes("style") +
		"; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}
