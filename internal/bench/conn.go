package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// endpoint is one server the workers send to: where to connect and the
// request heads built once for it.
type endpoint struct {
	baseURL string
	addr    string      // host:port to dial
	tls     *tls.Config // nil for http
	// noop is the whole GET /healthz request.
	noop []byte
	// reserve holds, per voucher, the head of its reservation request up to
	// and including "Content-Length: "; the length, a blank line and the
	// body follow.
	reserve [][]byte
	// stack is the head of a request of an order of several codes (POST
	// /reservations) up to and including "Content-Length: "; nil outside
	// a run of stacks.
	stack []byte
	// pathPrefix is the base URL's path, without a trailing slash.
	pathPrefix string
	host       string
	auth       string // "Authorization: Bearer ...\r\n" or ""
}

func newEndpoint(baseURL, apiToken string) (*endpoint, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, err
	}
	e := &endpoint{baseURL: baseURL, host: u.Host, pathPrefix: u.Path}
	port := u.Port()
	switch u.Scheme {
	case "http":
		if port == "" {
			port = "80"
		}
	case "https":
		if port == "" {
			port = "443"
		}
		e.tls = &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}}
	default:
		return nil, fmt.Errorf("bench: unsupported scheme %q", u.Scheme)
	}
	e.addr = net.JoinHostPort(u.Hostname(), port)
	if apiToken != "" {
		e.auth = "Authorization: Bearer " + apiToken + "\r\n"
	}
	e.noop = []byte("GET " + e.pathPrefix + "/healthz HTTP/1.1\r\nHost: " + e.host + "\r\n\r\n")
	return e, nil
}

// addStack prepares the request head of orders of several codes.
func (e *endpoint) addStack() {
	e.stack = []byte("POST " + e.pathPrefix + "/reservations HTTP/1.1\r\n" +
		"Host: " + e.host + "\r\nContent-Type: application/json\r\n" + e.auth + "Content-Length: ")
}

// addVoucher prepares the reservation request head of one more voucher.
func (e *endpoint) addVoucher(code string) {
	e.reserve = append(e.reserve, []byte("POST "+e.pathPrefix+"/vouchers/"+url.PathEscape(code)+"/reservations HTTP/1.1\r\n"+
		"Host: "+e.host+"\r\nContent-Type: application/json\r\n"+e.auth+"Content-Length: "))
}

// errBadResponse is a response the client cannot parse; the connection is
// closed and the request counts as without an answer.
var errBadResponse = errors.New("bench: malformed HTTP response")

// httpConn is one worker's keep-alive HTTP/1.1 connection: one request at a
// time, written in one call from bytes the worker prepared, and a response
// parser that reads only the status, the framing headers and the body. It
// is used by one goroutine; it redials after any error or a
// "Connection: close".
type httpConn struct {
	ep      *endpoint
	timeout time.Duration
	ctx     context.Context

	c        net.Conn
	br       *bufio.Reader
	deadline time.Time
	unwatch  func() bool
	body     []byte // the last response's body (up to maxBody)
}

func newHTTPConn(ctx context.Context, ep *endpoint, timeout time.Duration) *httpConn {
	return &httpConn{ep: ep, timeout: timeout, ctx: ctx, body: make([]byte, 0, 1024)}
}

