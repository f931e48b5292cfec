package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/redisgate"
	"github.com/voucherd/voucherd/internal/testenv"
)

var weekdayNames = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}

// windowedVoucher creates a voucher of this stack's mode whose one window
// runs all day on the weekday (UTC) of the instant day, with windowLimit
// limit (0: none) and the total limit total.
func (s *stack) windowedVoucher(day time.Time, limit, total int) string {
	s.t.Helper()
	code := fmt.Sprintf("W%d%d", time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
	body := map[string]any{
		"code": code, "discountAmount": 500, "totalLimit": total, "perUserLimit": 1000,
		"startsAt":  time.Now().Add(-time.Hour).UTC().Format(time.RFC3339),
		"endsAt":    time.Now().Add(30 * 24 * time.Hour).UTC().Format(time.RFC3339),
		"flashSale": s.opts.flash,
		"schedule": map[string]any{"timeZone": "UTC", "windows": []any{
			map[string]any{"days": []string{weekdayNames[day.UTC().Weekday()]}, "from": "00:00", "to": "24:00"}}},
	}
	if limit > 0 {
		body["windowLimit"] = limit
	}
	r := s.do(http.MethodPost, "/vouchers", body)
	require.Equal(s.t, http.StatusCreated, r.status, string(r.raw))
	require.EqualValues(s.t, limit, r.num("windowLimit"))
	return code
}

// currentWindow is GET /vouchers/{code}'s currentWindow (nil outside) and
// nextWindowAt.
func (s *stack) currentWindow(code string) (map[string]any, string) {
	s.t.Helper()
	r := s.do(http.MethodGet, "/vouchers/"+code, nil)
	require.Equal(s.t, http.StatusOK, r.status, string(r.raw))
	cw, _ := r.body["currentWindow"].(map[string]any)
	return cw, r.str("nextWindowAt")
}

// The answers of recurring windows in every mode: a window covering now
// takes windowLimit uses and refuses the next (HELD_OUT, limit window, with
// nextWindowAt; validation the same), a release frees one; GET shows the
// occurrence's counts; a window that does not cover now refuses
// OUTSIDE_WINDOW with nextWindowAt, taking nothing; PATCH lowers the quota
// no further than the occurrence holds.
func TestWindowAnswers(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		now := time.Now().UTC()
		if now.Hour() == 23 && now.Minute() >= 55 {
			time.Sleep(time.Until(now.Truncate(time.Hour).Add(time.Hour + time.Second)))
			now = time.Now().UTC()
		}
		code := s.windowedVoucher(now, 3, 100)
		cw, _ := s.currentWindow(code)
		require.NotNil(t, cw)
		require.EqualValues(t, 3, cw["remaining"])
		for i := range 3 {
			r := s.reserve(code, 1, fmt.Sprintf("%s-%d", code, i), 50_000)
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		}
		s.settle(code, 3)
		r := s.reserve(code, 2, code+"-3", 50_000)
		require.Equal(t, http.StatusConflict, r.status, string(r.raw))
		require.Equal(t, "HELD_OUT", r.str("error"))
		require.Equal(t, "window", r.str("limit"))
		require.Positive(t, r.num("retryAfter"))
		next, err := time.Parse(time.RFC3339, r.str("nextWindowAt"))
		require.NoError(t, err, string(r.raw))
		require.Equal(t, now.Truncate(24*time.Hour).Add(7*24*time.Hour), next.UTC())
		v := s.do(http.MethodPost, "/vouchers/"+code+"/validation", map[string]any{"customerId": 2, "orderAmount": 50_000})
		require.Equal(t, http.StatusOK, v.status, string(v.raw))
		require.Equal(t, false, v.body["valid"])
		require.Equal(t, "window", v.str("limit"))
		require.Equal(t, r.str("nextWindowAt"), v.str("nextWindowAt"))

		cw, _ = s.currentWindow(code)
		require.EqualValues(t, 3, cw["used"])
		require.EqualValues(t, 0, cw["remaining"])

		r = s.do(http.MethodPatch, "/vouchers/"+code, map[string]any{"windowLimit": 2})
		require.Equal(t, http.StatusConflict, r.status, string(r.raw))
		require.Equal(t, "LIMIT_BELOW_HELD", r.str("error"))
		require.Equal(t, "window", r.str("limit"))

		r = s.do(http.MethodDelete, "/vouchers/"+code+"/reservations/"+code+"-0", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		r = s.reserve(code, 2, code+"-4", 50_000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		s.settle(code, 3)
		s.assertConsistent(code)

		// A window that does not cover now.
		other := s.windowedVoucher(now.Add(48*time.Hour), 3, 100)
		r = s.reserve(other, 1, other+"-0", 50_000)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
		require.Equal(t, "OUTSIDE_WINDOW", r.str("reason"))
		require.Equal(t, now.Truncate(24*time.Hour).Add(48*time.Hour).Format(time.RFC3339), r.str("nextWindowAt"))
		v = s.do(http.MethodPost, "/vouchers/"+other+"/validation", map[string]any{"customerId": 1, "orderAmount": 50_000})
		require.Equal(t, "OUTSIDE_WINDOW", v.str("reason"), string(v.raw))
		cw, nextAt := s.currentWindow(other)
		require.Nil(t, cw)
		require.Equal(t, r.str("nextWindowAt"), nextAt)
		r = s.do(http.MethodGet, "/vouchers/"+other+"/reservations/"+other+"-0", nil)
		require.Equal(t, http.StatusNotFound, r.status, string(r.raw))
		s.assertConsistent(other)
	})
}

// A quota of 100 per window under a race of 64 connections: exactly 100
// answers 201, every other 409 naming the window, and the stores agree.
func TestWindowRace(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		now := time.Now().UTC()
		if now.Hour() == 23 && now.Minute() >= 55 {
			time.Sleep(time.Until(now.Truncate(time.Hour).Add(time.Hour + time.Second)))
			now = time.Now().UTC()
		}
		code := s.windowedVoucher(now, 100, 1000)
		var created, refused atomic.Int64
		parallel(400, 64, func(i int) {
			r := s.reserve(code, int64(i%50+1), fmt.Sprintf("%s-%d", code, i), 50_000)
			switch {
			case r.status == http.StatusCreated:
				created.Add(1)
			case r.status == http.StatusConflict && r.str("limit") == "window":
				refused.Add(1)
			default:
				t.Errorf("unexpected answer %d %s", r.status, r.raw)
			}
		})
		require.EqualValues(t, 100, created.Load())
		require.EqualValues(t, 300, refused.Load())
		s.settle(code, 100)
		cw, _ := s.currentWindow(code)
		require.EqualValues(t, 100, cw["used"])
		s.assertConsistent(code)
	})
}

