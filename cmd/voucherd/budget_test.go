package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// createBudgetVoucher creates a voucher of this stack's mode with the
// discount members given (discountAmount or discountPercent) and a money
// budget; clip sets budgetShortfall clip.
func (s *stack) createBudgetVoucher(discount map[string]any, budget int64, clip bool, totalLimit int) string {
	s.t.Helper()
	code := fmt.Sprintf("B%d%d", time.Now().UnixNano()%1_000_000_000, s.codes.Add(1))
	body := map[string]any{
		"code": code, "totalLimit": totalLimit, "perUserLimit": 100, "budgetAmount": budget,
		"startsAt": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "endsAt": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339),
		"flashSale": s.opts.flash,
	}
	for k, v := range discount {
		body[k] = v
	}
	if clip {
		body["budgetShortfall"] = "clip"
	}
	r := s.do(http.MethodPost, "/vouchers", body)
	require.Equal(s.t, http.StatusCreated, r.status, string(r.raw))
	require.EqualValues(s.t, budget, r.num("budgetAmount"))
	require.EqualValues(s.t, budget, r.num("budgetRemaining"))
	return code
}

// budgetOf is GET /vouchers/{code}'s budget members: reserved, confirmed,
// remaining.
func (s *stack) budgetOf(code string) [3]int64 {
	s.t.Helper()
	r := s.do(http.MethodGet, "/vouchers/"+code, nil)
	require.Equal(s.t, http.StatusOK, r.status, string(r.raw))
	return [3]int64{r.num("budgetReserved"), r.num("budgetConfirmed"), r.num("budgetRemaining")}
}

