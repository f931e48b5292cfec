package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// BenchmarkStackDeadInstanceWindow measures, in flash-sync mode, how long
// the use of a stack's first code stays held after the instance that took
// it died (SIGKILL) before taking the second: from the kill to the moment
// the gate has given the use back and PostgreSQL has the member's orderId
// fenced (a RELEASED row), with the gate's count of A back to its limit
// (window-ms); and from the kill to the first reservation of A by another
// order answered 201 (takeable-ms: the window plus what the surviving
// instance's sold-out cache, SoldOutTTL, adds). Each op starts a voucherd
// process (this test binary as `voucherd serve`, sharing the database and
// the Redis key prefix with an instance in the test that runs the liveness
// job), holds the warm-up lock of the second code B so that its take waits
// (B is not in the gate), sends the stack [A,B] to that process, kills it
// once the gate holds A for the order, and releases the lock. It runs with
// the default HeartbeatTTL and a short one; the window is about
// HeartbeatTTL plus one to two liveness intervals (1 s) plus one
// reconciliation (docs/stacks.md).
//
//	go test -run '^$' -bench StackDeadInstanceWindow -benchtime 5x ./cmd/voucherd/
func BenchmarkStackDeadInstanceWindow(b *testing.B) {
	for _, ttl := range []time.Duration{voucher.DefaultHeartbeatTTL, time.Second} {
		b.Run("heartbeat="+ttl.String(), func(b *testing.B) {
			s := newStack(b, stackOptions{flash: true, tweak: func(c *Config) { c.HeartbeatTTL = ttl }})
			var windows, takeable []time.Duration
			for i := 0; i < b.N; i++ {
				w, tk := deadInstanceWindow(b, s, ttl, i)
				b.Logf("heartbeat %s: given back %s after the kill, takeable again after %s", ttl, w, tk)
				windows, takeable = append(windows, w), append(takeable, tk)
			}
			b.StopTimer()
			reportMillis(b, "window", windows)
			reportMillis(b, "takeable", takeable)
		})
	}
}

// deadInstanceWindow runs one op of BenchmarkStackDeadInstanceWindow: it
// returns the window (given back in the gate and fenced in PostgreSQL) and
// the time until another order took A, both from the kill.
func deadInstanceWindow(b *testing.B, s *stack, ttl time.Duration, i int) (window, takeable time.Duration) {
	ctx := context.Background()
	base, cmd := serveProcess(b, s.cfg.DatabaseURL, "VOUCHERD_REDIS_ADDR="+strings.Join(s.cfg.RedisAddrs, ","),
		"VOUCHERD_REDIS_KEY_PREFIX="+s.cfg.RedisKeyPrefix, "VOUCHERD_FLASH_WRITES=sync",
		"VOUCHERD_HEARTBEAT_TTL="+ttl.String(), "VOUCHERD_REDIS_TIMEOUT=3s")
	a := s.createStackableAs("A", map[string]any{"discountAmount": 100}, 1, stackable)
	bc := fmt.Sprintf("B%d%d", time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
	unlock, ok, err := s.app.gate.Lock(ctx, bc, time.Minute)
	if err != nil || !ok {
		b.Fatalf("warm-up lock of %s: %v %v", bc, ok, err)
	}
	defer unlock()
	r := s.do(http.MethodPost, "/vouchers", map[string]any{"code": bc, "discountAmount": 100, "totalLimit": 1000,
		"perUserLimit": 1000, "startsAt": "2020-01-01T00:00:00Z", "endsAt": "2999-01-01T00:00:00Z", "flashSale": true,
		"stacking": stackable})
	if r.status != http.StatusCreated {
		b.Fatalf("create %s: %d %s", bc, r.status, r.raw)
	}
	if loaded, err := s.app.gate.Loaded(ctx, bc); err != nil || loaded {
		b.Fatalf("%s must not be in the gate: %v %v", bc, loaded, err)
	}
	orderID := fmt.Sprintf("dead-%d", i)
	body, _ := json.Marshal(map[string]any{"customerId": "dead", "orderId": orderID, "orderAmount": 20000, "codes": []string{a, bc}})
	go func() {
		req, _ := http.NewRequest(http.MethodPost, base+"/reservations", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testAPIToken)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := httpClient.Do(req); err == nil {
			resp.Body.Close() // answered before the kill: the op fails below
		}
	}()
	held := func() bool {
		h, found, err := s.app.gate.Lookup(ctx, a, orderID)
		if err != nil {
			b.Fatal(err)
		}
		return found && !h.Released
	}
	deadline := time.Now().Add(10 * time.Second)
	for !held() {
		if time.Now().After(deadline) {
			b.Fatalf("the instance did not take %s for %s", a, orderID)
		}
		time.Sleep(time.Millisecond)
	}
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		b.Fatal(err)
	}
	killed := time.Now()
	_ = cmd.Wait()
	unlock()
	var status string
	deadline = killed.Add(time.Minute)
	for {
		if time.Now().After(deadline) {
			b.Fatalf("%s's use for %s not given back a minute after the kill (row %q)", a, orderID, status)
		}
		if !held() {
			err := s.db.QueryRow(ctx, `SELECT status FROM voucher_redemption WHERE order_id = $1`, orderID).Scan(&status)
			st, ierr := s.app.gate.Inspect(ctx, a)
			if err == nil && status == "RELEASED" && ierr == nil && st.Remaining == 1 && s.state(a).usedCount == 0 {
				window = time.Since(killed)
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	if n := s.state(bc).usedCount; n != 0 {
		b.Fatalf("%s holds %d uses for a stack that was never written", bc, n)
	}
	for {
		_, err := s.app.svc.Reserve(ctx, voucher.ReserveRequest{Code: a, CustomerID: "other", OrderID: "other-" + orderID, OrderAmount: 20000})
		if err == nil {
			return window, time.Since(killed)
		}
		if !voucher.IsCode(err, voucher.CodeHeldOut) && !voucher.IsCode(err, voucher.CodeOutOfStock) || time.Now().After(deadline) {
			b.Fatalf("another order's reservation of %s: %v", a, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// reportMillis reports the median and the largest of d in milliseconds
// as name-p50-ms and name-max-ms.
func reportMillis(b *testing.B, name string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	sorted := append([]time.Duration(nil), d...)
	for i := 1; i < len(sorted); i++ {
		for j := i; j > 0 && sorted[j] < sorted[j-1]; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	b.ReportMetric(float64(sorted[len(sorted)/2].Microseconds())/1000, name+"-p50-ms")
	b.ReportMetric(float64(sorted[len(sorted)-1].Microseconds())/1000, name+"-max-ms")
}