// Bad schedules are 400, naming what is wrong.
func TestWindowBadSchedules(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	for _, sched := range []any{
		map[string]any{"timeZone": "Mars/Olympus", "windows": []any{map[string]any{"days": []string{"MON"}, "from": "13:00", "to": "14:00"}}},
		map[string]any{"timeZone": "UTC", "windows": []any{map[string]any{"days": []string{"MON", "MON"}, "from": "13:00", "to": "14:00"}}},
		map[string]any{"timeZone": "UTC", "windows": []any{map[string]any{"days": []string{"MON"}, "from": "22:00", "to": "02:00"}}},
		map[string]any{"timeZone": "UTC", "windows": []any{}},
		map[string]any{"timeZone": "UTC", "windows": []any{map[string]any{"days": []string{"MON"}, "from": "13:00", "to": "14:00", "x": 1}}},
		"MON 13:00",
	} {
		r := s.do(http.MethodPost, "/vouchers", map[string]any{
			"code": "BADWIN", "discountAmount": 500, "totalLimit": 10,
			"startsAt": time.Now().UTC().Format(time.RFC3339), "endsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			"schedule": sched,
		})
		require.Equal(t, http.StatusBadRequest, r.status, string(r.raw))
	}
	r := s.do(http.MethodPost, "/vouchers", map[string]any{
		"code": "BADWIN", "discountAmount": 500, "totalLimit": 10, "windowLimit": 3,
		"startsAt": time.Now().UTC().Format(time.RFC3339), "endsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	})
	require.Equal(t, http.StatusBadRequest, r.status, "windowLimit needs a schedule: %s", r.raw)
}

// Reconciliation compares the gate's counter of an occurrence with the
// uses PostgreSQL's rows took in it: a counter the gate lost (its budget
// hash deleted) is reported as drift and raised back by a repair, so the
// quota holds again; a dry run changes nothing.
func TestWindowReconciliation(t *testing.T) {
	t.Parallel()
	for _, m := range modes[1:] {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			redis := testenv.NewRedis(t)
			opts := m.opts
			opts.redisAddrs = []string{redis.Addr}
			s := newStack(t, opts)
			rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redis.Addr}, DisableCache: true})
			require.NoError(t, err)
			t.Cleanup(rc.Close)
			now := time.Now().UTC()
			if now.Hour() == 23 && now.Minute() >= 55 {
				time.Sleep(time.Until(now.Truncate(time.Hour).Add(time.Hour + time.Second)))
				now = time.Now().UTC()
			}
			code := s.windowedVoucher(now, 3, 100)
			for i := range 2 {
				r := s.reserve(code, int64(i+1), fmt.Sprintf("%s-%d", code, i), 50_000)
				require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			}
			s.settle(code, 2)
			require.NoError(t, rc.Do(ctx, rc.B().Del().Key(redisgate.BudgetKey(s.cfg.RedisKeyPrefix, code)).Build()).Error())

			r := s.do(http.MethodGet, "/vouchers/"+code+"/reconciliation", nil)
			require.Equal(t, http.StatusOK, r.status, string(r.raw))
			windows, _ := r.body["windows"].([]any)
			require.Len(t, windows, 1, string(r.raw))
			w := windows[0].(map[string]any)
			require.EqualValues(t, 2, w["databaseHeld"])
			require.EqualValues(t, 0, w["redisHeld"])
			require.EqualValues(t, 2, w["drift"])
			require.Equal(t, true, w["lost"])

			r = s.do(http.MethodPost, "/vouchers/"+code+"/reconciliation", nil)
			require.Equal(t, http.StatusOK, r.status, string(r.raw))
			require.EqualValues(t, 1, r.num("restoredCounters"), string(r.raw))
			r = s.do(http.MethodGet, "/vouchers/"+code+"/reconciliation", nil)
			require.Nil(t, r.body["windows"], string(r.raw))

			// The quota holds again: one more, then the window is full.
			r = s.reserve(code, 3, code+"-2", 50_000)
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			r = s.reserve(code, 4, code+"-3", 50_000)
			require.Equal(t, http.StatusConflict, r.status, string(r.raw))
			require.Equal(t, "window", r.str("limit"))
			s.settle(code, 3)
			s.assertConsistent(code)
		})
	}
}

