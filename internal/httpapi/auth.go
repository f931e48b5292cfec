package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Key is one named API key. There are three roles: read keys open the live
// sale view and GET /vouchers/{code} only (a dashboard's key: it cannot
// reserve, confirm or release); reservation keys open the reservation routes
// and what read keys open; admin keys open every route. Name is what logs,
// metrics and the audit trail show; Secret is never shown.
type Key struct {
	Name   string
	Secret string
	Admin  bool
	// Read marks a read key; a key may not be both Read and Admin.
	Read bool
}

// Key names of requests that carry no key. They, and the other names in
// reservedKeyNames, cannot be given to a key.
const (
	// LoopbackKey names requests let in because the route's role has no
	// key configured and the client is on the loopback interface.
	LoopbackKey = "loopback"
	// AnonymousKey names requests that were refused before a key matched,
	// and public routes.
	AnonymousKey = "-"
)

// reservedKeyNames are the names logs, metrics and the audit trail use for
// requests without a key and for the background jobs' changes
// (voucher.SystemActor); a key of that name would pass for them.
var reservedKeyNames = map[string]bool{LoopbackKey: true, AnonymousKey: true, voucher.SystemActor: true}

// role is what a route asks of its caller's key.
type role int8

const (
	roleAPI     role = iota // reservation or admin keys
	roleRead                // read, reservation or admin keys
	roleAdmin               // admin keys only
	roleMetrics             // read or admin keys (/metrics on the serving port)
)

// readRoutes are the routes read keys open besides the reservation and
// admin keys: what a sale dashboard shows, nothing that changes state.
var readRoutes = map[string]bool{"GET /vouchers/{code}": true, liveRoute: true}

// roleOf is the role a route asks for.
func roleOf(route string, admin bool) role {
	switch {
	case admin:
		return roleAdmin
	case readRoutes[route]:
		return roleRead
	case route == metricsRoute:
		return roleMetrics
	}
	return roleAPI
}

// Keyring is the set of API keys, replaced as a whole by Set while requests
// run: a rotation adds the new key, lets callers move to it, then removes the
// old one, and no request sees a set in between.
type Keyring struct {
	set atomic.Pointer[keySet]
}

// storedKey is a key as the keyring keeps it: its secret only as a SHA-256
// digest, so that every comparison is of 32 bytes whatever the length of
// the secret or of the token offered.
type storedKey struct {
	name   string
	digest [sha256.Size]byte
}

type keySet struct {
	api, admin, read []storedKey
	// closed marks a set put in place of keys that were lost (SetClosed):
	// a role with no key refuses every client instead of loopback ones.
	closed bool
}

// NewKeyring returns a keyring holding keys (see Set).
func NewKeyring(keys []Key) (*Keyring, error) {
	k := &Keyring{}
	if err := k.Set(keys); err != nil {
		return nil, err
	}
	return k, nil
}

// Set replaces the keys atomically. Names are 1-64 characters of letters,
// digits and `. _ : -`, unique and not reserved ("loopback", "-",
// "system"); secrets are non-empty and unique. On error the keys in use
// stay.
func (k *Keyring) Set(keys []Key) error { return k.set1(keys, false) }

// SetClosed replaces the keys like Set, for when some keys could not be
// read (a keys file gone or broken): a role left with no key then refuses
// every request, loopback clients included, because its keys were lost,
// not never configured.
func (k *Keyring) SetClosed(keys []Key) error { return k.set1(keys, true) }

func (k *Keyring) set1(keys []Key, closed bool) error {
	names := map[string]bool{}
	secrets := map[string]bool{}
	set := keySet{closed: closed}
	for _, key := range keys {
		switch {
		case !voucher.ValidOrderID(key.Name):
			return fmt.Errorf("httpapi: key name %q must be 1-64 characters of A-Z a-z 0-9 . _ : -", key.Name)
		case reservedKeyNames[key.Name]:
			return fmt.Errorf("httpapi: key name %q is reserved", key.Name)
		case key.Secret == "":
			return fmt.Errorf("httpapi: key %s has an empty secret", key.Name)
		case key.Admin && key.Read:
			return fmt.Errorf("httpapi: key %s is both admin and read", key.Name)
		case names[key.Name]:
			return fmt.Errorf("httpapi: key name %s is used twice", key.Name)
		case secrets[key.Secret]:
			return fmt.Errorf("httpapi: key %s has the secret of another key", key.Name)
		}
		names[key.Name], secrets[key.Secret] = true, true
		sk := storedKey{name: key.Name, digest: sha256.Sum256([]byte(key.Secret))}
		switch {
		case key.Admin:
			set.admin = append(set.admin, sk)
		case key.Read:
			set.read = append(set.read, sk)
		default:
			set.api = append(set.api, sk)
		}
	}
	k.set.Store(&set)
	return nil
}

