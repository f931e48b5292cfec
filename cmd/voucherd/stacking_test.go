package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/client"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// stackingModes are the modes orders of several codes run in: every
// mode.
var stackingModes = modes

// written waits, in Kafka mode, until the consumer has applied every event
// acknowledged so far, so that PostgreSQL's counts can be read; in other
// modes it returns at once.
func (s *stack) written() {
	s.t.Helper()
	if s.opts.kafka {
		s.caughtUp()
	}
}

// gateRemaining is the gate's count of uses left of a flash voucher, -1
// in standard mode.
func (s *stack) gateRemaining(code string) int64 {
	s.t.Helper()
	if !s.opts.flash {
		return -1
	}
	st, err := s.app.gate.Inspect(s.t.(*testing.T).Context(), code)
	require.NoError(s.t, err)
	require.True(s.t, st.Loaded, code)
	return st.Remaining
}

// replacingModes are the modes serving a replacement of several codes
// with flash-sale vouchers: every mode.
var replacingModes = stackingModes

// forEachStackingMode runs fn in every mode of stackingModes.
func forEachStackingMode(t *testing.T, fn func(t *testing.T, s *stack)) {
	forEachModeOf(t, stackingModes, nil, fn)
}

// forEachModeOf runs fn in each of the modes given, each stack's config
// changed by tweak when it is not nil.
func forEachModeOf(t *testing.T, modes []struct {
	name string
	opts stackOptions
}, tweak func(*Config), fn func(t *testing.T, s *stack)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			opts := m.opts
			opts.tweak = tweak
			fn(t, newStack(t, opts))
		})
	}
}

// raceWrites gives a stack race's writes a bound of 30 s: stacks sharing
// a code are written one at a time, and the queue of a race's hundreds of
// stacks on one code may outlast the default 5 s on a loaded test
// machine; the race asserts who wins, which an outcome-unknown 503 would
// leave undecided.
func raceWrites(cfg *Config) { cfg.WriteTimeout = 30 * time.Second }

// createStackable creates a voucher with the given discount members,
// totalLimit and stacking setting (nil: none given) and returns its code.
func (s *stack) createStackable(discount map[string]any, totalLimit int, stacking map[string]any) string {
	s.t.Helper()
	return s.createStackableAs("S", discount, totalLimit, stacking)
}

