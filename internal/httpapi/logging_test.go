package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

// downStore answers every voucher read as a database that cannot be reached.
type downStore struct{ voucher.Store }

func (downStore) Voucher(ctx context.Context, code string) (voucher.Voucher, error) {
	return voucher.Voucher{}, voucher.Unavailable(context.Canceled, "the database is unavailable")
}

func (d downStore) VoucherDefinition(ctx context.Context, code string) (voucher.Voucher, error) {
	return d.Voucher(ctx, code)
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// levels returns the level of each log line written.
func (b *syncBuffer) levels(t *testing.T) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, line := range bytes.Split(bytes.TrimSpace(b.buf.Bytes()), []byte("\n")) {
		var rec struct{ Level string }
		require.NoError(t, json.Unmarshal(line, &rec), "%s", line)
		out = append(out, rec.Level)
	}
	return out
}

// A 503 is logged as an error, unless the client had left before the answer
// (its request context ended), which is logged as a warning: the failure
// was most likely the cancellation the client caused.
func TestFailureLoggedByWhetherTheClientStayed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		left   bool
		levels []string
	}{
		{"client waiting", false, []string{"ERROR", "ERROR"}},
		{"client left", true, []string{"WARN", "WARN"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, err := voucher.NewService(voucher.ServiceConfig{Store: downStore{}})
			require.NoError(t, err)
			logs := &syncBuffer{}
			s, err := New(Config{Service: svc, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
			require.NoError(t, err)
			req := httptest.NewRequest(http.MethodGet, "/vouchers/SALE", nil)
			req.RemoteAddr = "127.0.0.1:5000"
			if tc.left {
				ctx, cancel := context.WithCancel(req.Context())
				cancel()
				req = req.WithContext(ctx)
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			require.Equal(t, http.StatusServiceUnavailable, rec.Code)
			require.Equal(t, tc.levels, logs.levels(t))
		})
	}
}
