package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/httpapi"
)

func TestParseKeys(t *testing.T) {
	t.Parallel()
	keys, err := parseKeyList("VOUCHERD_API_KEYS", " checkout:s1 , billing:s:2,", false)
	require.NoError(t, err)
	require.Equal(t, []httpapi.Key{{Name: "checkout", Secret: "s1"}, {Name: "billing", Secret: "s:2"}}, keys)
	for _, bad := range []string{"n0sep4rator", ":n0sep4rator", "name:"} {
		_, err := parseKeyList("VOUCHERD_ADMIN_KEYS", bad, true)
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), "n0sep4rator", "the error never shows what may be a secret")
	}
	keys, err = parseKeysFile("f", []byte("# comment\n\napi a s1\n  admin b s2  \nread c s3\n"))
	require.NoError(t, err)
	require.Equal(t, []httpapi.Key{{Name: "a", Secret: "s1"}, {Name: "b", Secret: "s2", Admin: true}, {Name: "c", Secret: "s3", Read: true}}, keys)
	keys, err = parseReadKeyList("dash:s4")
	require.NoError(t, err)
	require.Equal(t, []httpapi.Key{{Name: "dash", Secret: "s4", Read: true}}, keys)
	for _, bad := range []string{"api a", "root a s", "api a s extra", "admin b change-me-admin-token", "read c CHANGE-ME"} {
		_, err := parseKeysFile("f", []byte(bad))
		require.Error(t, err, bad)
	}
}

func TestKeySourceReload(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(file, []byte("api file-a s1\n"), 0o600))
	ks, err := newKeySource(Config{APIToken: "env-secret", AdminKeys: "ops:adm", KeysFile: file}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	api, admin := ks.ring.Names()
	require.Equal(t, []string{"api", "file-a"}, api)
	require.Equal(t, []string{"ops"}, admin)

	changed, err := ks.reload(false)
	require.NoError(t, err)
	require.False(t, changed, "an unchanged file is not applied again")

	require.NoError(t, os.WriteFile(file, []byte("api file-b s2\n"), 0o600))
	changed, err = ks.reload(false)
	require.NoError(t, err)
	require.True(t, changed)
	api, _ = ks.ring.Names()
	require.Equal(t, []string{"api", "file-b"}, api)

	// A broken file fails closed: none of its keys stays valid (only the
	// environment's), reported once per content, again when forced.
	var usable []bool
	ks.usable = func(ok bool) { usable = append(usable, ok) }
	require.NoError(t, os.WriteFile(file, []byte("api broken\n"), 0o600))
	_, err = ks.reload(false)
	require.Error(t, err)
	api, _ = ks.ring.Names()
	require.Equal(t, []string{"api"}, api, "the file's keys are refused")
	_, err = ks.reload(false)
	require.NoError(t, err)
	_, err = ks.reload(true)
	require.Error(t, err)
	api, _ = ks.ring.Names()
	require.Equal(t, []string{"api"}, api)

	// Fixed, the file's keys are back.
	require.NoError(t, os.WriteFile(file, []byte("api file-b s2\nread dash s3\n"), 0o600))
	_, err = ks.reload(false)
	require.NoError(t, err)
	api, _ = ks.ring.Names()
	require.Equal(t, []string{"api", "file-b"}, api)
	require.Equal(t, []string{"dash"}, ks.ring.ReadNames())

	// A secret used twice is refused as a whole.
	require.NoError(t, os.WriteFile(file, []byte("api dup env-secret\n"), 0o600))
	_, err = ks.reload(false)
	require.Error(t, err)
	api, admin = ks.ring.Names()
	require.Equal(t, []string{"api"}, api)
	require.Equal(t, []string{"ops"}, admin, "the environment's keys stay")

	// A deleted file: the keys it held are no longer valid.
	require.NoError(t, os.WriteFile(file, []byte("api file-b s2\n"), 0o600))
	_, err = ks.reload(false)
	require.NoError(t, err)
	require.NoError(t, os.Remove(file))
	_, err = ks.reload(false)
	require.Error(t, err)
	api, _ = ks.ring.Names()
	require.Equal(t, []string{"api"}, api)
	require.Empty(t, ks.ring.ReadNames())
	require.Equal(t, []bool{false, false, true, false, true, false}, usable)

	_, err = newKeySource(Config{KeysFile: file}, slog.New(slog.DiscardHandler))
	require.Error(t, err, "a missing file stops serve at start")
}