// createStackableAs is createStackable with a code starting with prefix
// (codes are taken in code order in flash mode).
func (s *stack) createStackableAs(prefix string, discount map[string]any, totalLimit int, stacking map[string]any) string {
	s.t.Helper()
	code := fmt.Sprintf("%s%d%d", prefix, time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
	body := map[string]any{"code": code, "totalLimit": totalLimit, "perUserLimit": 1000,
		"startsAt": "2020-01-01T00:00:00Z", "endsAt": "2999-01-01T00:00:00Z", "flashSale": s.opts.flash}
	for k, v := range discount {
		body[k] = v
	}
	if stacking != nil {
		body["stacking"] = stacking
	}
	r := s.do(http.MethodPost, "/vouchers", body)
	require.Equal(s.t, http.StatusCreated, r.status, string(r.raw))
	return code
}

// reserveStack posts an order presenting codes.
func (s *stack) reserveStack(customer, orderID string, amount int64, codes ...string) response {
	s.t.Helper()
	return s.do(http.MethodPost, "/reservations", map[string]any{
		"customerId": customer, "orderId": orderID, "orderAmount": amount, "codes": codes})
}

// items are a stack answer's items as code → discount.
func (r response) items() map[string]int64 {
	out := map[string]int64{}
	list, _ := r.body["items"].([]any)
	for _, it := range list {
		m := it.(map[string]any)
		out[m["code"].(string)] = int64(m["discountAmount"].(float64))
	}
	return out
}

var stackable = map[string]any{"stackable": true}

// TestStackReservation: a fixed 1,000 and 10% on an order of 20,000 give
// 2,900 with both items; the same request again is a replay; the orderId
// with other codes is ORDER_CONFLICT; per-code routes on it answer
// PART_OF_STACK; GET, extend, confirm and DELETE act on both codes, and a
// DELETE of the confirmed stack refunds both.
func TestStackReservation(t *testing.T) {
	t.Parallel()
	forEachStackingMode(t, func(t *testing.T, s *stack) {
		a := s.createStackable(map[string]any{"discountAmount": 1000}, 10, stackable)
		b := s.createStackable(map[string]any{"discountPercent": 10}, 10, stackable)
		r := s.do(http.MethodGet, "/vouchers/"+a, nil)
		require.Equal(t, map[string]any{"stackable": true}, r.body["stacking"], string(r.raw))

		r = s.reserveStack("7", "st-1", 20000, a, b)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.Equal(t, int64(2900), r.num("discountAmount"))
		require.Equal(t, map[string]int64{a: 1000, b: 1900}, r.items())
		require.Equal(t, "RESERVED", r.str("status"))
		require.Empty(t, r.header.Get("Idempotent-Replayed"))
		first := r.body

		r = s.reserveStack("7", "st-1", 20000, a, b)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
		require.Equal(t, first, r.body, "a replay answers the stored stack")
		s.written()
		require.Equal(t, 1, s.state(a).usedCount)
		require.Equal(t, 1, s.state(b).usedCount)

		for _, codes := range [][]string{{a}, {b, a}, {a, b, s.createStackable(map[string]any{"discountAmount": 5}, 10, stackable)}} {
			r = s.reserveStack("7", "st-1", 20000, codes...)
			require.Equal(t, http.StatusConflict, r.status, string(r.raw))
			require.Equal(t, "ORDER_CONFLICT", r.str("error"))
		}
		r = s.reserveStack("8", "st-1", 20000, a, b)
		require.Equal(t, "ORDER_CONFLICT", r.str("error"), string(r.raw))
		r = s.reserve(a, 7, "st-1", 20000)
		require.Equal(t, http.StatusConflict, r.status, string(r.raw))
		require.Equal(t, "ORDER_CONFLICT", r.str("error"), "a single reservation of a stack's orderId")
		for _, code := range []string{a, b} {
			for _, call := range []struct{ method, suffix string }{
				{http.MethodGet, ""}, {http.MethodDelete, ""}, {http.MethodPost, "/confirm"},
			} {
				r = s.do(call.method, "/vouchers/"+code+"/reservations/st-1"+call.suffix, nil)
				require.Equal(t, http.StatusConflict, r.status, "%s %s: %s", call.method, call.suffix, r.raw)
				require.Equal(t, "PART_OF_STACK", r.str("error"))
			}
			r = s.do(http.MethodPost, "/vouchers/"+code+"/reservations/st-1/extend", map[string]any{"seconds": 60})
			require.Equal(t, "PART_OF_STACK", r.str("error"), string(r.raw))
		}
		r = s.do(http.MethodPost, "/vouchers/"+a+"/reservations", map[string]any{
			"customerId": 7, "orderId": "st-x", "orderAmount": 20000, "replacesOrderId": "st-1"})
		require.Equal(t, "PART_OF_STACK", r.str("error"), "a single does not replace one code of a stack: %s", r.raw)

		r = s.do(http.MethodGet, "/reservations/st-1", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, "RESERVED", r.str("status"))
		require.Equal(t, int64(20000), r.num("orderAmount"))
		require.Equal(t, map[string]int64{a: 1000, b: 1900}, r.items())
		expires := r.str("expiresAt")

		r = s.do(http.MethodPost, "/reservations/st-1/extend", map[string]any{"seconds": 3000})
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Greater(t, r.str("expiresAt"), expires)

		r = s.do(http.MethodDelete, "/reservations/st-1", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, "RELEASED", r.str("status"))
		for _, code := range []string{a, b} {
			st := s.state(code)
			require.Equal(t, 0, st.usedCount, "DELETE releases %s", code)
			require.Equal(t, 1, st.released)
			if s.opts.flash {
				require.Equal(t, int64(10), s.gateRemaining(code), "the gate has %s's use back", code)
			}
		}
		r = s.do(http.MethodDelete, "/reservations/st-1", nil)
		require.Equal(t, http.StatusOK, r.status, "idempotent: %s", r.raw)
		r = s.reserveStack("7", "st-1", 20000, a, b)
		require.Equal(t, "ORDER_RELEASED", r.str("error"), string(r.raw))
		r = s.do(http.MethodPost, "/reservations/st-1/confirm", nil)
		require.Equal(t, "RESERVATION_RELEASED", r.str("error"), string(r.raw))

		r = s.reserveStack("7", "st-2", 20000, b, a)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.Equal(t, map[string]int64{b: 2000, a: 1000}, r.items(), "discounts apply in the order given")
		r = s.do(http.MethodPost, "/reservations/st-2/confirm", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, "CONFIRMED", r.str("status"))
		s.written()
		require.Equal(t, 1, s.state(a).confirmed)
		require.Equal(t, 1, s.state(b).confirmed)

		// A refund: DELETE of the confirmed stack gives both uses back.
		r = s.do(http.MethodDelete, "/reservations/st-2", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, "RELEASED", r.str("status"))
		s.written()
		for _, code := range []string{a, b} {
			st := s.state(code)
			require.Equal(t, 0, st.usedCount, "the refund gives %s's use back", code)
			require.Equal(t, 0, st.confirmed)
			require.Equal(t, 2, st.released)
			if s.opts.flash {
				require.Equal(t, int64(10), s.gateRemaining(code), "the gate has %s's use back", code)
			}
		}

		r = s.do(http.MethodGet, "/reservations/nosuch", nil)
		require.Equal(t, http.StatusNotFound, r.status, string(r.raw))
	})
}

// TestStackRefusals: a refused code answers its own error with failedCode
// and leaves nothing held; NOT_STACKABLE, EXCLUSIVE_GROUP; malformed lists
// are 400.
func TestStackRefusals(t *testing.T) {
	t.Parallel()
	forEachStackingMode(t, func(t *testing.T, s *stack) {
		// A sorts before B: in flash mode A's use is taken, then B refused,
		// and A's use given back before the answer.
		a := s.createStackableAs("A", map[string]any{"discountAmount": 1000}, 10, stackable)
		b := s.createStackableAs("B", map[string]any{"discountPercent": 10}, 1, stackable)
		c := s.createStackable(map[string]any{"discountAmount": 100}, 10, nil)
		g1 := s.createStackable(map[string]any{"discountAmount": 100}, 10, map[string]any{"stackable": true, "exclusiveGroup": "seasonal"})
		g2 := s.createStackable(map[string]any{"discountAmount": 100}, 10, map[string]any{"stackable": true, "exclusiveGroup": "seasonal"})

		r := s.reserve(b, 9, "other-1", 20000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		before := s.state(a)
		r = s.reserveStack("7", "st-held", 20000, a, b)
		require.Equal(t, http.StatusConflict, r.status, string(r.raw))
		require.Equal(t, "HELD_OUT", r.str("error"))
		require.Equal(t, b, r.str("failedCode"))
		require.NotEmpty(t, r.header.Get("Retry-After"))
		require.Equal(t, before, s.state(a), "A's reserved is unchanged at once after the answer")
		mode := "standard"
		if s.opts.flash {
			require.Equal(t, int64(10), s.gateRemaining(a), "the gate gave A's use back before the answer")
			mode = "flash-sync"
			if s.opts.kafka {
				mode = "flash-kafka"
			}
		}
		m := string(s.doToken(http.MethodGet, "/metrics", nil, testAdminToken).raw)
		require.Contains(t, m, `voucherd_stack_reservations_total{codes="2",failed_position="2",mode="`+mode+`",outcome="HELD_OUT"} 1`)
		if s.opts.flash {
			require.Contains(t, m, `voucherd_stack_give_backs_total{mode="`+mode+`"} 1`, "A's use, taken before B refused")
		} else {
			require.NotContains(t, m, `voucherd_stack_give_backs_total{`, "one transaction takes nothing it gives back")
		}

		r = s.reserveStack("7", "st-c", 20000, a, c)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
		require.Equal(t, "NOT_ELIGIBLE", r.str("error"))
		require.Equal(t, "NOT_STACKABLE", r.str("reason"))
		require.Equal(t, c, r.str("failedCode"))
		r = s.reserveStack("7", "st-g", 20000, g1, a, g2)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
		require.Equal(t, "EXCLUSIVE_GROUP", r.str("reason"))
		require.Equal(t, g2, r.str("failedCode"))
		r = s.reserveStack("7", "st-unknown", 20000, a, "NOSUCHCODE")
		require.Equal(t, http.StatusNotFound, r.status, string(r.raw))
		require.Equal(t, "NOSUCHCODE", r.str("failedCode"))
		require.Equal(t, before, s.state(a), "no refusal holds anything")
		for _, code := range []string{c, g1, g2} {
			require.Equal(t, 0, s.state(code).usedCount)
		}
		// A refused orderId is not taken: it may be used afresh.
		r = s.reserveStack("7", "st-c", 20000, g1, a)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))

		// A single that took the orderId a member would get is not adopted.
		s.written() // Kafka mode loads a new voucher into Redis once the consumer caught up
		d := s.createStackableAs("D", map[string]any{"discountAmount": 100}, 10, stackable)
		r = s.reserve(d, 7, voucher.StackMemberOrderID("st-collide", 2), 20000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		s.written()
		before, remainingA := s.state(a), s.gateRemaining(a)
		r = s.reserveStack("7", "st-collide", 20000, a, d)
		require.Equal(t, http.StatusConflict, r.status, string(r.raw))
		require.Equal(t, "ORDER_CONFLICT", r.str("error"))
		require.Equal(t, d, r.str("failedCode"))
		require.Equal(t, 1, s.state(d).usedCount, "the single keeps its use")
		require.Equal(t, before, s.state(a))
		require.Equal(t, remainingA, s.gateRemaining(a))
		if s.opts.flash {
			require.Equal(t, int64(9), s.gateRemaining(d))
		}

		r = s.reserveStack("7", "st-1code", 20000, c)
		require.Equal(t, http.StatusCreated, r.status, "one code needs no stacking: %s", r.raw)

		for _, codes := range [][]string{{}, {a, a}, {a, b, c, g1, g2, "X6"}} {
			r = s.reserveStack("7", "st-bad", 20000, codes...)
			require.Equal(t, http.StatusBadRequest, r.status, "%v: %s", codes, r.raw)
		}
		r = s.do(http.MethodPatch, "/vouchers/"+c, map[string]any{"stacking": map[string]any{"stackable": true, "exclusiveGroup": "x"}})
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, map[string]any{"stackable": true, "exclusiveGroup": "x"}, r.body["stacking"])
		r = s.do(http.MethodPatch, "/vouchers/"+c, map[string]any{"stacking": map[string]any{"exclusiveGroup": "x"}})
		require.Equal(t, http.StatusBadRequest, r.status, string(r.raw))
		r = s.do(http.MethodPatch, "/vouchers/"+c, map[string]any{"stacking": map[string]any{"stackable": false, "exclusiveGroup": "x"}})
		require.Equal(t, http.StatusBadRequest, r.status, string(r.raw))
		// A group PostgreSQL could not store (a NUL byte) is refused before
		// it gets there, and changes nothing.
		r = s.do(http.MethodPatch, "/vouchers/"+c, map[string]any{"stacking": map[string]any{"stackable": true, "exclusiveGroup": "&n\u0000\u0003"}})
		require.Equal(t, http.StatusBadRequest, r.status, string(r.raw))
		require.Equal(t, "INVALID_REQUEST", r.str("error"))
		r = s.do(http.MethodGet, "/vouchers/"+c, nil)
		require.Equal(t, map[string]any{"stackable": true, "exclusiveGroup": "x"}, r.body["stacking"])
		r = s.reserveStack("7", "st-c2", 20000, a, c)
		require.Equal(t, http.StatusCreated, r.status, "stackable since the PATCH: %s", r.raw)
	})
}

