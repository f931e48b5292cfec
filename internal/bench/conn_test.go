package bench

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rawServer answers each request on a connection with the next of answers
// (cycling), written as is; it reads requests as HTTP/1.1.
func rawServer(t *testing.T, answers ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for i := 0; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(c, answers[i%len(answers)]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func TestResponseFraming(t *testing.T) {
	t.Parallel()
	url := rawServer(t,
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 409 Conflict\r\ncontent-type: application/json\r\nTRANSFER-ENCODING: chunked\r\n\r\n"+
			"5\r\n{\"err\r\n10;ext=1\r\nor\":\"HELD_OUT\", \r\n9\r\n\"x\":\"y\"}\n\r\n0\r\nTrailer: a\r\n\r\n",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 31\r\nConnection: close\r\n\r\n{\"error\": \"UNAVAILABLE\",\"m\":1}\n",
	)
	ep, err := newEndpoint(url, "")
	require.NoError(t, err)
	c := newHTTPConn(context.Background(), ep, 5*time.Second)
	defer c.close()

	for round := range 2 {
		status, err := c.roundTrip(ep.noop, time.Now())
		require.NoError(t, err)
		require.Equal(t, 200, status)
		require.Equal(t, "ok", string(c.body))

		status, err = c.roundTrip(ep.noop, time.Now())
		require.NoError(t, err)
		require.Equal(t, 409, status)
		require.Equal(t, `{"error":"HELD_OUT", "x":"y"}`+"\n", string(c.body))
		require.Equal(t, "HELD_OUT", string(errorCode(c.body)))

		status, err = c.roundTrip(ep.noop, time.Now())
		require.NoError(t, err)
		require.Equal(t, 204, status)
		require.Empty(t, c.body)

		status, err = c.roundTrip(ep.noop, time.Now())
		require.NoError(t, err, "round %d", round)
		require.Equal(t, 503, status)
		require.Equal(t, "UNAVAILABLE", string(errorCode(c.body)))
		require.Nil(t, c.c, "Connection: close ends the connection; the next request redials")
	}
}

func TestMalformedResponseIsNoAnswer(t *testing.T) {
	t.Parallel()
	for _, answer := range []string{
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"SMTP ready\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\n",
	} {
		url := rawServer(t, answer)
		ep, err := newEndpoint(url, "")
		require.NoError(t, err)
		c := newHTTPConn(context.Background(), ep, 5*time.Second)
		status, err := c.roundTrip(ep.noop, time.Now())
		require.Error(t, err, answer)
		require.Zero(t, status)
		require.Nil(t, c.c)
	}
}

func TestErrorCode(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"error":"OUT_OF_STOCK","message":"x"}`:    "OUT_OF_STOCK",
		`{"message":"x", "error" : "ALREADY_USED"}`: "ALREADY_USED",
		`{"error":""}`:       "",
		`{"error":"a\"b"}`:   "",
		`{"error":12}`:       "",
		`not json`:           "",
		`{"errors":"HELLO"}`: "",
	} {
		require.Equal(t, want, string(errorCode([]byte(body))), body)
	}
}

func TestOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]bool{
		`{"error":"UNAVAILABLE","outcomeUnknown":true}`:    true,
		`{"error":"UNAVAILABLE", "outcomeUnknown" : true}`: true,
		`{"error":"UNAVAILABLE","outcomeUnknown":false}`:   false,
		`{"error":"UNAVAILABLE"}`:                          false,
	} {
		require.Equal(t, want, outcomeUnknown([]byte(body)), body)
	}
}

// The request path of a worker (building the request, the round trip,
// reading the error code) allocates nothing once warm.
func TestRequestPathDoesNotAllocate(t *testing.T) {
	// A server that allocates nothing either (the count is process-wide):
	// each request arrives in one read on loopback and gets one answer.
	answer := []byte("HTTP/1.1 409 Conflict\r\nContent-Length: 40\r\n\r\n" + `{"error":"OUT_OF_STOCK","message":"no!"}`)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			if _, err := c.Write(answer); err != nil {
				return
			}
		}
	}()
	url := "http://" + ln.Addr().String()
	cfg, err := Config{BaseURL: url, APIToken: "t", Seed: 1}.withDefaults()
	require.NoError(t, err)
	r, err := newRunner(cfg)
	require.NoError(t, err)
	ep := r.endpoints[0]
	ep.addVoucher("V1")
	c := newHTTPConn(context.Background(), ep, 5*time.Second)
	defer c.close()
	ws := newWorkerStats()
	req := make([]byte, 0, 512)
	o := order{seq: 1, customer: 42}
	send := func() {
		o.seq++
		req = r.appendReserve(req[:0], ep, o)
		status, err := c.roundTrip(req, time.Now())
		if err != nil || status != 409 {
			t.Fatalf("status %d, %v", status, err)
		}
		ws.countErr(errorCode(c.body))
	}
	send()
	if !raceEnabled {
		require.Zero(t, testing.AllocsPerRun(200, send))
	}

	parsed, err := http.ReadRequest(bufio.NewReader(strings.NewReader(string(r.appendReserve(nil, ep, order{seq: 7, customer: 1234567})))))
	require.NoError(t, err)
	body, _ := io.ReadAll(parsed.Body)
	require.Equal(t, "/vouchers/V1/reservations", parsed.URL.Path)
	require.Equal(t, "Bearer t", parsed.Header.Get("Authorization"))
	require.JSONEq(t, `{"customerId":1234567,"orderId":"`+r.prefix+`-7","orderAmount":1000}`, string(body))
	require.Equal(t, int64(len(body)), parsed.ContentLength)
}