// The CLI creates a voucher with windows and a quota per window, shows the
// current occurrence's counts, and patches the quota.
func TestWindowCLI(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	cli := func(args ...string) string {
		var out, errOut strings.Builder
		args = append(args[:2:2], append([]string{"--url", s.base, "--token", testAdminToken}, args[2:]...)...)
		require.NoError(t, run(t.Context(), args, &out, &errOut), errOut.String())
		return out.String()
	}
	now := time.Now().UTC()
	if now.Hour() == 23 && now.Minute() >= 55 {
		time.Sleep(time.Until(now.Truncate(time.Hour).Add(time.Hour + time.Second)))
		now = time.Now().UTC()
	}
	code := fmt.Sprintf("WCLI%d", time.Now().UnixNano()%1_000_000_000)
	day := weekdayNames[now.Weekday()]
	out := cli("voucher", "create", "--code", code, "--discount", "300", "--total", "10", "--per-user", "5",
		"--time-zone", "UTC", "--window", day+"/00:00-24:00", "--window", strings.ToLower(weekdayNames[(now.Weekday()+1)%7])+"/00:00-00:01", "--window-limit", "2")
	require.Contains(t, out, "windows")
	require.Contains(t, out, "per window  2 uses")
	require.Equal(t, http.StatusCreated, s.reserve(code, 77, code+"-o1", 1000).status)
	out = cli("voucher", "get", code)
	require.Contains(t, out, "1 used, 1 remaining", out)
	out = cli("voucher", "patch", "--window-limit", "3", code)
	require.Contains(t, out, "per window  3 uses", out)
}

