package redisgate

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/voucherd/voucherd/internal/tlserr"
)

// dialRetry is how often a Gate that found no Redis in New tries again to
// create its client. Once created, rueidis reconnects by itself.
const dialRetry = time.Second

// errNotConnected is the cause of every call made before the client exists.
var errNotConnected = errors.New("redisgate: not connected to Redis yet")

// clientBox holds the client for an atomic.Pointer (an interface cannot be
// stored in one directly).
type clientBox struct{ rueidis.Client }

// dialFailure is the last error of creating the client.
type dialFailure struct{ err error }

// conn returns the client, or errNotConnected (with the last dial error)
// while New's background loop is still trying to create it.
func (g *Gate) conn() (rueidis.Client, error) {
	if b := g.client.Load(); b != nil {
		return b.Client, nil
	}
	if f := g.dialErr.Load(); f != nil {
		return nil, fmt.Errorf("%w: %w", errNotConnected, f.err)
	}
	return nil, errNotConnected
}

// dial creates the client. rueidis connects (and, on a cluster, reads the
// slots) before it returns, so this fails while no address answers.
func (g *Gate) dial() (rueidis.Client, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: append([]string(nil), g.cfg.Addrs...),
		Username:    g.cfg.Username,
		Password:    g.cfg.Password,
		TLSConfig:   g.cfg.TLS.Clone(),
		// The gate never reads through the client-side cache, and leaving
		// it off keeps the handshake working on servers without RESP3.
		DisableCache:      true,
		MaxFlushDelay:     g.cfg.FlushDelay,
		PipelineMultiplex: pipelineMultiplex(g.cfg.Pipelines),
	})
	if err != nil || g.cfg.WrapClient == nil {
		return c, err
	}
	return g.cfg.WrapClient(c), nil
}

// maxPipelines is the most connections per node Config.Pipelines may ask
// for (rueidis.MaxPipelineMultiplex as a count).
const maxPipelines = 1 << rueidis.MaxPipelineMultiplex

// pipelineMultiplex turns Config.Pipelines into rueidis's
// PipelineMultiplex, the base-2 logarithm of the connections per node: 0
// (the client's default) for 0, else the largest power of two at most n.
// rueidis reads a PipelineMultiplex of 0 as its default, so a single
// connection is asked for with -1.
func pipelineMultiplex(n int) int {
	switch {
	case n <= 0:
		return 0
	case n == 1:
		return -1
	}
	return bits.Len(uint(n)) - 1
}

// isConfigError reports whether a dial error is one that retrying cannot
// fix: Redis answered and refused the credentials, or the TLS handshake
// failed on a certificate.
func isConfigError(err error) bool {
	if tlserr.Permanent(err) {
		return true
	}
	if errors.Is(err, rueidis.ErrNoAddr) {
		return false // no address answered: Redis is down, not misconfigured
	}
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH")
}

// dialLoop retries dial every dialRetry until it succeeds or Close is
// called. A client created after Close is closed at once.
func (g *Gate) dialLoop() {
	t := time.NewTicker(dialRetry)
	defer t.Stop()
	for {
		select {
		case <-g.bg.Done():
			return
		case <-t.C:
		}
		c, err := g.dial()
		if err != nil {
			g.dialErr.Store(&dialFailure{err: err})
			continue
		}
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			c.Close()
			return
		}
		g.client.Store(&clientBox{c})
		g.mu.Unlock()
		return
	}
}

// goBackground runs f in a goroutine that Close waits for, unless Close has
// begun; it reports whether f was started.
func (g *Gate) goBackground(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}