// Names returns the names of the reservation keys and of the admin keys.
func (k *Keyring) Names() (api, admin []string) {
	set := k.set.Load()
	return keyNames(set.api), keyNames(set.admin)
}

// ReadNames returns the names of the read keys.
func (k *Keyring) ReadNames() []string { return keyNames(k.set.Load().read) }

func keyNames(keys []storedKey) []string {
	var names []string
	for _, key := range keys {
		names = append(names, key.name)
	}
	return names
}

// match returns the name of the key among keys whose secret has the digest
// got. Every key is compared, each in constant time over the fixed-length
// digests, so the time taken tells nothing of which key, if any, matched,
// nor of the length of any secret.
func match(keys []storedKey, got *[sha256.Size]byte) (string, bool) {
	name, found := "", false
	for i := range keys {
		if subtle.ConstantTimeCompare(got[:], keys[i].digest[:]) == 1 {
			name, found = keys[i].name, true
		}
	}
	return name, found
}

// urlTokenKey is the context key of a token the client sent in the URL
// (the live view's ?token=); such a token may only be a read key.
type urlTokenKey struct{}

// withURLToken marks r as carrying tok in its URL instead of a header.
func withURLToken(r *http.Request, tok string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), urlTokenKey{}, tok))
}

// authenticate checks the bearer token of r (or the URL token set by
// withURLToken, which only read keys match) and returns the name of its
// key. Admin routes take admin keys; reservation routes reservation and
// admin keys; read routes all three; /metrics read and admin keys. A key of
// another role is forbidden (403), except a reservation key on an admin
// route (401, as before read keys). A role with no key configured (for read
// routes: no read and no reservation key; for /metrics: no read and no
// admin key) accepts only loopback clients, so that a forgotten key never
// opens the service to the network; a role whose keys were lost
// (SetClosed) accepts nobody.
func (s *Server) authenticate(r *http.Request, want role) (string, error) {
	set := s.keys.set.Load()
	var none bool
	switch want {
	case roleAdmin:
		none = len(set.admin) == 0
	case roleAPI:
		none = len(set.api) == 0
	case roleRead:
		none = len(set.api) == 0 && len(set.read) == 0
	case roleMetrics:
		none = len(set.admin) == 0 && len(set.read) == 0
	}
	if none {
		if set.closed {
			return AnonymousKey, voucher.Errorf(voucher.CodeForbidden, "no key of this route is valid: the keys file is refused")
		}
		if isLoopback(r.RemoteAddr) {
			return LoopbackKey, nil
		}
		return AnonymousKey, voucher.Errorf(voucher.CodeForbidden, "no token is configured for this route; only loopback clients are accepted")
	}
	got, fromURL := r.Context().Value(urlTokenKey{}).(string)
	if !fromURL {
		scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return AnonymousKey, voucher.Errorf(voucher.CodeUnauthorized, "missing bearer token")
		}
		got = strings.TrimSpace(tok)
	}
	digest := sha256.Sum256([]byte(got))
	readName, isRead := match(set.read, &digest)
	adminName, isAdmin := match(set.admin, &digest)
	apiName, isAPI := match(set.api, &digest)
	switch {
	case fromURL:
		// A token in a URL ends up in logs and browser history: only a
		// read key is accepted there, never one that can change anything.
		if isRead && want == roleRead {
			return readName, nil
		}
		if isRead || isAdmin || isAPI {
			return AnonymousKey, voucher.Errorf(voucher.CodeForbidden, "only a read key may be given as ?token=, and only for a read route")
		}
	case isAdmin:
		return adminName, nil
	case isAPI && (want == roleAPI || want == roleRead):
		return apiName, nil
	case isAPI && want == roleMetrics:
		return AnonymousKey, voucher.Errorf(voucher.CodeForbidden, "key %s is a reservation key; /metrics needs a read or admin key", apiName)
	case isRead && (want == roleRead || want == roleMetrics):
		return readName, nil
	case isRead:
		return AnonymousKey, voucher.Errorf(voucher.CodeForbidden, "key %s is a read key; this route needs a reservation or admin key", readName)
	}
	return AnonymousKey, voucher.Errorf(voucher.CodeUnauthorized, "invalid bearer token")
}
