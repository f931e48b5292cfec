package testenv_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/testenv"
)

// TestProxyHangHoldsBytesThenLetsThemThrough: during a hang a request gets
// no answer and nothing is refused; at its end the request reaches the
// server and its answer arrives, in order.
func TestProxyHangHoldsBytesThenLetsThemThrough(t *testing.T) {
	t.Parallel()
	p := testenv.NewProxy(t, testenv.Redis(t).Addr)
	c, err := net.Dial("tcp", p.Addr)
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)

	_, err = c.Write([]byte("PING\r\n"))
	require.NoError(t, err)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "+PONG\r\n", line)

	healed := p.Hang(600 * time.Millisecond)
	start := time.Now()
	_, err = c.Write([]byte("ECHO held\r\n"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
	_, err = r.ReadString('\n')
	require.Error(t, err, "no answer during the hang")

	<-healed
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	line, err = r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "$4\r\n", line)
	line, err = r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "held\r\n", line)
	require.GreaterOrEqual(t, time.Since(start), 600*time.Millisecond)
}