// TestStackRace runs runStackRace in every stacking mode.
func TestStackRace(t *testing.T) {
	t.Parallel()
	forEachModeOf(t, stackingModes, raceWrites, func(t *testing.T, s *stack) {
		runStackRace(t, s,
			s.createStackable(map[string]any{"discountAmount": 100}, 50, stackable),
			s.createStackable(map[string]any{"discountAmount": 100}, 1000, stackable))
	})
}

// TestStackRaceRedisCluster is TestStackRace in both flash modes on a
// Redis Cluster of three masters, with A and B on different masters.
func TestStackRaceRedisCluster(t *testing.T) {
	t.Parallel()
	for _, m := range stackingModes[1:] {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			runStackRaceRedisCluster(t, m.opts)
		})
	}
}

// runStackRaceRedisCluster runs the race of TestStackRaceRedisCluster in
// the flash mode of opts.
func runStackRaceRedisCluster(t *testing.T, opts stackOptions) {
	cluster := testenv.NewRedisCluster(t)
	opts.redisAddrs = cluster.Addrs
	opts.tweak = raceWrites
	s := newStack(t, opts)
	masterOf := clusterMasters(t, cluster)
	a := s.createStackable(map[string]any{"discountAmount": 100}, 50, stackable)
	var b string
	for i := 0; b == "" && i < 100; i++ {
		b = s.createStackable(map[string]any{"discountAmount": 100}, 1000, stackable)
		if masterOf(b) == masterOf(a) {
			b = ""
		}
	}
	require.NotEmpty(t, b, "no code on another master than %s", a)
	runStackRace(t, s, a, b)
}

