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
// PostgreSQL, say), which can cut a connection at a chosen request or
// answer: cutting a request means the server never got it; cutting an
// answer, that the server processed the request but its answer never
// arrives. It can also hang every connection for a while (Hang): bytes are
// held back, then let through. It lives until the test's cleanup.
type Proxy struct {
	// Addr is host:port of the proxy.
	Addr string

	target string
	ln     net.Listener

	mu    sync.Mutex
	cuts  [2]*cut // armed cuts by direction
	conns map[net.Conn]bool
	// hangUntil is the end of the current hang (Hang); bytes read before
	// it are forwarded at it.
	hangUntil time.Time
}

// Directions of a proxied connection.
const (
	toServer = 0
	toClient = 1
)

// cut is one armed cut: the first chunk containing marker is dropped, the
// sender's output is drained for settle, then both sides are closed.
type cut struct {
	marker []byte
	settle time.Duration
	done   chan struct{}
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

// CutAnswerContaining arms the proxy: the first chunk a server sends on any
// connection that contains marker is not forwarded; the proxy keeps reading
// and dropping that server's output for settle (so that the server finishes
// what it was doing, a COMMIT included) and then closes both sides of the
// connection. The returned channel is closed once the cut is done.
func (p *Proxy) CutAnswerContaining(marker []byte, settle time.Duration) <-chan struct{} {
	return p.arm(toClient, marker, settle)
}

// cutWait bounds WaitCut: far longer than any armed call takes to send
// its marker, even on a loaded machine.
const cutWait = time.Minute

// WaitCut waits until cut, a channel CutAnswerContaining or
// CutRequestContaining returned, is done, and fails the test when it is
// not within cutWait: nothing the proxy was armed for passed it (the call
// failed before sending or answering it).
func WaitCut(t testing.TB, cut <-chan struct{}) {
	t.Helper()
	select {
	case <-cut:
	case <-time.After(cutWait):
		t.Fatalf("testenv: the proxy's cut did not happen within %s: nothing it was armed for passed it", cutWait)
	}
}

// CutRequestContaining arms the proxy: the first chunk a client sends on any
// connection that contains marker never reaches the server, and both sides
// of the connection are closed. The returned channel is closed once the cut
// is done.
func (p *Proxy) CutRequestContaining(marker []byte) <-chan struct{} {
	return p.arm(toServer, marker, 0)
}

// Hang holds back every byte the proxy receives, in both directions, on
// every connection (new ones included), from now for d, and then forwards
// them in order: calls through the proxy hang, as when packets are
// dropped, and none is refused or reset; a connection a side closed
// meanwhile still delivers what it sent before. The returned channel is
// closed when the hang ends.
func (p *Proxy) Hang(d time.Duration) <-chan struct{} {
	until := time.Now().Add(d)
	p.mu.Lock()
	if until.After(p.hangUntil) {
		p.hangUntil = until
	}
	p.mu.Unlock()
	done := make(chan struct{})
	time.AfterFunc(d, func() { close(done) })
	return done
}

// waitHang returns once no hang holds bytes back.
func (p *Proxy) waitHang() {
	for {
		p.mu.Lock()
		wait := time.Until(p.hangUntil)
		p.mu.Unlock()
		if wait <= 0 {
			return
		}
		time.Sleep(wait)
	}
}

func (p *Proxy) arm(dir int, marker []byte, settle time.Duration) <-chan struct{} {
	c := &cut{marker: bytes.Clone(marker), settle: settle, done: make(chan struct{})}
	p.mu.Lock()
	p.cuts[dir] = c
	p.mu.Unlock()
	return c.done
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
		go p.pipe(c, s, toServer)
		go p.pipe(s, c, toClient)
	}
}

// pipe forwards from's output to to, unless an armed cut of its direction
// matches it.
func (p *Proxy) pipe(from, to net.Conn, dir int) {
	defer to.Close()
	defer from.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			p.mu.Lock()
			c := p.cuts[dir]
			hit := c != nil && bytes.Contains(buf[:n], c.marker)
			if hit {
				p.cuts[dir] = nil
			}
			p.mu.Unlock()
			if hit {
				if c.settle > 0 {
					_ = from.SetReadDeadline(time.Now().Add(c.settle))
					_, _ = io.Copy(io.Discard, from)
				}
				_ = to.Close()
				_ = from.Close()
				close(c.done)
				return
			}
			p.waitHang()
			if _, werr := to.Write(buf[:n]); werr != nil {
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
