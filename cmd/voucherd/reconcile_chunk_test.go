package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// gateCountsScript reads a voucher's remaining uses and held count in one
// step, as the gate keeps them (test only).
var gateCountsScript = rueidis.NewLuaScriptReadOnly(`return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2])}`)

// TestChunkedReconciliationRacesReservations runs reconciliation with
// repairs, reading the gate three entries a call and PostgreSQL three rows
// a page, again and again while customers reserve, release, replace and
// confirm on the same flash voucher, in both flash modes. Redis never holds more uses than totalLimit (remaining plus
// the held count, read in one step, never above it, remaining never below
// zero), PostgreSQL never holds more, no pass gives back a hold (orphan or
// abandoned: every write here reaches the database within the grace
// period), no pass lowers or raises the counter, no pass reports a drift
// towards oversell or a missing hold (the stores are sound: such a finding
// would come from reading them at different moments), and once the load stops
// the two stores agree: every held row is held in Redis and a dry run
// finds nothing.
func TestChunkedReconciliationRacesReservations(t *testing.T) {
	t.Parallel()
	for _, mode := range modes[1:] {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			opts := mode.opts
			opts.tweak = func(c *Config) {
				c.RedisScanCount = 3
				c.SoldOutTTL = -1
				c.ReconcileEvery = 0
			}
			s := newStack(t, opts)
			ctx := context.Background()
			rc := rawRedis(t, s)
			const total = 40
			code := s.createVoucher(voucherSpec{TotalLimit: total, PerUserLimit: 3})
			base := s.cfg.RedisKeyPrefix + "voucher:{" + code + "}:"
			// Load the voucher into the gate.
			require.Equal(t, http.StatusCreated, s.reserve(code, 1, "first", 100).status)

			var oversell atomic.Int64
			stopPG := s.sampleOversell(code, &oversell)
			done := make(chan struct{})
			var wg sync.WaitGroup
			var gateBad atomic.Int64
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					vals, err := gateCountsScript.Exec(ctx, rc, []string{base + "remaining", base + "held"}, nil).AsStrSlice()
					if err == nil && len(vals) == 2 && vals[1] != "" {
						var rem, held int64
						_, rerr := fmt.Sscan(vals[0], &rem)
						_, herr := fmt.Sscan(vals[1], &held)
						if rerr != nil || herr != nil {
							t.Errorf("gate counts %q: %v %v", vals, rerr, herr)
						} else if rem < 0 || rem+held > total {
							if gateBad.Add(1) == 1 {
								t.Errorf("gate: remaining %d, held %d, totalLimit %d", rem, held, total)
							}
						}
					}
					time.Sleep(2 * time.Millisecond)
				}
			})
			var passes atomic.Int64
			found := map[string]*atomic.Int64{"inFlight": {}, "stale": {}, "uncommitted": {}}
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					r := s.reconcile(code)
					passes.Add(1)
					for _, field := range []string{"inFlight", "stale", "uncommitted"} {
						if l, _ := r.body[field].([]any); len(l) > 0 {
							found[field].Add(int64(len(l)))
						}
					}
					for _, field := range []string{"orphans", "abandoned"} {
						require.Empty(t, r.body[field], "pass %d gave back a hold with a row coming: %s", passes.Load(), field)
					}
					require.Nil(t, r.body["clampedFrom"], "an exact count clamps nothing")
					// Sound stores never differ towards oversell: a positive
					// drift or a missing hold here would be false.
					drift, _ := r.body["drift"].(float64)
					require.LessOrEqual(t, drift, 0.0, "pass %d reports a drift towards oversell", passes.Load())
					require.Empty(t, r.body["missing"], "pass %d reports a held row the gate lost", passes.Load())
				}
			})
			var confirms atomic.Int64
			for w := range 6 {
				wg.Go(func() {
					rnd := rand.New(rand.NewPCG(uint64(w), 7))
					for i := 0; ; i++ {
						select {
						case <-done:
							return
						default:
						}
						cust := int64(w*10 + rnd.IntN(10) + 2)
						id := fmt.Sprintf("w%d-%d", w, i)
						r := s.reserve(code, cust, id, 100)
						if r.status != http.StatusCreated {
							continue
						}
						switch rnd.IntN(4) {
						case 0:
							s.do(http.MethodDelete, "/vouchers/"+code+"/reservations/"+id, nil)
						case 1:
							s.replace(code, cust, id+"r", id, 100)
						case 2:
							// Rows move from RESERVED to CONFIRMED under the
							// store's walk (half the uses at most, so that
							// the rest keep changing hands).
							if confirms.Add(1) <= total/2 {
								s.do(http.MethodPost, "/vouchers/"+code+"/reservations/"+id+"/confirm", nil)
							}
						}
					}
				})
			}
			time.Sleep(3 * time.Second)
			close(done)
			wg.Wait()
			stopPG()
			require.Zero(t, oversell.Load(), "PostgreSQL never holds more than totalLimit")
			require.Zero(t, gateBad.Load(), "Redis never holds more than totalLimit")
			require.Greater(t, passes.Load(), int64(3), "reconciliation ran during the load")
			t.Logf("%d passes during the load; orders found in flight %d, stale %d, uncommitted %d",
				passes.Load(), found["inFlight"].Load(), found["stale"].Load(), found["uncommitted"].Load())

			// Quiescence: Kafka's consumer applies what is in the topic.
			held := 0
			deadline := time.Now().Add(30 * time.Second)
			for {
				gs, err := s.app.gate.Inspect(ctx, code)
				require.NoError(t, err)
				held = int(gs.Held())
				st := s.state(code)
				if st.reserved+st.confirmed == held || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			s.settle(code, held)
			s.reconcile(code)
			r := s.do(http.MethodGet, "/vouchers/"+code+"/reconciliation", nil)
			require.Equal(t, http.StatusOK, r.status, string(r.raw))
			for _, field := range []string{"inFlight", "abandoned", "orphans", "stale", "missing", "uncommitted", "unconfirmed"} {
				require.Empty(t, r.body[field], field)
			}
			require.EqualValues(t, 0, r.body["drift"])
			s.assertConsistent(code)
			gs, err := s.app.gate.Inspect(ctx, code)
			require.NoError(t, err)
			require.True(t, gs.HeldCounted)
			require.Equal(t, gs.Held(), gs.HeldCount, "the held count is exact")
			rows, err := s.db.Query(ctx, `SELECT order_id FROM voucher_redemption
				WHERE voucher_code = $1 AND status IN ('RESERVED','CONFIRMED')`, code)
			require.NoError(t, err)
			n := 0
			for rows.Next() {
				var id string
				require.NoError(t, rows.Scan(&id))
				h, ok := gs.Orders[id]
				require.True(t, ok && !h.Released, "held row %s is held in Redis", id)
				n++
			}
			require.NoError(t, rows.Err())
			require.EqualValues(t, n, gs.HeldCount)
			require.EqualValues(t, n, r.body["redisHeld"], "the report's held count is the gate's")
		})
	}
}

// rawRedis is a client of the stack's Redis, closed at cleanup.
func rawRedis(t *testing.T, s *stack) rueidis.Client {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: s.cfg.RedisAddrs, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	return rc
}