// runStackRace: A (limit 50) and B (limit 1,000); 300 concurrent stacks
// [A,B] and 300 singles on B: exactly 50 stacks are taken, B holds 50 plus
// the singles taken, no refused stack holds anything, and in flash mode
// the gate's counts agree with PostgreSQL's.
func runStackRace(t *testing.T, s *stack, a, b string) {
	var stacks, singles atomic.Int64
	parallel(600, 64, func(i int) {
		if i%2 == 0 {
			r := s.reserveStack(fmt.Sprint(i), fmt.Sprintf("race-st-%d", i), 5000, a, b)
			switch {
			case r.status == http.StatusCreated:
				stacks.Add(1)
			case r.str("error") == "HELD_OUT" && r.str("failedCode") == a:
			default:
				t.Errorf("stack %d: %d %s", i, r.status, r.raw)
			}
			return
		}
		r := s.reserve(b, int64(i), fmt.Sprintf("race-b-%d", i), 5000)
		if r.status == http.StatusCreated {
			singles.Add(1)
		} else {
			t.Errorf("single %d: %d %s", i, r.status, r.raw)
		}
	})
	require.Equal(t, int64(50), stacks.Load())
	s.written()
	require.Equal(t, 50, s.state(a).usedCount)
	require.Equal(t, 50+int(singles.Load()), s.state(b).usedCount)
	require.Equal(t, 50, s.state(a).reserved)
	require.Equal(t, 50+int(singles.Load()), s.state(b).reserved)
	var members, orphans int
	require.NoError(t, s.db.QueryRow(t.Context(), `
		SELECT count(*), count(*) FILTER (WHERE m.member_order_id IS NULL AND r.order_id LIKE 'race-st-%')
		FROM voucher_redemption r LEFT JOIN voucher_stack_member m ON m.member_order_id = r.order_id
		WHERE r.voucher_code IN ($1, $2) AND (m.order_id IS NOT NULL OR r.order_id LIKE 'race-st-%')`, a, b).
		Scan(&members, &orphans))
	require.Equal(t, 100, members, "two redemptions per stack taken, none of a refused one")
	require.Zero(t, orphans)
	if s.opts.flash {
		require.Equal(t, int64(0), s.gateRemaining(a), "PostgreSQL and Redis agree")
		require.Equal(t, int64(1000-50)-singles.Load(), s.gateRemaining(b), "PostgreSQL and Redis agree")
	}
}

// TestStackExpiresWhole: a sweep batch that ends between the members of a
// stack still releases the stack whole.
func TestStackExpiresWhole(t *testing.T) {
	t.Parallel()
	for _, m := range stackingModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			opts := m.opts
			opts.ttl = time.Second
			opts.tweak = func(c *Config) { c.ExpiryInterval = time.Hour }
			s := newStack(t, opts)
			a := s.createStackable(map[string]any{"discountAmount": 1000}, 10, stackable)
			b := s.createStackable(map[string]any{"discountPercent": 10}, 10, stackable)
			r := s.reserveStack("7", "st-exp", 20000, a, b)
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			s.written()
			time.Sleep(1100 * time.Millisecond)
			n, err := s.app.svc.ExpireDue(t.Context(), 1)
			require.NoError(t, err)
			require.Equal(t, 1, n, "the batch ends after one member")
			for _, code := range []string{a, b} {
				st := s.state(code)
				require.Equal(t, 0, st.usedCount, code)
				require.Equal(t, 1, st.released, code)
			}
			r = s.do(http.MethodGet, "/reservations/st-exp", nil)
			require.Equal(t, "RELEASED", r.str("status"), string(r.raw))
			if s.opts.flash {
				require.Equal(t, int64(10), s.gateRemaining(a), "the gate has both uses back")
				require.Equal(t, int64(10), s.gateRemaining(b), "the gate has both uses back")
			}
		})
	}
}