// The answers of a money budget, in every mode: fixed 3,000 with a budget
// of 10,000 takes three orders and refuses the fourth with 1,000 left; a
// release gives 3,000 back; 10% of 30,000, 30,000, 20,000 with a budget of
// 5,000 is 201, 409, 201, and with clip 201, 201 (clipped), 409. PATCH may
// raise the budget, never lower it below what is held.
func TestBudgetAnswers(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		code := s.createBudgetVoucher(map[string]any{"discountAmount": 3000}, 10_000, false, 100)
		for i := range 3 {
			r := s.reserve(code, 1, fmt.Sprintf("%s-%d", code, i), 50_000)
			require.Equal(t, http.StatusCreated, r.status, string(r.raw))
			require.EqualValues(t, 3000, r.num("discountAmount"))
		}
		r := s.reserve(code, 2, code+"-3", 50_000)
		require.Equal(t, http.StatusConflict, r.status, string(r.raw))
		require.Equal(t, "BUDGET_EXCEEDED", r.str("error"))
		require.Equal(t, "budget", r.str("limit"))
		require.EqualValues(t, 1000, r.num("budgetRemaining"))
		require.Positive(t, r.num("retryAfter"), "RESERVED holds may free some: %s", r.raw)
		s.settle(code, 3)
		require.Equal(t, [3]int64{9000, 0, 1000}, s.budgetOf(code))

		r = s.do(http.MethodDelete, "/vouchers/"+code+"/reservations/"+code+"-0", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, [3]int64{6000, 0, 4000}, s.budgetOf(code))
		r = s.do(http.MethodPost, "/vouchers/"+code+"/reservations/"+code+"-1/confirm", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.Equal(t, [3]int64{3000, 3000, 4000}, s.budgetOf(code))
		r = s.reserve(code, 2, code+"-4", 50_000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		s.settle(code, 3)

		// PATCH: not below the 9,000 held, changing nothing; raising is fine.
		r = s.do(http.MethodPatch, "/vouchers/"+code, map[string]any{"budgetAmount": 8_999})
		require.Equal(t, http.StatusConflict, r.status, string(r.raw))
		require.Equal(t, "LIMIT_BELOW_HELD", r.str("error"))
		require.Equal(t, "budget", r.str("limit"))
		r = s.do(http.MethodPatch, "/vouchers/"+code, map[string]any{"budgetAmount": 12_000})
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		require.EqualValues(t, 12_000, r.num("budgetAmount"))
		r = s.reserve(code, 2, code+"-5", 50_000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		s.settle(code, 4)
		s.assertConsistent(code)

		pct := s.createBudgetVoucher(map[string]any{"discountPercent": 10}, 5_000, false, 100)
		for i, want := range []struct {
			amount int64
			status int
		}{{30_000, http.StatusCreated}, {30_000, http.StatusConflict}, {20_000, http.StatusCreated}} {
			r := s.reserve(pct, 1, fmt.Sprintf("%s-%d", pct, i), want.amount)
			require.Equal(t, want.status, r.status, string(r.raw))
			if want.status == http.StatusConflict {
				require.Equal(t, "budget", r.str("limit"))
				require.EqualValues(t, 2000, r.num("budgetRemaining"))
			}
		}
		s.settle(pct, 2)
		require.Equal(t, [3]int64{5000, 0, 0}, s.budgetOf(pct))
		s.assertConsistent(pct)

		clip := s.createBudgetVoucher(map[string]any{"discountPercent": 10}, 5_000, true, 100)
		r = s.reserve(clip, 1, clip+"-0", 30_000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.Nil(t, r.body["clipped"])
		r = s.reserve(clip, 1, clip+"-1", 30_000)
		require.Equal(t, http.StatusCreated, r.status, string(r.raw))
		require.EqualValues(t, 2000, r.num("discountAmount"))
		require.Equal(t, true, r.body["clipped"])
		r = s.reserve(clip, 1, clip+"-2", 20_000)
		require.Equal(t, http.StatusConflict, r.status, string(r.raw))
		require.EqualValues(t, 0, r.num("budgetRemaining"))
		s.settle(clip, 2)
		s.assertConsistent(clip)
	})
}

// A flash sale of a budget: 2,000 requests on 64 connections for a fixed
// 1,000 with a budget of 100,000 and 1,000 uses: exactly 100 answers 201,
// their discounts sum to the budget, every other answer is 409 limit
// budget, and PostgreSQL and Redis agree; with clip on a percentage the
// discounts sum to the budget exactly.
func TestBudgetFlashRace(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, s *stack) {
		for _, clip := range []bool{false, true} {
			discount := map[string]any{"discountAmount": 1000}
			if clip {
				discount = map[string]any{"discountPercent": 10}
			}
			code := s.createBudgetVoucher(discount, 100_000, clip, 1_000)
			var mu sync.Mutex
			var created int
			var sum int64
			parallel(2_000, 64, func(i int) {
				r := s.reserve(code, int64(i+1), fmt.Sprintf("%s-%d", code, i), 10_000+int64(i))
				mu.Lock()
				defer mu.Unlock()
				switch r.status {
				case http.StatusCreated:
					created++
					sum += r.num("discountAmount")
				case http.StatusConflict:
					if r.str("error") != "BUDGET_EXCEEDED" || r.str("limit") != "budget" {
						t.Errorf("unexpected answer %s", r.raw)
					}
				default:
					t.Errorf("unexpected answer %d %s", r.status, r.raw)
				}
			})
			require.EqualValues(t, 100_000, sum, "clip %t", clip)
			if !clip {
				require.Equal(t, 100, created)
			}
			s.settle(code, created)
			require.Equal(t, [3]int64{100_000, 0, 0}, s.budgetOf(code))
			s.assertConsistent(code)
			if s.opts.flash {
				st, err := s.app.gate.Inspect(context.Background(), code)
				require.NoError(t, err)
				require.True(t, st.Loaded)
				require.Equal(t, int64(100_000), st.BudgetAmount)
				require.Equal(t, int64(100_000), st.BudgetHeld)
				require.Equal(t, int64(100_000), st.BudgetHeldOrders())
				// Each hold carries the discount its row has (sync mode
				// re-prices a hold whose clipped remainder the store gave
				// to another order).
				rows, err := s.db.Query(context.Background(),
					`SELECT order_id, discount_amount FROM voucher_redemption WHERE voucher_code = $1 AND status <> 'RELEASED'`, code)
				require.NoError(t, err)
				for rows.Next() {
					var id string
					var d int64
					require.NoError(t, rows.Scan(&id, &d))
					require.Equal(t, d, st.Orders[id].DiscountAmount, "order %s", id)
				}
				require.NoError(t, rows.Err())
				r := s.do(http.MethodGet, "/vouchers/"+code+"/reconciliation", nil)
				require.Equal(t, http.StatusOK, r.status, string(r.raw))
				require.EqualValues(t, 100_000, r.num("budgetAmount"), string(r.raw))
				require.EqualValues(t, 100_000, r.num("databaseBudgetHeld"), string(r.raw))
				require.EqualValues(t, 100_000, r.num("redisBudgetHeld"), string(r.raw))
				require.Zero(t, r.num("budgetDrift"), string(r.raw))
			}
		}
	})
}
