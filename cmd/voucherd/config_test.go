package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestValidateDBConns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		max, min     int
		wantMin      int
		wantErrorHas string
	}{
		{"default opens the whole pool", 32, wholePool, 32, ""},
		{"on demand", 32, 0, 0, ""},
		{"some", 32, 8, 8, ""},
		{"more than the pool", 8, 9, 0, "--db-min-conns must be"},
		{"below -1", 8, -2, 0, "--db-min-conns must be"},
		{"no pool", 0, 0, 0, "--db-max-conns must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{FlashWrites: "sync", ReservationTTL: time.Minute, MaxDBConns: tc.max, MinDBConns: tc.min}
			err := cfg.validate()
			if tc.wantErrorHas != "" {
				require.ErrorContains(t, err, tc.wantErrorHas)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantMin, cfg.MinDBConns)
		})
	}
}