// TestStackValidation: POST /validation answers per code and the total,
// taking nothing.
func TestStackValidation(t *testing.T) {
	t.Parallel()
	forEachStackingMode(t, func(t *testing.T, s *stack) {
		a := s.createStackable(map[string]any{"discountAmount": 1000}, 10, stackable)
		b := s.createStackable(map[string]any{"discountPercent": 10}, 10, stackable)
		c := s.createStackable(map[string]any{"discountAmount": 100}, 10, nil)
		validate := func(codes ...string) response {
			return s.do(http.MethodPost, "/validation", map[string]any{"customerId": "7", "orderAmount": 20000, "codes": codes})
		}
		r := validate(a, b)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, true, r.body["valid"])
		require.Equal(t, int64(2900), r.num("discountAmount"))
		items := r.body["items"].([]any)
		require.Len(t, items, 2)
		require.Equal(t, float64(1900), items[1].(map[string]any)["discountAmount"])

		r = validate(a, c)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, false, r.body["valid"])
		require.Equal(t, int64(1000), r.num("discountAmount"), "the valid codes' total")
		bad := r.body["items"].([]any)[1].(map[string]any)
		require.Equal(t, c, bad["voucherCode"])
		require.Equal(t, "NOT_ELIGIBLE", bad["code"])
		require.Equal(t, "NOT_STACKABLE", bad["reason"])

		r = validate(a, "NOSUCH")
		require.Equal(t, http.StatusNotFound, r.status, string(r.raw))
		require.Equal(t, "NOSUCH", r.str("failedCode"))
		r = validate(a, a)
		require.Equal(t, http.StatusBadRequest, r.status, string(r.raw))
		for _, code := range []string{a, b, c} {
			require.Zero(t, s.state(code).usedCount, "a validation takes nothing")
		}
	})
}

// TestStackClient runs the Go client's stack calls against the server.
func TestStackClient(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	ctx := t.Context()
	admin, api := client.New(s.base, testAdminToken), client.New(s.base, testAPIToken)
	codes := make([]string, 3)
	for i := range codes {
		codes[i] = fmt.Sprintf("CL%d%d", time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
		v := client.Voucher{Code: codes[i], DiscountAmount: 1000, TotalLimit: 5, PerUserLimit: 1,
			StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour)}
		if i < 2 {
			v.Stacking = &client.Stacking{Stackable: true}
		}
		created, err := admin.CreateVoucher(ctx, v)
		require.NoError(t, err)
		require.Equal(t, i < 2, created.Stacking.Stackable)
	}
	st, err := api.ReserveStack(ctx, client.StackRequest{CustomerID: "42", OrderID: "cl-1", OrderAmount: 5000, Codes: codes[:2]})
	require.NoError(t, err)
	require.Equal(t, int64(2000), st.DiscountAmount)
	require.Len(t, st.Items, 2)
	_, err = api.ReserveStack(ctx, client.StackRequest{CustomerID: "42", OrderID: "cl-2", OrderAmount: 5000, Codes: codes[1:]})
	require.True(t, client.IsCode(err, client.NotEligible), "%v", err)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, client.ReasonNotStackable, e.Reason)
	require.Equal(t, codes[2], e.FailedCode)
	_, err = api.GetReservation(ctx, codes[0], "cl-1")
	require.True(t, client.IsCode(err, client.PartOfStack), "%v", err)
	v, err := api.ValidateStack(ctx, client.StackRequest{CustomerID: "43", OrderAmount: 5000, Codes: codes[:2]})
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.Equal(t, int64(2000), v.DiscountAmount)
	st, err = api.GetStack(ctx, "cl-1")
	require.NoError(t, err)
	require.Equal(t, "42", st.CustomerID)
	_, err = api.ExtendStack(ctx, "cl-1", 60)
	require.NoError(t, err)
	st, err = api.ConfirmStack(ctx, "cl-1")
	require.NoError(t, err)
	require.Equal(t, client.StatusConfirmed, st.Status)
	st, err = api.ReleaseStack(ctx, "cl-1")
	require.NoError(t, err)
	require.Equal(t, client.StatusReleased, st.Status)
}

// TestStackStoreRefusalGivesBack: in flash-sync mode, when the gate took
// every member and PostgreSQL refuses one (here B was stopped behind the
// cached definition's back), every use goes back to the gate before the
// answer, which is B's own refusal.
func TestStackStoreRefusalGivesBack(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{flash: true})
	a := s.createStackableAs("A", map[string]any{"discountAmount": 1000}, 10, stackable)
	b := s.createStackableAs("B", map[string]any{"discountAmount": 1000}, 10, stackable)
	r := s.do(http.MethodPost, "/validation", map[string]any{"customerId": "7", "orderAmount": 20000, "codes": []string{a, b}})
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, int64(10), s.gateRemaining(a))
	_, err := s.db.Exec(t.Context(), "UPDATE voucher SET disabled = true WHERE code = $1", b)
	require.NoError(t, err)
	r = s.reserveStack("7", "st-store", 20000, a, b)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.Equal(t, "DISABLED", r.str("reason"))
	require.Equal(t, b, r.str("failedCode"))
	require.Equal(t, int64(10), s.gateRemaining(a), "A's use is back in the gate")
	require.Equal(t, int64(10), s.gateRemaining(b), "B's use is back in the gate")
	m := s.doToken(http.MethodGet, "/metrics", nil, testAdminToken)
	require.Contains(t, string(m.raw), `voucherd_gate_compensations_total{mode="flash-sync"} 2`,
		"the gate took both uses and gave both back")
	require.Contains(t, string(m.raw), `voucherd_stack_give_backs_total{mode="flash-sync"} 2`)
	require.Contains(t, string(m.raw), `voucherd_stack_reservations_total{codes="2",failed_position="2",mode="flash-sync",outcome="NOT_ELIGIBLE"} 1`)
	require.Zero(t, s.state(a).usedCount)
	// The orderId was not used: with B started again it takes both.
	_, err = s.db.Exec(t.Context(), "UPDATE voucher SET disabled = false WHERE code = $1", b)
	require.NoError(t, err)
	r = s.reserveStack("7", "st-store", 20000, a, b)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	require.Equal(t, int64(9), s.gateRemaining(a))
	require.Equal(t, int64(9), s.gateRemaining(b))
}