// A campaign's windows and quota per window hold across its codes, in
// every mode; GET shows the occurrence's counts.
func TestWindowCampaign(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		now := time.Now().UTC()
		if now.Hour() == 23 && now.Minute() >= 55 {
			time.Sleep(time.Until(now.Truncate(time.Hour).Add(time.Hour + time.Second)))
			now = time.Now().UTC()
		}
		r := s.createCampaign(map[string]any{
			"name": "drop", "codeCount": 4, "discountAmount": 100, "totalLimit": 10, "perUserLimit": 10,
			"endsAt": now.Add(30 * 24 * time.Hour).Format(time.RFC3339), "flashSale": s.opts.flash, "windowLimit": 2,
			"schedule": map[string]any{"timeZone": "UTC", "windows": []any{
				map[string]any{"days": []string{weekdayNames[now.Weekday()]}, "from": "00:00", "to": "24:00"}}},
		})
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.EqualValues(t, 2, r.num("windowLimit"))
		id := r.str("id")
		codes := s.campaignCodes(id, 10)
		for i, code := range codes[:2] {
			r := s.reserve(code, int64(i+1), fmt.Sprintf("%s-%d", code, i), 5000)
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		}
		r = s.reserve(codes[2], 3, codes[2]+"-x", 5000)
		require.Equal(t, http.StatusConflict, r.status, string(r.raw))
		require.Equal(t, "window", r.str("limit"))
		s.settle(id, 2)
		r = s.doToken(http.MethodGet, "/campaigns/"+id, nil, testAdminToken)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		cw, _ := r.body["currentWindow"].(map[string]any)
		require.EqualValues(t, 2, cw["used"], string(r.raw))
		s.assertConsistent(id)
	})
}

// A flash validation of a voucher with a money budget is answered by the
// gate (validate.lua), which takes the budget as reserve.lua does: what the
// gate holds, even before Kafka mode's consumer wrote it, and a clipping
// budget's remainder as the discount; it takes nothing.
func TestBudgetValidationFromTheGate(t *testing.T) {
	t.Parallel()
	for _, m := range modes[1:] {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, m.opts)
			code := s.createBudgetVoucher(map[string]any{"discountAmount": 3000}, 10_000, false, 100)
			for i := range 3 {
				r := s.reserve(code, 1, fmt.Sprintf("%s-%d", code, i), 50_000)
				require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			}
			v := s.do(http.MethodPost, "/vouchers/"+code+"/validation", map[string]any{"customerId": 2, "orderAmount": 50_000})
			require.Equal(t, http.StatusOK, v.status, string(v.raw))
			require.Equal(t, false, v.body["valid"], string(v.raw))
			require.Equal(t, "BUDGET_EXCEEDED", v.str("code"))
			require.EqualValues(t, 1000, v.num("budgetRemaining"))
			// (Kafka mode loads another voucher once the consumer caught up.)
			s.settle(code, 3)

			clip := s.createBudgetVoucher(map[string]any{"discountAmount": 3000}, 4_000, true, 100)
			r := s.reserve(clip, 1, clip+"-0", 50_000)
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			v = s.do(http.MethodPost, "/vouchers/"+clip+"/validation", map[string]any{"customerId": 2, "orderAmount": 50_000})
			require.Equal(t, true, v.body["valid"], string(v.raw))
			require.EqualValues(t, 1000, v.num("discountAmount"))
			s.settle(clip, 1)
			require.Equal(t, [3]int64{9000, 0, 1000}, s.budgetOf(code))
		})
	}
}

