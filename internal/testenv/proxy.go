package testenv

import (
	"bytes"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy on a free loopback port in front of one server (a
// PostgreSQL, say), which can cut a connection right after the server
// answered: the request was processed, its answer never arrives. It lives
// until the test's cleanup.
type Proxy struct {
	// Addr is host:port of the proxy.
	Addr string

	target string
	ln     net.Listener

	mu     sync.Mutex
	marker []byte        // armed: cut the first answer containing it
	settle time.Duration // how long the server's output is drained after a cut
	cut    chan struct{} // closed when the armed cut happened
	conns  map[net.Conn]bool
}

// NewProxy starts a proxy to target (host:port).
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: proxy listen: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]bool{}}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL returns rawURL with its host replaced by the proxy's address.
func (p *Proxy) URL(t testing.TB, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("testenv: proxy URL: %v", err)
	}
	u.Host = p.Addr
	return u.String()
}

// CutAnswerContaining arms the proxy: the first chunk the server sends on
// any connection that contains marker is not forwarded; the proxy keeps
// reading and dropping that server's output for settle (so the server
// finishes what it was doing, a COMMIT included) and then closes both sides
// of the connection. The returned channel is closed once the cut is done.
func (p *Proxy) CutAnswerContaining(marker []byte, settle time.Duration) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marker = bytes.Clone(marker)
	p.cut = make(chan struct{})
	p.settle = settle
	return p.cut
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = true, true
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
		go p.serverToClient(s, c)
	}
}

// serverToClient forwards the server's output, unless an armed marker shows
// up in it.
func (p *Proxy) serverToClient(s, c net.Conn) {
	defer c.Close()
	defer s.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			p.mu.Lock()
			hit := p.marker != nil && bytes.Contains(buf[:n], p.marker)
			var cut chan struct{}
			settle := p.settle
			if hit {
				p.marker, cut = nil, p.cut
			}
			p.mu.Unlock()
			if hit {
				_ = s.SetReadDeadline(time.Now().Add(settle))
				_, _ = io.Copy(io.Discard, s)
				_ = c.Close()
				_ = s.Close()
				close(cut)
				return
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}