// TestStackCLI: voucherd reserve and validate with several codes, and
// voucherd order.
func TestStackCLI(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	a := s.createStackable(map[string]any{"discountAmount": 1000}, 10, stackable)
	b := s.createStackable(map[string]any{"discountPercent": 10}, 10, stackable)
	cli := func(args ...string) (string, error) {
		var out, errOut strings.Builder
		n := 1
		if args[0] == "order" {
			n = 2
		}
		args = append(args[:n:n], append([]string{"--url", s.base, "--token", testAPIToken}, args[n:]...)...)
		err := run(t.Context(), args, &out, &errOut)
		return out.String(), err
	}
	out, err := cli("validate", "--customer", "7", "--amount", "20000", a, b)
	require.NoError(t, err)
	require.Contains(t, out, `"discountAmount": 2900`)
	out, err = cli("reserve", "--customer", "7", "--order", "cli-st", "--amount", "20000", a, b)
	require.NoError(t, err)
	require.Contains(t, out, `"discountAmount": 2900`)
	out, err = cli("order", "get", "cli-st")
	require.NoError(t, err)
	require.Contains(t, out, `"status": "RESERVED"`)
	out, err = cli("order", "release", "cli-st")
	require.NoError(t, err)
	require.Contains(t, out, `"status": "RELEASED"`)
	_, err = cli("reserve", "--customer", "7", "--order", "cli-st", "--amount", "20000", a, b)
	require.ErrorContains(t, err, "ORDER_RELEASED")
}

// TestStackReplacement: a stack replaces a stack or a single, all or
// none, in every mode (flash-sale vouchers on both sides, and flash and
// standard codes mixed but in Kafka mode): the replaced order's uses
// are given back and the new members take theirs; a use of a code in both
// orders moves without being free; any refusal (the replaced order not
// held, a new code refused, the store refusing after the gate moved the
// uses) leaves the replaced order as it was in PostgreSQL and in the gate.
func TestStackReplacement(t *testing.T) {
	t.Parallel()
	forEachModeOf(t, replacingModes, nil, func(t *testing.T, s *stack) {
		testStackReplacement(t, s)
	})
}