func (h *httpConn) dial(now time.Time) error {
	d := net.Dialer{Timeout: min(h.timeout, 5*time.Second), Deadline: now.Add(h.timeout)}
	c, err := d.DialContext(h.ctx, "tcp", h.ep.addr)
	if err != nil {
		return err
	}
	if h.ep.tls != nil {
		tc := tls.Client(c, h.ep.tls)
		_ = tc.SetDeadline(now.Add(h.timeout))
		if err := tc.HandshakeContext(h.ctx); err != nil {
			_ = c.Close()
			return err
		}
		c = tc
	}
	h.c = c
	if h.br == nil {
		h.br = bufio.NewReaderSize(c, 16<<10)
	} else {
		h.br.Reset(c)
	}
	h.deadline = time.Time{}
	// Cancelling the run's context ends the request in flight at once.
	h.unwatch = context.AfterFunc(h.ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	return nil
}

func (h *httpConn) close() {
	if h.c == nil {
		return
	}
	h.unwatch()
	_ = h.c.Close()
	h.c = nil
}

// roundTrip sends req, which must be a whole HTTP/1.1 request, and returns
// the response's status; the body is in h.body until the next call. start
// is when the request began: it is bounded to the client's timeout from
// then (the deadline is moved only when it has fallen more than a sixteenth
// of the timeout behind, so most requests set none).
func (h *httpConn) roundTrip(req []byte, start time.Time) (int, error) {
	if h.c == nil {
		if err := h.dial(start); err != nil {
			return 0, err
		}
	}
	if want := start.Add(h.timeout); want.Sub(h.deadline) > h.timeout/16 {
		if err := h.c.SetDeadline(want); err != nil {
			h.close()
			return 0, err
		}
		h.deadline = want
	}
	if _, err := h.c.Write(req); err != nil {
		h.close()
		return 0, err
	}
	status, keep, err := h.readResponse()
	if err != nil {
		h.close()
		return 0, err
	}
	if !keep {
		h.close()
	}
	return status, nil
}

// readResponse parses one response: status line, headers (only
// Content-Length, Transfer-Encoding and Connection matter) and body. It
// reports whether the connection may carry another request.
func (h *httpConn) readResponse() (status int, keep bool, err error) {
	line, err := h.br.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// "HTTP/1.1 409 Conflict\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, false, errBadResponse
	}
	status = int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	if status < 100 || status > 599 {
		return 0, false, errBadResponse
	}
	keep = line[7] == '1'
	length, chunked := int64(-1), false
	for {
		line, err = h.br.ReadSlice('\n')
		if err != nil {
			return 0, false, err
		}
		if len(line) <= 2 { // "\r\n": end of the headers
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			return 0, false, errBadResponse
		}
		name, value := line[:colon], bytes.TrimSpace(line[colon+1:])
		switch {
		case asciiEqualFold(name, "content-length"):
			n, perr := strconv.ParseInt(string(value), 10, 64)
			if perr != nil || n < 0 {
				return 0, false, errBadResponse
			}
			length = n
		case asciiEqualFold(name, "transfer-encoding"):
			chunked = asciiEqualFold(value, "chunked")
			if !chunked {
				return 0, false, errBadResponse
			}
		case asciiEqualFold(name, "connection"):
			if asciiEqualFold(value, "close") {
				keep = false
			}
		}
	}
	h.body = h.body[:0]
	switch {
	case status < 200 || status == 204 || status == 304:
		if status < 200 {
			// 1xx: the bench sends no Expect and no Upgrade.
			return 0, false, errBadResponse
		}
	case chunked:
		err = h.readChunked()
	case length >= 0:
		err = h.readBody(length)
	default:
		// No framing: the body runs to the end of the connection.
		err = h.readBody(-1)
		keep = false
	}
	return status, keep, err
}

// readBody reads n bytes of body (to EOF when n < 0), keeping the first
// maxBody in h.body.
func (h *httpConn) readBody(n int64) error {
	if n < 0 {
		for {
			if len(h.body) == cap(h.body) {
				if len(h.body) >= maxBody {
					_, err := io.Copy(io.Discard, h.br)
					return err
				}
				h.body = append(h.body, 0)[:len(h.body)]
			}
			m, err := h.br.Read(h.body[len(h.body):cap(h.body)])
			h.body = h.body[:len(h.body)+m]
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	keep := int(min(n, maxBody))
	h.body = append(h.body[:0], make([]byte, keep)...)
	if _, err := io.ReadFull(h.br, h.body); err != nil {
		return err
	}
	_, err := h.br.Discard(int(n) - keep)
	return err
}

// readChunked reads a chunked body and its trailers.
func (h *httpConn) readChunked() error {
	for {
		line, err := h.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimSpace(line)
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		size, err := strconv.ParseInt(string(line), 16, 64)
		if err != nil || size < 0 {
			return errBadResponse
		}
		if size == 0 {
			for { // trailers, up to the blank line
				line, err := h.br.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(line) <= 2 {
					return nil
				}
			}
		}
		keepN := min(size, int64(maxBody-len(h.body)))
		start := len(h.body)
		h.body = append(h.body, make([]byte, keepN)...)
		if _, err := io.ReadFull(h.br, h.body[start:]); err != nil {
			return err
		}
		if _, err := h.br.Discard(int(size - keepN)); err != nil {
			return err
		}
		if _, err := h.br.Discard(2); err != nil { // CRLF after the data
			return err
		}
	}
}

// asciiEqualFold reports whether b equals the lower-case ASCII s, ignoring
// case.
func asciiEqualFold[B []byte | string](b B, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// outcomeUnknown reports whether an error body carries
// "outcomeUnknown": true: the one 503 after which the request may still
// take effect (Kafka mode, the event not acknowledged in time).
func outcomeUnknown(body []byte) bool {
	i := bytes.Index(body, []byte(`"outcomeUnknown"`))
	if i < 0 {
		return false
	}
	rest := bytes.TrimLeft(body[i+len(`"outcomeUnknown"`):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return false
	}
	return bytes.HasPrefix(bytes.TrimLeft(rest[1:], " \t\r\n"), []byte("true"))
}

// errorCode returns the value of the top-level "error" member of a
// voucherd error body without decoding the JSON (the bodies are small,
// flat objects written by the server), or nil.
func errorCode(body []byte) []byte {
	i := bytes.Index(body, []byte(`"error"`))
	if i < 0 {
		return nil
	}
	rest := bytes.TrimLeft(body[i+len(`"error"`):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return nil
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) == 0 || rest[0] != '"' {
		return nil
	}
	rest = rest[1:]
	j := bytes.IndexByte(rest, '"')
	if j <= 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return nil
	}
	return rest[:j]
}
