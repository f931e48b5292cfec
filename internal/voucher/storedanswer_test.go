package voucher

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// storedAnswer takes the store's answer when it is there, and counts a
// store that does not answer within storeCheckWait as unavailable.
func TestStoredAnswer(t *testing.T) {
	t.Parallel()
	ready := make(chan storedOrder, 1)
	ready <- storedOrder{row: Redemption{OrderID: "o-1"}}
	require.Equal(t, "o-1", storedAnswer(ready).row.OrderID, "an answer already there")

	start := time.Now()
	so := storedAnswer(make(chan storedOrder))
	require.True(t, IsCode(so.err, CodeUnavailable), "%v", so.err)
	require.GreaterOrEqual(t, time.Since(start), storeCheckWait)
}
