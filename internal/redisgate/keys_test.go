package redisgate

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The exported key names are the ones the scripts use: tools that read the
// gate's state read the gate's keys.
func TestExportedKeysAreTheGates(t *testing.T) {
	t.Parallel()
	k := keysFor("p:", "FLASH-1")
	require.Equal(t, k.remaining, RemainingKey("p:", "FLASH-1"))
	require.Equal(t, k.codes, CodesKey("p:", "FLASH-1"))
	require.Equal(t, "p:voucher:{FLASH-1}:remaining", RemainingKey("p:", "FLASH-1"), "the code is the hash tag")
}
