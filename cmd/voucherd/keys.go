package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/voucherd/voucherd/internal/httpapi"
)

// keysFilePoll is how often the keys file is checked for a change.
const keysFilePoll = time.Second

// parseKeyList reads name:secret,name:secret (VOUCHERD_API_KEYS,
// VOUCHERD_ADMIN_KEYS; VOUCHERD_READ_KEYS through parseReadKeyList). A
// secret may hold ':' but not ','.
func parseKeyList(env, list string, admin bool) ([]httpapi.Key, error) {
	var keys []httpapi.Key
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, secret, ok := strings.Cut(item, ":")
		if !ok || name == "" || secret == "" {
			return nil, fmt.Errorf("%s: %q is not name:secret", env, redact(item))
		}
		keys = append(keys, httpapi.Key{Name: name, Secret: secret, Admin: admin})
	}
	return keys, nil
}

// parseReadKeyList reads VOUCHERD_READ_KEYS, name:secret pairs of read keys.
func parseReadKeyList(list string) ([]httpapi.Key, error) {
	keys, err := parseKeyList("VOUCHERD_READ_KEYS", list, false)
	for i := range keys {
		keys[i].Read = true
	}
	return keys, err
}

// parseKeysFile reads the keys file: one key a line, "api NAME SECRET",
// "admin NAME SECRET" or "read NAME SECRET"; blank lines and lines starting
// with # are skipped.
func parseKeysFile(path string, data []byte) ([]httpapi.Key, error) {
	var keys []httpapi.Key
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 || (f[0] != "api" && f[0] != "admin" && f[0] != "read") {
			return nil, fmt.Errorf("%s:%d: want \"api|admin|read NAME SECRET\"", path, n)
		}
		if strings.Contains(strings.ToLower(f[2]), placeholderToken) {
			return nil, fmt.Errorf("%s:%d: key %s holds the placeholder %q: set a secret of your own", path, n, f[1], placeholderToken)
		}
		keys = append(keys, httpapi.Key{Name: f[1], Secret: f[2], Admin: f[0] == "admin", Read: f[0] == "read"})
	}
	return keys, sc.Err()
}

// redact hides the secret of a name:secret item in error messages.
func redact(item string) string {
	if name, _, ok := strings.Cut(item, ":"); ok {
		return name + ":***"
	}
	return "***"
}

// keySource is where serve's API keys come from: the fixed ones of the
// environment (VOUCHERD_API_TOKEN, VOUCHERD_ADMIN_TOKEN, VOUCHERD_API_KEYS,
// VOUCHERD_ADMIN_KEYS, VOUCHERD_READ_KEYS) and a keys file read again on
// SIGHUP and whenever its content changes. A reload that fails (the file
// gone, unreadable or invalid) fails closed: until the file is fixed only
// the fixed keys are accepted, none of the file's, so that deleting or
// breaking the file never leaves removed keys valid.
type keySource struct {
	fixed []httpapi.Key
	file  string
	ring  *httpapi.Keyring
	log   *slog.Logger
	// usable, when set, is told after each reload whether the file's keys
	// are in use (true) or refused (false).
	usable func(ok bool)

	sum  [sha256.Size]byte // of the file content last applied or refused
	stop context.CancelFunc
	done chan struct{}
}

// envKeys returns the keys of cfg's environment variables.
func envKeys(cfg Config) ([]httpapi.Key, error) {
	var keys []httpapi.Key
	if cfg.APIToken != "" {
		keys = append(keys, httpapi.Key{Name: "api", Secret: cfg.APIToken})
	}
	if cfg.AdminToken != "" {
		keys = append(keys, httpapi.Key{Name: "admin", Secret: cfg.AdminToken, Admin: true})
	}
	api, err := parseKeyList("VOUCHERD_API_KEYS", cfg.APIKeys, false)
	if err != nil {
		return nil, err
	}
	admin, err := parseKeyList("VOUCHERD_ADMIN_KEYS", cfg.AdminKeys, true)
	if err != nil {
		return nil, err
	}
	read, err := parseReadKeyList(cfg.Access.ReadKeys)
	if err != nil {
		return nil, err
	}
	return append(append(append(keys, api...), admin...), read...), nil
}

// newKeySource reads every source once; an error here stops serve.
func newKeySource(cfg Config, log *slog.Logger) (*keySource, error) {
	fixed, err := envKeys(cfg)
	if err != nil {
		return nil, err
	}
	ks := &keySource{fixed: fixed, file: cfg.KeysFile, log: log}
	keys, sum, err := ks.read()
	if err != nil {
		return nil, err
	}
	if ks.ring, err = httpapi.NewKeyring(keys); err != nil {
		return nil, err
	}
	ks.sum = sum
	return ks, nil
}

// read returns the fixed keys and those of the file, with the hash of the
// file's content (also when the content is refused).
func (ks *keySource) read() ([]httpapi.Key, [sha256.Size]byte, error) {
	keys := append([]httpapi.Key(nil), ks.fixed...)
	if ks.file == "" {
		return keys, [sha256.Size]byte{}, nil
	}
	data, err := os.ReadFile(ks.file)
	if err != nil {
		// The error's hash stands for the content: it is reported once.
		return nil, sha256.Sum256([]byte(err.Error())), fmt.Errorf("keys file: %w", err)
	}
	sum := sha256.Sum256(data)
	fileKeys, err := parseKeysFile(ks.file, data)
	if err != nil {
		return nil, sum, err
	}
	return append(keys, fileKeys...), sum, nil
}

// reload reads the sources again and applies them if the file changed or
// force is set; it reports whether the keys were replaced. A file that is
// gone, unreadable or refused leaves only the fixed keys in use, and its
// error is returned once per content (again when forced).
func (ks *keySource) reload(force bool) (bool, error) {
	keys, sum, err := ks.read()
	if !force && sum == ks.sum {
		return false, nil
	}
	ks.sum = sum
	if err == nil {
		err = ks.ring.Set(keys)
	}
	if err != nil {
		// The fixed keys were accepted at start, so this Set succeeds.
		if serr := ks.ring.SetClosed(ks.fixed); serr != nil {
			err = fmt.Errorf("%w; the fixed keys were refused too: %v", err, serr)
		}
		ks.report(false)
		return true, fmt.Errorf("keys file refused, none of its keys is accepted until it is fixed: %w", err)
	}
	ks.report(true)
	api, admin := ks.ring.Names()
	ks.log.Info("API keys loaded", "api", api, "admin", admin, "read", ks.ring.ReadNames())
	return true, nil
}

func (ks *keySource) report(ok bool) {
	if ks.usable != nil {
		ks.usable(ok)
	}
}

// start reloads on SIGHUP and, with a keys file, on every change of it.
func (ks *keySource) start() {
	ctx, cancel := context.WithCancel(context.Background())
	ks.stop, ks.done = cancel, make(chan struct{})
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer close(ks.done)
		defer signal.Stop(hup)
		tick := time.NewTicker(keysFilePoll)
		defer tick.Stop()
		for {
			force := false
			select {
			case <-ctx.Done():
				return
			case <-hup:
				force = true
			case <-tick.C:
				if ks.file == "" {
					continue
				}
			}
			if _, err := ks.reload(force); err != nil {
				ks.log.Error("!!! API keys file refused: only the environment's keys are accepted", "file", ks.file, "err", err)
			}
		}
	}()
}

// close stops the reloading.
func (ks *keySource) close() {
	if ks.stop != nil {
		ks.stop()
		<-ks.done
	}
}
