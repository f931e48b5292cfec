package httpapi

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/voucherd/voucherd/internal/voucher"
)

// Key is one named API key. Reservation keys open the reservation routes;
// admin keys open every route. Name is what logs, metrics and the audit
// trail show; Secret is never shown.
type Key struct {
	Name   string
	Secret string
	Admin  bool
}

// Key names of requests that carry no key.
const (
	// LoopbackKey names requests let in because the route's role has no
	// key configured and the client is on the loopback interface.
	LoopbackKey = "loopback"
	// AnonymousKey names requests that were refused before a key matched,
	// and public routes.
	AnonymousKey = "-"
)

// Keyring is the set of API keys, replaced as a whole by Set while requests
// run: a rotation adds the new key, lets callers move to it, then removes the
// old one, and no request sees a set in between.
type Keyring struct {
	set atomic.Pointer[keySet]
}

type keySet struct {
	api, admin []Key
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
// digits and `. _ : -` and unique; secrets are non-empty and unique. On error
// the keys in use stay.
func (k *Keyring) Set(keys []Key) error {
	names := map[string]bool{}
	secrets := map[string]bool{}
	var set keySet
	for _, key := range keys {
		switch {
		case !voucher.ValidOrderID(key.Name):
			return fmt.Errorf("httpapi: key name %q must be 1-64 characters of A-Z a-z 0-9 . _ : -", key.Name)
		case key.Secret == "":
			return fmt.Errorf("httpapi: key %s has an empty secret", key.Name)
		case names[key.Name]:
			return fmt.Errorf("httpapi: key name %s is used twice", key.Name)
		case secrets[key.Secret]:
			return fmt.Errorf("httpapi: key %s has the secret of another key", key.Name)
		}
		names[key.Name], secrets[key.Secret] = true, true
		if key.Admin {
			set.admin = append(set.admin, key)
		} else {
			set.api = append(set.api, key)
		}
	}
	k.set.Store(&set)
	return nil
}

// Names returns the names of the reservation keys and of the admin keys.
func (k *Keyring) Names() (api, admin []string) {
	set := k.set.Load()
	for _, key := range set.api {
		api = append(api, key.Name)
	}
	for _, key := range set.admin {
		admin = append(admin, key.Name)
	}
	return api, admin
}

// match returns the name of the key among keys whose secret is got. Every
// key is compared, each in constant time, so the time taken tells nothing of
// which key, if any, matched.
func match(keys []Key, got string) (string, bool) {
	name, found := "", false
	for _, key := range keys {
		if subtle.ConstantTimeCompare([]byte(got), []byte(key.Secret)) == 1 {
			name, found = key.Name, true
		}
	}
	return name, found
}

// authenticate checks the bearer token of r and returns the name of its
// key. Admin keys open every route, reservation keys the reservation routes.
// A role with no key configured accepts only loopback clients, so that a
// forgotten key never opens the service to the network.
func (s *Server) authenticate(r *http.Request, admin bool) (string, error) {
	set := s.keys.set.Load()
	if (admin && len(set.admin) == 0) || (!admin && len(set.api) == 0) {
		if isLoopback(r.RemoteAddr) {
			return LoopbackKey, nil
		}
		return AnonymousKey, voucher.Errorf(voucher.CodeForbidden, "no token is configured for this route; only loopback clients are accepted")
	}
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return AnonymousKey, voucher.Errorf(voucher.CodeUnauthorized, "missing bearer token")
	}
	got = strings.TrimSpace(got)
	adminName, isAdmin := match(set.admin, got)
	if admin {
		if isAdmin {
			return adminName, nil
		}
	} else {
		apiName, isAPI := match(set.api, got)
		switch {
		case isAPI:
			return apiName, nil
		case isAdmin:
			return adminName, nil
		}
	}
	return AnonymousKey, voucher.Errorf(voucher.CodeUnauthorized, "invalid bearer token")
}
