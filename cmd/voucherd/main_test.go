package main

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/client"
)

// main prints an error after "voucherd: " once: the client's errors carry
// it already.
func TestErrorLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errors.New("--code is required"), "voucherd: --code is required"},
		{&client.Error{Status: http.StatusConflict, Code: "HELD_OUT"}, "voucherd: 409 HELD_OUT"},
		{&client.Error{Status: http.StatusServiceUnavailable}, "voucherd: 503 Service Unavailable"},
		{exitError(2), "voucherd: exit status 2"},
	} {
		require.Equal(t, tc.want, errorLine(tc.err))
	}
}