// testStackReplacement is TestStackReplacement in one mode.
func testStackReplacement(t *testing.T, s *stack) {
	// state: PostgreSQL's counts of code, in Kafka mode once the consumer
	// has applied every event acknowledged so far.
	state := func(code string) dbState {
		t.Helper()
		s.written()
		return s.state(code)
	}
	a := s.createStackable(map[string]any{"discountAmount": 1000}, 10, stackable)
	b := s.createStackable(map[string]any{"discountAmount": 500}, 10, stackable)
	c := s.createStackable(map[string]any{"discountAmount": 200}, 1, stackable)
	replace := func(customer, orderID, replaces string, codes ...string) response {
		return s.do(http.MethodPost, "/reservations", map[string]any{"customerId": customer, "orderId": orderID,
			"orderAmount": 20000, "codes": codes, "replacesOrderId": replaces})
	}
	// agree: in the flash modes the gate counts what PostgreSQL holds, for
	// each flash code.
	agree := func(codes ...string) {
		t.Helper()
		for _, code := range codes {
			if rem := s.gateRemaining(code); rem >= 0 {
				st := state(code)
				require.Equal(t, int64(st.totalLimit-st.usedCount), rem, "gate and PostgreSQL agree on %s", code)
			}
		}
	}
	// gateHolds: in the flash modes, whether the gate holds code's use for
	// orderID (want, else it must not); standard codes are skipped.
	gateHolds := func(code, orderID string, want bool) {
		t.Helper()
		if !s.opts.flash {
			return
		}
		h, found, err := s.app.gate.Lookup(t.Context(), code, orderID)
		require.NoError(t, err)
		require.Equal(t, want, found && !h.Released, "gate: %s holds %s: %+v", orderID, code, h)
	}
	r := s.reserveStack("7", "rp-1", 20000, a, b)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	r = replace("8", "rp-x", "rp-1", a, c)
	require.Equal(t, "REPLACED_ORDER_NOT_HELD", r.str("error"), "another customer's: %s", r.raw)
	r = replace("7", "rp-x", "nosuch", a, c)
	require.Equal(t, "REPLACED_ORDER_NOT_HELD", r.str("error"), string(r.raw))
	agree(a, b, c)
	gateHolds(a, "rp-1", true)

	// The stack [A,B] becomes [A,C]: A's use is taken over, B's given back.
	r = replace("7", "rp-2", "rp-1", a, c)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	require.Equal(t, 1, state(a).usedCount)
	require.Equal(t, 0, state(b).usedCount)
	require.Equal(t, 1, state(c).usedCount)
	agree(a, b, c)
	gateHolds(a, "rp-1", false)
	gateHolds(a, "rp-2", true)
	r = s.do(http.MethodGet, "/reservations/rp-1", nil)
	require.Equal(t, "RELEASED", r.str("status"), string(r.raw))
	var continued bool
	require.NoError(t, s.db.QueryRow(t.Context(), `
		SELECT bool_and(n.held_since = o.created_at) FROM voucher_redemption n, voucher_redemption o
		WHERE o.order_id = 'rp-1' AND n.order_id IN (SELECT member_order_id FROM voucher_stack_member WHERE order_id = 'rp-2')`).
		Scan(&continued))
	require.True(t, continued, "the new members continue the replaced hold (held_since)")
	r = replace("7", "rp-2", "rp-1", a, c)
	require.Equal(t, http.StatusCreated, r.status, "a replay: %s", r.raw)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	agree(a, b, c)

	// A refusal of a new code leaves the replaced order held.
	r = replace("7", "rp-3", "rp-2", a, b, c)
	require.Equal(t, http.StatusCreated, r.status, "C's one use is taken over: %s", r.raw)
	r = s.reserve(c, 9, "rp-other", 20000)
	require.Equal(t, "HELD_OUT", r.str("error"), "C's one use stays held: %s", r.raw)
	// In Kafka mode a voucher is loaded into the gate once the consumer
	// has caught up.
	s.written()
	d := s.createStackable(map[string]any{"discountAmount": 200}, 1, stackable)
	r = s.reserve(d, 9, "rp-d", 20000)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	states := []dbState{state(a), state(b), state(c)}
	r = replace("7", "rp-4", "rp-3", a, d)
	require.Equal(t, "HELD_OUT", r.str("error"), string(r.raw))
	require.Equal(t, d, r.str("failedCode"))
	require.Equal(t, states, []dbState{state(a), state(b), state(c)}, "nothing changed")
	agree(a, b, c, d)
	gateHolds(a, "rp-3", true)
	gateHolds(a, "rp-4", false)
	r = s.do(http.MethodGet, "/reservations/rp-3", nil)
	require.Equal(t, "RESERVED", r.str("status"), "the replaced order stands: %s", r.raw)

	// A single reservation replaced by a stack.
	r = s.reserve(b, 7, "rp-single", 20000)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	before := state(b).usedCount
	r = replace("7", "rp-5", "rp-single", b, a)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	require.Equal(t, before, state(b).usedCount, "B's use is taken over")
	r = s.do(http.MethodGet, "/vouchers/"+b+"/reservations/rp-single", nil)
	require.Equal(t, "RELEASED", r.str("status"), string(r.raw))
	agree(a, b)
	gateHolds(b, "rp-single", false)
	gateHolds(b, "rp-5", true)
	// A member of a stack is not a single to replace.
	r = replace("7", "rp-6", voucher.StackMemberOrderID("rp-5", 2), b, a)
	require.Equal(t, "REPLACED_ORDER_NOT_HELD", r.str("error"), string(r.raw))
	agree(a, b)
	gateHolds(a, voucher.StackMemberOrderID("rp-5", 2), true)

	// Flash and standard codes mixed (all standard in standard mode): E is
	// kept and moves position, the standard S is kept, A is added. Kafka
	// mode refuses a mix (TestStackReplacementKafka): there S is a
	// flash-sale voucher too.
	stdBody := map[string]any{"discountAmount": 300, "flashSale": false}
	if s.opts.kafka {
		delete(stdBody, "flashSale")
	}
	s.written()
	std := s.createStackable(stdBody, 5, stackable)
	e := s.createStackable(map[string]any{"discountAmount": 100}, 2, stackable)
	r = s.reserveStack("7", "rp-m1", 20000, e, std)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	aUsed := state(a).usedCount
	r = replace("7", "rp-m2", "rp-m1", std, e, a)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	require.Equal(t, 1, state(e).usedCount)
	require.Equal(t, 1, state(std).usedCount)
	require.Equal(t, aUsed+1, state(a).usedCount)
	agree(a, e)
	gateHolds(e, "rp-m1", false)
	gateHolds(e, voucher.StackMemberOrderID("rp-m2", 2), true)
	// A refused new code: E's use goes back to the order replaced.
	states = []dbState{state(a), state(d), state(e), state(std)}
	r = replace("7", "rp-m3", "rp-m2", e, d)
	require.Equal(t, "HELD_OUT", r.str("error"), string(r.raw))
	require.Equal(t, d, r.str("failedCode"))
	require.Equal(t, states, []dbState{state(a), state(d), state(e), state(std)}, "nothing changed")
	agree(a, d, e)
	gateHolds(e, voucher.StackMemberOrderID("rp-m2", 2), true)
	gateHolds(e, "rp-m3", false)
	// The store refuses after the gate moved E's use (the replaced order
	// is confirmed, which the gate does not know in flash-sync mode; in
	// Kafka mode the gate knows it and refuses the move): the use goes
	// back to it.
	r = s.do(http.MethodPost, "/reservations/rp-m2/confirm", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	states = []dbState{state(a), state(e), state(std)}
	r = replace("7", "rp-m4", "rp-m2", e)
	require.Equal(t, "REPLACED_ORDER_NOT_HELD", r.str("error"), string(r.raw))
	require.Empty(t, r.str("failedCode"), "about the replaced order, not a code")
	require.Equal(t, states, []dbState{state(a), state(e), state(std)}, "nothing changed")
	agree(a, e)
	gateHolds(e, voucher.StackMemberOrderID("rp-m2", 2), true)
	gateHolds(e, "rp-m4", false)
	r = s.do(http.MethodGet, "/reservations/rp-m2", nil)
	require.Equal(t, "CONFIRMED", r.str("status"), string(r.raw))
}

// TestStackReplacementRace: 20 customers' stacks hold a hot code H (limit
// 30) and are each replaced six times, concurrently with 200 new stacks
// competing for H's 10 free uses. Every replacement keeps H (its use moves
// without being free: no replacement is refused for H, and exactly 10 new
// stacks are taken), some add Z (limit 5) and are refused for it, leaving
// the replaced order held. Afterwards nothing is oversold, every stack is
// all or none, each chain holds its last order only, and in the flash
// modes the gate agrees with PostgreSQL.
func TestStackReplacementRace(t *testing.T) {
	t.Parallel()
	forEachModeOf(t, replacingModes, raceWrites, func(t *testing.T, s *stack) {
		runStackReplacementRace(t, s,
			s.createStackable(map[string]any{"discountAmount": 100}, 30, stackable),
			s.createStackable(map[string]any{"discountAmount": 100}, 1000, stackable),
			s.createStackable(map[string]any{"discountAmount": 100}, 1000, stackable),
			s.createStackable(map[string]any{"discountAmount": 100}, 5, stackable))
	})
}

// runStackReplacementRace is TestStackReplacementRace on the codes H
// (limit 30), X and Y (limit 1,000) and Z (limit 5).
func runStackReplacementRace(t *testing.T, s *stack, h, x, y, z string) {
	const chains, steps, news = 20, 6, 200
	shapes := [][]string{{y, h}, {h, x, z}, {h, x}, {z, h}}
	last := make([]string, chains)
	for i := range chains {
		last[i] = fmt.Sprintf("ch-%d-0", i)
		r := s.reserveStack(fmt.Sprintf("ch-%d", i), last[i], 20000, h, x)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	}
	var taken, refusedZ atomic.Int64
	var released [chains][]string
	parallel(chains+news, 32, func(i int) {
		if i >= chains {
			n := i - chains
			r := s.reserveStack(fmt.Sprintf("new-%d", n), fmt.Sprintf("new-%d", n), 20000, h, y)
			switch {
			case r.status == http.StatusCreated:
				taken.Add(1)
			case r.str("error") == "HELD_OUT" && r.str("failedCode") == h:
			default:
				t.Errorf("new stack %d: %d %s", n, r.status, r.raw)
			}
			return
		}
		for k := 1; k <= steps; k++ {
			id := fmt.Sprintf("ch-%d-%d", i, k)
			r := s.do(http.MethodPost, "/reservations", map[string]any{"customerId": fmt.Sprintf("ch-%d", i),
				"orderId": id, "orderAmount": 20000, "codes": shapes[(i+k)%len(shapes)], "replacesOrderId": last[i]})
			switch {
			case r.status == http.StatusCreated:
				released[i] = append(released[i], last[i])
				last[i] = id
			case r.str("error") == "HELD_OUT" && r.str("failedCode") == z:
				refusedZ.Add(1)
			default:
				t.Errorf("replacement %s of %s: %d %s", id, last[i], r.status, r.raw)
			}
		}
	})
	require.Equal(t, int64(30-chains), taken.Load(), "the chains' uses of H were never free")
	require.Positive(t, refusedZ.Load(), "some replacements are refused for Z")
	s.written()
	for _, code := range []string{h, x, y, z} {
		st := s.state(code)
		require.LessOrEqual(t, st.usedCount, st.totalLimit, code)
		require.Equal(t, st.usedCount, st.reserved, code)
		if rem := s.gateRemaining(code); rem >= 0 {
			require.Equal(t, int64(st.totalLimit-st.usedCount), rem, "gate and PostgreSQL agree on %s", code)
		}
	}
	require.Equal(t, 30, s.state(h).usedCount)
	for i := range chains {
		r := s.do(http.MethodGet, "/reservations/"+last[i], nil)
		require.Equal(t, "RESERVED", r.str("status"), "chain %d holds its last order: %s", i, r.raw)
		for _, id := range released[i] {
			r := s.do(http.MethodGet, "/reservations/"+id, nil)
			require.Equal(t, "RELEASED", r.str("status"), "chain %d: %s", i, r.raw)
		}
	}
	var mixed, short, orphans int
	require.NoError(t, s.db.QueryRow(t.Context(), `
		SELECT count(*) FILTER (WHERE held > 0 AND held < n), count(*) FILTER (WHERE held > 0 AND n < cardinality(codes))
		FROM (SELECT st.codes, count(r.*) AS n, count(r.*) FILTER (WHERE r.status = 'RESERVED') AS held
		      FROM voucher_stack st JOIN voucher_stack_member m ON m.order_id = st.order_id
		      JOIN voucher_redemption r ON r.order_id = m.member_order_id GROUP BY st.order_id, st.codes) s`).
		Scan(&mixed, &short))
	require.Zero(t, mixed, "every stack all or none")
	require.Zero(t, short, "a held stack holds every code")
	require.NoError(t, s.db.QueryRow(t.Context(), `
		SELECT count(*) FROM voucher_redemption r LEFT JOIN voucher_stack_member m ON m.member_order_id = r.order_id
		WHERE r.voucher_code = ANY($1) AND r.status = 'RESERVED' AND m.order_id IS NULL`, []string{h, x, y, z}).
		Scan(&orphans))
	require.Zero(t, orphans, "no use held outside a recorded stack")
}