// A use counts against the occurrence it was taken in whenever it is given
// back: a confirmed use of one day's occurrence refunded during the next
// day's goes back to the first day's, in every mode (the service's clock
// moved a day on; the stores record the occurrence, never recompute it).
func TestWindowGiveBackToItsOccurrence(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			var shift atomic.Int64
			opts := m.opts
			opts.tweak = func(c *Config) {
				c.clock = func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
			}
			s := newStack(t, opts)
			code := fmt.Sprintf("WDAY%d%d", time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
			r := s.do(http.MethodPost, "/vouchers", map[string]any{
				"code": code, "discountAmount": 500, "totalLimit": 100, "perUserLimit": 100, "windowLimit": 1,
				"startsAt":  time.Now().Add(-time.Hour).UTC().Format(time.RFC3339),
				"endsAt":    time.Now().Add(30 * 24 * time.Hour).UTC().Format(time.RFC3339),
				"flashSale": s.opts.flash,
				"schedule": map[string]any{"timeZone": "UTC", "windows": []any{map[string]any{
					"days": []string{"MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"}, "from": "00:00", "to": "24:00"}}},
			})
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			r = s.reserve(code, 1, code+"-d1", 5000)
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			r = s.do(http.MethodPost, "/vouchers/"+code+"/reservations/"+code+"-d1/confirm", nil)
			require.Equal(t, http.StatusOK, r.status, string(r.raw))
			r = s.reserve(code, 2, code+"-x1", 5000)
			require.Equal(t, http.StatusConflict, r.status, string(r.raw))
			require.Equal(t, "OUT_OF_STOCK", r.str("error"))
			require.Equal(t, "window", r.str("limit"))
			s.settle(code, 1)

			// The next day's occurrence has its own use.
			shift.Store(int64(24 * time.Hour))
			r = s.reserve(code, 3, code+"-d2", 5000)
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			s.settle(code, 2)
			// The first day's use, refunded now, goes back to the first day:
			// the second day's occurrence stays full.
			r = s.do(http.MethodDelete, "/vouchers/"+code+"/reservations/"+code+"-d1", nil)
			require.Equal(t, http.StatusOK, r.status, string(r.raw))
			r = s.reserve(code, 4, code+"-x2", 5000)
			require.Equal(t, http.StatusConflict, r.status, string(r.raw))
			require.Equal(t, "window", r.str("limit"), string(r.raw))
			cw, _ := s.currentWindow(code)
			require.EqualValues(t, 1, cw["used"])
			s.settle(code, 1)
			s.assertConsistent(code)
			var first, second int64
			require.NoError(t, s.db.QueryRow(context.Background(), `SELECT
				coalesce((SELECT held FROM voucher_limit WHERE voucher_code = $1 AND kind = 'window' ORDER BY period_start LIMIT 1), -1),
				coalesce((SELECT held FROM voucher_limit WHERE voucher_code = $1 AND kind = 'window' ORDER BY period_start DESC LIMIT 1), -1)`,
				code).Scan(&first, &second))
			require.Equal(t, []int64{0, 1}, []int64{first, second}, "the first day's occurrence got its use back")
			if s.opts.flash {
				st, err := s.app.gate.Inspect(context.Background(), code)
				require.NoError(t, err)
				var counts []int64
				for _, n := range st.Windows {
					counts = append(counts, n)
				}
				require.ElementsMatch(t, []int64{0, 1}, counts, "the gate's counters: %v", st.Windows)
			}
		})
	}
}
