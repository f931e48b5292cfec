// Package pii keeps customer e-mail addresses out of logs and traces.
// A customerId may be an e-mail address; logs and span attributes name
// customers (in URL paths, in the reasons of refusals and dead letters). A
// Redactor replaces every e-mail-looking token of a text with a keyed hash
// of it, so that operators can still follow one customer across lines and
// spans without reading the address.
//
// It imports only the standard library.
package pii

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
)

// MinKeyLen is the shortest key New accepts.
const MinKeyLen = 16

// Prefix starts every replacement: "email:" and 16 hex digits.
const Prefix = "email:"

// Redactor replaces e-mail-looking tokens with Prefix and the first 8
// bytes of their HMAC-SHA256 under its key. It is safe for concurrent use.
type Redactor struct {
	key []byte
}

// New returns a Redactor with key, which must be at least MinKeyLen bytes;
// an empty key draws a random one, so that hashes match only within this
// process.
func New(key []byte) (*Redactor, error) {
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	if len(key) < MinKeyLen {
		return nil, errors.New("pii: the hash key must be at least 16 bytes")
	}
	return &Redactor{key: append([]byte(nil), key...)}, nil
}

// Hash returns the replacement of one e-mail address: Prefix and 16 hex
// digits of its HMAC-SHA256.
func (r *Redactor) Hash(email string) string {
	m := hmac.New(sha256.New, r.key)
	m.Write([]byte(email))
	var sum [sha256.Size]byte
	return Prefix + hex.EncodeToString(m.Sum(sum[:0])[:8])
}

// Redact returns s with every e-mail-looking token replaced by its Hash.
// A token is a run of the characters a customerId may hold (letters,
// digits and ". _ : - @ +", and '%' so that a URL-escaped "%40" counts as
// an '@') that holds an '@' with at least one character on each side,
// trailing dots and colons left out (punctuation of the text around it); "%40" is read as '@'
// before hashing, so a token hashes the same escaped or not. s without
// '@' or '%' is returned as it is, without allocating.
func (r *Redactor) Redact(s string) string {
	if r == nil || strings.IndexByte(s, '@') < 0 && !strings.Contains(s, "%40") {
		return s
	}
	var b strings.Builder
	last := 0 // s[:last] is written
	for i := 0; i < len(s); {
		if !tokenByte(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && tokenByte(s[j]) {
			j++
		}
		end := j
		for end > i && (s[end-1] == '.' || s[end-1] == ':') {
			end--
		}
		if tok := s[i:end]; looksLikeEmail(tok) {
			b.WriteString(s[last:i])
			b.WriteString(r.Hash(strings.ReplaceAll(tok, "%40", "@")))
			last = end
		}
		i = j
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// tokenByte reports whether c may be part of a token: a customerId's
// characters and '%'.
func tokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("._:-@+%", c) >= 0
}

// looksLikeEmail reports whether tok has an '@' (or "%40") with something
// on each side.
func looksLikeEmail(tok string) bool {
	tok = strings.ReplaceAll(tok, "%40", "@")
	at := strings.IndexByte(tok, '@')
	return at > 0 && at < len(tok)-1
}

// Handler wraps h so that the message and every string, error and
// fmt.Stringer attribute of a record (in groups too, and those added with
// WithAttrs) are redacted before h sees them.
func (r *Redactor) Handler(h slog.Handler) slog.Handler { return handler{h: h, r: r} }

type handler struct {
	h slog.Handler
	r *Redactor
}

// Enabled implements slog.Handler.
func (h handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = h.attr(a)
	}
	return handler{h: h.h.WithAttrs(red), r: h.r}
}

// WithGroup implements slog.Handler.
func (h handler) WithGroup(name string) slog.Handler {
	return handler{h: h.h.WithGroup(name), r: h.r}
}

// attr returns a with its value redacted.
func (h handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s := v.String(); strings.IndexByte(s, '@') >= 0 || strings.Contains(s, "%40") {
			return slog.String(a.Key, h.r.Redact(s))
		}
	case slog.KindGroup:
		group := v.Group()
		red := make([]slog.Attr, len(group))
		for i, g := range group {
			red[i] = h.attr(g)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(red...)}
	case slog.KindAny:
		var s string
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case interface{ String() string }:
			s = x.String()
		default:
			return slog.Attr{Key: a.Key, Value: v}
		}
		if red := h.r.Redact(s); red != s {
			return slog.String(a.Key, red)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
