package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/testenv"
	"github.com/voucherd/voucherd/internal/voucher"
)

// elem is one reservation of a batch.
type elem struct {
	customer string
	order    string
	amount   int64
	currency string // "": none
}

func el(customer int64, order string) elem {
	return elem{strconv.FormatInt(customer, 10), order, 250_000, ""}
}

func (e elem) request(code string) voucher.ReserveRequest {
	return voucher.ReserveRequest{Code: code, CustomerID: e.customer, OrderID: e.order, OrderAmount: e.amount}
}

// answer is what one reservation got, in a form that compares whole.
type answer struct {
	Code       voucher.ErrorCode // "" for a success
	Reason     voucher.Reason
	Message    string
	RetryAfter time.Duration // HELD_OUT
	Replay     bool
	Redemption voucher.Redemption // zero for a rejection
	Taken      *voucher.Stock     // a use taken: the stock right after it
	// OutcomeUnknown: a CodeUnavailable after which the use may be taken.
	OutcomeUnknown bool
}

func answerOf(res voucher.Reservation, err error) answer {
	if err != nil {
		var ve *voucher.Error
		if !errors.As(err, &ve) {
			return answer{Code: voucher.CodeInternal, Message: err.Error()}
		}
		return answer{Code: ve.Code, Reason: ve.Reason, Message: ve.Message, RetryAfter: ve.RetryAfter, OutcomeUnknown: ve.OutcomeUnknown}
	}
	return answer{Replay: res.Replay, Redemption: res.Redemption, Taken: res.Taken}
}

// short is the answer in a word or two, for the tables.
func (a answer) short() string {
	switch {
	case a.Code == "" && a.Replay:
		return "replay"
	case a.Code == "":
		return "ok"
	case a.Reason != "":
		return string(a.Code) + "/" + string(a.Reason)
	}
	return string(a.Code)
}

func shorts(answers []answer) []string {
	out := make([]string, len(answers))
	for i, a := range answers {
		out[i] = a.short()
	}
	return out
}

// reserveBatchSQL calls voucherd_reserve_batch directly, every element with
// the clock at.
func reserveBatchSQL(ctx context.Context, s *pgstore.Store, code string, at time.Time, elems []elem) ([]answer, error) {
	n := len(elems)
	customers, orders, amounts, nows := make([]string, n), make([]string, n), make([]int64, n), make([]time.Time, n)
	currencies := make([]*string, n)
	for i, e := range elems {
		customers[i], orders[i], amounts[i], nows[i] = e.customer, e.order, e.amount, at
		if e.currency != "" {
			currencies[i] = &e.currency
		}
	}
	rows, err := s.Pool().Query(ctx, `
		SELECT o_order_id, o_voucher_code, o_customer, o_order_amount, o_discount_amount, o_status,
		       o_created_at, o_updated_at, o_expires_at, o_replay, o_error, o_reason, o_message, o_n,
		       o_retry_ms, o_used, o_total
		FROM voucherd_reserve_batch($1, $2::text[], $3, $4, $5, $6, $7::text[]) ORDER BY o_n`,
		code, customers, orders, amounts, nows, pgtype.Interval{Microseconds: ttl.Microseconds(), Valid: true}, currencies)
	if err != nil {
		return nil, err
	}
	var out []answer
	var (
		r                      voucher.Redemption
		status                 string
		replay                 bool
		code2, reason, message string
		pos                    int32
		retryMS                int64
		used, total            int32
	)
	_, err = pgx.ForEachRow(rows, []any{&r.OrderID, &r.VoucherCode, &r.CustomerID, &r.OrderAmount, &r.DiscountAmount,
		&status, &r.CreatedAt, &r.UpdatedAt, &r.ExpiresAt, &replay, &code2, &reason, &message, &pos,
		&retryMS, &used, &total}, func() error {
		if int(pos) != len(out)+1 {
			return fmt.Errorf("row for element %d, want %d", pos, len(out)+1)
		}
		if code2 != "" {
			// The adapter's wording and rounding.
			e := pgstore.Rejection(code2, reason, message, retryMS)
			out = append(out, answer{Code: e.Code, Reason: e.Reason, Message: e.Message, RetryAfter: e.RetryAfter})
			return nil
		}
		r.Status = voucher.Status(status)
		r.CreatedAt, r.UpdatedAt, r.ExpiresAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC(), r.ExpiresAt.UTC()
		a := answer{Replay: replay, Redemption: r}
		if total > 0 {
			a.Taken = &voucher.Stock{Remaining: int64(total - used), TotalLimit: total}
		}
		out = append(out, a)
		return nil
	})
	if err == nil && len(out) != n {
		err = fmt.Errorf("%d rows for %d elements", len(out), n)
	}
	return out, err
}

// reserveEach reserves the elements one after the other, each in its own
// call: the answers a batch must give.
func reserveEach(t testing.TB, s *pgstore.Store, code string, at time.Time, elems []elem) []answer {
	t.Helper()
	out := make([]answer, len(elems))
	for i, e := range elems {
		out[i] = answerOf(s.Reserve(context.Background(), e.request(code), at, ttl))
	}
	return out
}

// holder holds the combiner's writes of a voucher code on request, so that
// a test decides what goes into one batch, and records the batches.
type holder struct {
	mu      sync.Mutex
	hold    map[string]chan struct{}
	batches map[string][][]string
}

func newHolder(s *pgstore.Store) *holder {
	h := &holder{hold: map[string]chan struct{}{}, batches: map[string][][]string{}}
	pgstore.SetBeforeWrite(s, func(code string, orderIDs []string) {
		h.mu.Lock()
		h.batches[code] = append(h.batches[code], orderIDs)
		ch := h.hold[code]
		delete(h.hold, code)
		h.mu.Unlock()
		if ch != nil {
			<-ch
		}
	})
	return h
}

// holdNext makes the next write of code wait until release is called.
func (h *holder) holdNext(code string) (release func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	h.hold[code] = ch
	h.mu.Unlock()
	return func() { close(ch) }
}

func (h *holder) batchesOf(code string) [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]string(nil), h.batches[code]...)
}

// eventually polls cond for up to 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// reserveTogether reserves the elements through the combiner of s so that
// all but the first are written in one batch: the first one's write is held
// until the others are queued behind it.
func reserveTogether(t testing.TB, s *pgstore.Store, h *holder, code string, at time.Time, elems []elem) []answer {
	t.Helper()
	out := make([]answer, len(elems))
	before := len(h.batchesOf(code))
	release := h.holdNext(code)
	var wg sync.WaitGroup
	for i, e := range elems {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = answerOf(s.Reserve(context.Background(), e.request(code), at, ttl))
		}()
		if i == 0 {
			eventually(t, "first write held", func() bool { return len(h.batchesOf(code)) == before+1 })
		} else {
			eventually(t, "reservation queued", func() bool { return pgstore.CombinerWaiting(s, code) == i })
		}
	}
	release()
	wg.Wait()
	want := [][]string{{elems[0].order}}
	if len(elems) > 1 {
		var rest []string
		for _, e := range elems[1:] {
			rest = append(rest, e.order)
		}
		want = append(want, rest)
	}
	require.Equal(t, want, h.batchesOf(code)[before:], "one write for the first reservation, one for the rest")
	return out
}

// voucherState is everything stored about one voucher's uses.
type voucherState struct {
	Counts      counts
	Redemptions []voucher.Redemption
	Counters    map[string]int32
}

func readState(t testing.TB, s *pgstore.Store, code string) voucherState {
	t.Helper()
	ctx := context.Background()
	st := voucherState{Counts: readCounts(t, s, code), Counters: map[string]int32{}}
	rows, err := s.Pool().Query(ctx, `
		SELECT order_id, voucher_code, customer, order_amount, discount_amount, status, created_at, updated_at, expires_at
		FROM voucher_redemption WHERE voucher_code = $1 ORDER BY order_id COLLATE "C"`, code)
	require.NoError(t, err)
	st.Redemptions, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.Redemption, error) {
		var r voucher.Redemption
		var status string
		err := row.Scan(&r.OrderID, &r.VoucherCode, &r.CustomerID, &r.OrderAmount, &r.DiscountAmount,
			&status, &r.CreatedAt, &r.UpdatedAt, &r.ExpiresAt)
		r.Status = voucher.Status(status)
		r.CreatedAt, r.UpdatedAt, r.ExpiresAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC(), r.ExpiresAt.UTC()
		return r, err
	})
	require.NoError(t, err)
	rows, err = s.Pool().Query(ctx, `SELECT customer, held FROM voucher_customer_usage WHERE voucher_code = $1`, code)
	require.NoError(t, err)
	var customer string
	var held int32
	_, err = pgx.ForEachRow(rows, []any{&customer, &held}, func() error {
		st.Counters[customer] = held
		return nil
	})
	require.NoError(t, err)
	return st
}

// batchCase is a batch and the answers it must get: the answers of the same
// reservations made one after the other.
type batchCase struct {
	name      string
	total     int32
	perUser   int32
	minAmount int64
	noVoucher bool
	// setup runs before the batch, the same way on every store.
	setup func(t testing.TB, s *pgstore.Store, code string)
	at    time.Time // zero: now
	elems []elem
	want  []string
}

func reserved(orders ...elem) func(t testing.TB, s *pgstore.Store, code string) {
	return func(t testing.TB, s *pgstore.Store, code string) {
		for _, e := range orders {
			e.order = code + "-" + e.order
			_, err := s.Reserve(context.Background(), e.request(code), now, ttl)
			require.NoError(t, err)
		}
	}
}

// confirmed reserves and confirms the orders.
func confirmed(orders ...elem) func(t testing.TB, s *pgstore.Store, code string) {
	return func(t testing.TB, s *pgstore.Store, code string) {
		reserved(orders...)(t, s, code)
		for _, e := range orders {
			_, err := s.Confirm(context.Background(), code, code+"-"+e.order, now)
			require.NoError(t, err)
		}
	}
}

var batchCases = []batchCase{
	{
		name: "same customer twice", total: 10, perUser: 1,
		elems: []elem{el(1, "a"), el(1, "b"), el(2, "c")},
		want:  []string{"ok", "ALREADY_USED", "ok"},
	},
	{
		name: "same customer three times, per-user limit 2", total: 10, perUser: 2,
		elems: []elem{el(1, "a"), el(1, "b"), el(1, "c")},
		want:  []string{"ok", "ok", "ALREADY_USED"},
	},
	{
		name: "same customer, quota partly held before", total: 10, perUser: 2,
		setup: reserved(el(1, "held")),
		elems: []elem{el(1, "a"), el(1, "b")},
		want:  []string{"ok", "ALREADY_USED"},
	},
	{
		name: "same orderId twice", total: 10, perUser: 1,
		elems: []elem{el(1, "a"), el(1, "a"), el(2, "b"), el(1, "a")},
		want:  []string{"ok", "replay", "ok", "replay"},
	},
	{
		name: "same orderId, another customer", total: 10, perUser: 1,
		elems: []elem{el(1, "a"), el(2, "a")},
		want:  []string{"ok", "ORDER_CONFLICT"},
	},
	{
		name: "larger than what remains", total: 3, perUser: 1,
		elems: []elem{el(1, "a"), el(2, "b"), el(3, "c"), el(4, "d"), el(5, "e")},
		want:  []string{"ok", "ok", "ok", "HELD_OUT", "HELD_OUT"},
	},
	{
		name: "larger than what remains after earlier uses", total: 4, perUser: 1,
		setup: reserved(el(8, "x"), el(9, "y")),
		elems: []elem{el(1, "a"), el(1, "b"), el(2, "c"), el(3, "d"), el(9, "y")},
		want:  []string{"ok", "ALREADY_USED", "ok", "HELD_OUT", "replay"},
	},
	{
		name: "sold out inside the batch, then replays and quota", total: 2, perUser: 1,
		elems: []elem{el(1, "a"), el(2, "b"), el(1, "a"), el(3, "c"), el(1, "d"), el(2, "b")},
		want:  []string{"ok", "ok", "replay", "HELD_OUT", "HELD_OUT", "replay"},
	},
	{
		name: "ineligible inside the batch", total: 10, perUser: 1, minAmount: 100_000,
		elems: []elem{el(1, "a"), {"2", "b", 99_999, ""}, el(3, "c")},
		want:  []string{"ok", "NOT_ELIGIBLE/ORDER_AMOUNT_TOO_LOW", "ok"},
	},
	{
		name: "orderId first ineligible, then eligible", total: 10, perUser: 1, minAmount: 100_000,
		elems: []elem{{"1", "a", 50_000, ""}, el(1, "a"), {"1", "a", 50_000, ""}},
		want:  []string{"NOT_ELIGIBLE/ORDER_AMOUNT_TOO_LOW", "ok", "replay"},
	},
	{
		name: "orderId refused by the quota, then taken by another customer", total: 10, perUser: 1,
		setup: reserved(el(1, "held")),
		elems: []elem{el(1, "a"), {"2", "a", 300_000, ""}, el(2, "a"), el(1, "a")},
		want:  []string{"ALREADY_USED", "ok", "replay", "ORDER_CONFLICT"},
	},
	{
		name: "known orders", total: 10, perUser: 1,
		setup: func(t testing.TB, s *pgstore.Store, code string) {
			ctx := context.Background()
			reserved(el(1, "k"), el(4, "r"))(t, s, code)
			_, _, err := s.Release(ctx, code, code+"-r", now)
			require.NoError(t, err)
			newVoucher(t, s, code+"-O", 10, 1)
			_, err = s.Reserve(ctx, el(3, code+"-x").request(code+"-O"), now, ttl)
			require.NoError(t, err)
		},
		elems: []elem{el(1, "k"), el(2, "k"), el(3, "x"), el(4, "r"), el(4, "n"), el(5, "r")},
		want:  []string{"replay", "ORDER_CONFLICT", "ORDER_CONFLICT", "ORDER_RELEASED", "ok", "ORDER_CONFLICT"},
	},
	{
		name: "sold out before the batch", total: 1, perUser: 1,
		setup: reserved(el(1, "first")),
		elems: []elem{el(2, "a"), el(2, "a"), el(1, "first"), el(1, "b"), el(3, "first")},
		want:  []string{"HELD_OUT", "HELD_OUT", "replay", "HELD_OUT", "ORDER_CONFLICT"},
	},
	{
		name: "sold out before the batch, every use confirmed", total: 1, perUser: 1,
		setup: confirmed(el(1, "first")),
		elems: []elem{el(2, "a"), el(1, "first"), el(3, "b")},
		want:  []string{"OUT_OF_STOCK", "replay", "OUT_OF_STOCK"},
	},
	{
		name: "sold out inside the batch, the other uses confirmed", total: 3, perUser: 1,
		setup: confirmed(el(8, "x"), el(9, "y")),
		elems: []elem{el(1, "a"), el(2, "b"), el(3, "c")},
		want:  []string{"ok", "HELD_OUT", "HELD_OUT"},
	},
	{
		name: "released holds do not hold out", total: 2, perUser: 1,
		setup: func(t testing.TB, s *pgstore.Store, code string) {
			confirmed(el(8, "x"))(t, s, code)
			reserved(el(9, "y"))(t, s, code)
			_, _, err := s.Release(context.Background(), code, code+"-y", now)
			require.NoError(t, err)
			confirmed(el(7, "z"))(t, s, code)
		},
		elems: []elem{el(1, "a"), el(2, "b")},
		want:  []string{"OUT_OF_STOCK", "OUT_OF_STOCK"},
	},
	{
		name: "every element refused", total: 10, perUser: 1, minAmount: 100_000,
		setup: reserved(el(1, "held")),
		elems: []elem{el(1, "a"), {"2", "b", 1, ""}, el(1, "c")},
		want:  []string{"ALREADY_USED", "NOT_ELIGIBLE/ORDER_AMOUNT_TOO_LOW", "ALREADY_USED"},
	},
	{
		name: "not started", total: 10, perUser: 1, at: base.Add(-time.Second),
		setup: reserved(el(1, "known")),
		elems: []elem{el(2, "a"), el(1, "known")},
		want:  []string{"NOT_ELIGIBLE/NOT_STARTED", "replay"},
	},
	{
		name: "ended", total: 10, perUser: 1, at: base.Add(30 * 24 * time.Hour),
		elems: []elem{el(2, "a")},
		want:  []string{"NOT_ELIGIBLE/EXPIRED"},
	},
	{
		name: "unknown voucher", noVoucher: true,
		elems: []elem{el(1, "a"), el(1, "a")},
		want:  []string{"VOUCHER_NOT_FOUND", "VOUCHER_NOT_FOUND"},
	},
}

// Each mixed batch gets the answers, and leaves the rows, of the same
// reservations made one by one: called directly and through the combiner.
func TestReserveBatchMixed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	single := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
	direct := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
	combined := newStoreWith(t, pgstore.CombinerConfig{})
	h := newHolder(combined)

	for i, tc := range batchCases {
		t.Run(tc.name, func(t *testing.T) {
			code := fmt.Sprintf("MIX-%d", i)
			at := tc.at
			if at.IsZero() {
				at = now
			}
			// orderIds are unique across vouchers: prefix them per case.
			elems := append([]elem(nil), tc.elems...)
			for i := range elems {
				elems[i].order = code + "-" + elems[i].order
			}
			for _, s := range []*pgstore.Store{single, direct, combined} {
				if !tc.noVoucher {
					newVoucher(t, s, code, tc.total, tc.perUser, func(v *voucher.Voucher) { v.MinOrderAmount = tc.minAmount })
				}
				if tc.setup != nil {
					tc.setup(t, s, code)
				}
			}

			want := reserveEach(t, single, code, at, elems)
			require.Equal(t, tc.want, shorts(want), "one by one")

			got, err := reserveBatchSQL(ctx, direct, code, at, elems)
			require.NoError(t, err)
			require.Equal(t, want, got, "voucherd_reserve_batch")

			got = reserveTogether(t, combined, h, code, at, elems)
			require.Equal(t, want, got, "through the combiner")

			if tc.noVoucher {
				return
			}
			state := readState(t, single, code)
			require.Equal(t, state, readState(t, direct, code), "rows after voucherd_reserve_batch")
			require.Equal(t, state, readState(t, combined, code), "rows after the combiner")
		})
	}
}

// Random batches against the same reservations made one by one, round
// after round on the same voucher, with releases in between: same answers,
// same rows.
func TestReserveBatchMatchesOneByOne(t *testing.T) {
	t.Parallel()
	single := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
	batched := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
	for _, s := range []*pgstore.Store{single, batched} {
		newVoucher(t, s, "RAND", 12, 2, func(v *voucher.Voucher) { v.MinOrderAmount = 100_000 })
	}
	batchRounds(t, "RAND", 40, 16, func(rng *rand.Rand, round int) elem {
		e := elem{customer: strconv.FormatInt(1+rng.Int64N(6), 10), amount: 250_000,
			order: fmt.Sprintf("o-%d-%d", round, rng.IntN(4))} // repeats inside the round
		if rng.IntN(8) == 0 {
			e.amount = 50_000
		}
		return e
	}, single, batched, nil)
}

// The same under a language collation (ICU en-US, where ".c" < "a" < "A" <
// "b" < "B", as in the databases many managed services create), with
// customers and orderIds whose byte order differs from the language's: the
// batch sorts them in byte order wherever the lock order or the positions
// of its arrays depend on it, and through the combiner too.
func TestReserveBatchMatchesOneByOneUnderALanguageCollation(t *testing.T) {
	t.Parallel()
	single := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
	batched := newStoreOn(t, testenv.PostgresICU(t, "en-US"), pgstore.CombinerConfig{Disabled: true})
	combined := newStoreOn(t, testenv.PostgresICU(t, "en-US"), pgstore.CombinerConfig{})
	var sorted []string
	require.NoError(t, batched.Pool().QueryRow(context.Background(),
		`SELECT array_agg(c ORDER BY c) FROM unnest('{B,.c,a,A}'::text[]) AS c`).Scan(&sorted))
	require.Equal(t, []string{".c", "a", "A", "B"}, sorted, "the database sorts text in a language's order")
	for _, s := range []*pgstore.Store{single, batched, combined} {
		newVoucher(t, s, "LANG", 14, 2)
	}
	customers := []string{"a", "A", "b", "B", ".c", "c.1", "C-2", "@d"}
	prefixes := []string{"o", "O", ".o", "o."}
	batchRounds(t, "LANG", 25, 13, func(rng *rand.Rand, round int) elem {
		return elem{customer: customers[rng.IntN(len(customers))], amount: 250_000,
			order: fmt.Sprintf("%s-%d-%d", prefixes[rng.IntN(len(prefixes))], round, rng.IntN(6))}
	}, single, batched, combined)
}

// batchRounds sends rounds of random batches of code (1 to maxElems
// elements, newElem's, a third of them given an orderId of an earlier
// element instead) to batched with voucherd_reserve_batch and, unless nil,
// to combined through the combiner, and the same reservations one by one
// to single: every round the same answers and the same rows. After each
// round some held uses are released on every store alike.
func batchRounds(t *testing.T, code string, rounds, maxElems int, newElem func(rng *rand.Rand, round int) elem,
	single, batched, combined *pgstore.Store) {
	t.Helper()
	ctx := context.Background()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 8))
	stores := []*pgstore.Store{single, batched}
	var h *holder
	if combined != nil {
		stores = append(stores, combined)
		h = newHolder(combined)
	}
	var known []string
	at := now
	for round := 0; round < rounds; round++ {
		at = at.Add(time.Second)
		elems := make([]elem, 1+rng.IntN(maxElems))
		for i := range elems {
			e := newElem(rng, round)
			if len(known) > 0 && rng.IntN(3) == 0 {
				e.order = known[rng.IntN(len(known))]
			}
			elems[i] = e
			known = append(known, e.order)
		}
		want := reserveEach(t, single, code, at, elems)
		got, err := reserveBatchSQL(ctx, batched, code, at, elems)
		require.NoError(t, err)
		require.Equal(t, want, got, "round %d: %v", round, elems)
		if combined != nil {
			require.Equal(t, want, reserveTogether(t, combined, h, code, at, elems), "round %d through the combiner: %v", round, elems)
		}
		state := readState(t, single, code)
		for _, s := range stores[1:] {
			require.Equal(t, state, readState(t, s, code), "round %d", round)
		}
		for _, r := range state.Redemptions {
			if r.Status.Held() && rng.IntN(4) == 0 {
				for _, s := range stores {
					_, _, err := s.Release(ctx, code, r.OrderID, at)
					require.NoError(t, err)
				}
			}
		}
	}
}

// lockCounter locks the counter of a customer (creating it with held 0) in
// a transaction of its own, so that a batch needing it waits; it returns
// the transaction.
func lockCounter(t testing.TB, s *pgstore.Store, code string, customer int64) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	_, err := s.Pool().Exec(ctx, `INSERT INTO voucher_customer_usage (voucher_code, customer, customer_id, held) VALUES ($1, $2::bigint::text, $2, 0)`, code, customer)
	require.NoError(t, err)
	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	_, err = tx.Exec(ctx, `SELECT 1 FROM voucher_customer_usage WHERE voucher_code = $1 AND customer = $2::bigint::text FOR UPDATE`, code, customer)
	require.NoError(t, err)
	return tx
}

// waitBatchBlocked waits until a voucherd_reserve_batch call of this
// database waits for a lock.
func waitBatchBlocked(t testing.TB, s *pgstore.Store) {
	t.Helper()
	eventually(t, "batch waiting for a lock", func() bool {
		var n int
		err := s.Pool().QueryRow(context.Background(), `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%voucherd_reserve_batch(%'`).Scan(&n)
		require.NoError(t, err)
		return n > 0
	})
}

// A use is given back after the batch read the voucher, by a customer of the
// batch whose counter the batch waits for. The batch sees that customer's
// counter after the release, so it must see the stock after it too: it
// decides on the voucher as it is once the counters are locked, and grants
// both elements. (Deciding stock on the earlier read refused the second
// element while two uses were free: not linearizable, found by the fault
// suite, docs/faults.md finding 6.)
func TestReserveBatchStockGrowsUnderIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
	newVoucher(t, s, "GROW", 2, 1)
	_, err := s.Reserve(ctx, request("GROW", 10, "o-old"), now, ttl)
	require.NoError(t, err)

	other, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Rollback(ctx) })
	_, err = other.Exec(ctx, `SELECT 1 FROM voucher_customer_usage WHERE voucher_code = 'GROW' AND customer = '10' FOR UPDATE`)
	require.NoError(t, err)

	type result struct {
		answers []answer
		err     error
	}
	done := make(chan result, 1)
	go func() {
		a, err := reserveBatchSQL(ctx, s, "GROW", now, []elem{el(10, "o1"), el(11, "o2")})
		done <- result{a, err}
	}()
	waitBatchBlocked(t, s)
	// Customer 10 gives its use back while the batch waits for its counter.
	_, err = other.Exec(ctx, `SELECT voucherd_release('GROW', 'o-old', $1)`, now)
	require.NoError(t, err)
	require.NoError(t, other.Commit(ctx))

	res := <-done
	require.NoError(t, res.err)
	require.Equal(t, []string{"ok", "ok"}, shorts(res.answers))
	st := readState(t, s, "GROW")
	require.Equal(t, counts{UsedCount: 2, Held: 2, Rows: 3, UsageRows: 2, CustomerSum: 2}, st.Counts)
	require.Equal(t, map[string]int32{"10": 1, "11": 1}, st.Counters)
}

// Other writers take uses after the batch read the voucher: the batch grants
// only what the locked row still has, and decides again as if the elements
// had run after those writers.
func TestReserveBatchStockShrinksUnderIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
	newVoucher(t, s, "SHRINK", 5, 1)
	other := lockCounter(t, s, "SHRINK", 10)

	type result struct {
		answers []answer
		err     error
	}
	done := make(chan result, 1)
	go func() {
		a, err := reserveBatchSQL(ctx, s, "SHRINK", now, []elem{
			el(10, "o1"), el(11, "o2"), el(12, "o3"), el(13, "o4"), el(10, "o5"), el(13, "o4"),
		})
		done <- result{a, err}
	}()
	waitBatchBlocked(t, s)
	// Two uses taken by another transaction while the batch waits.
	for _, c := range []int64{20, 21} {
		_, err := other.Exec(ctx, `SELECT voucherd_reserve_one('SHRINK', $1::bigint::text, $2, 250000, $3, interval '15 minutes')`,
			c, fmt.Sprintf("b-%d", c), now)
		require.NoError(t, err)
	}
	require.NoError(t, other.Commit(ctx))

	res := <-done
	require.NoError(t, res.err)
	require.Equal(t, []string{"ok", "ok", "ok", "HELD_OUT", "HELD_OUT", "HELD_OUT"}, shorts(res.answers))
	st := readState(t, s, "SHRINK")
	require.Equal(t, counts{UsedCount: 5, Held: 5, Rows: 5, UsageRows: 5, CustomerSum: 5}, st.Counts)
	require.Equal(t, map[string]int32{"10": 1, "11": 1, "12": 1, "20": 1, "21": 1}, st.Counters, "no counter left for customer 13")
}

// A PATCH of the voucher's rules under a batch: the batch rolls back whole
// (VD003) and the combiner reserves each element on its own, under the new
// rules.
func TestReserveBatchRulesChangeUnderIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raiseMinimum := func(t *testing.T, s *pgstore.Store) {
		minAmount := int64(300_000)
		_, _, err := s.PatchVoucher(ctx, "RULES", voucher.Patch{MinOrderAmount: &minAmount})
		require.NoError(t, err)
	}

	t.Run("sql", func(t *testing.T) {
		t.Parallel()
		s := newStoreWith(t, pgstore.CombinerConfig{Disabled: true})
		newVoucher(t, s, "RULES", 10, 1)
		other := lockCounter(t, s, "RULES", 10)
		done := make(chan error, 1)
		go func() {
			_, err := reserveBatchSQL(ctx, s, "RULES", now, []elem{el(10, "o1"), el(11, "o2")})
			done <- err
		}()
		waitBatchBlocked(t, s)
		raiseMinimum(t, s)
		require.NoError(t, other.Commit(ctx))
		var pgErr *pgconn.PgError
		require.ErrorAs(t, <-done, &pgErr)
		require.Equal(t, "VD003", pgErr.Code)
		require.Equal(t, counts{UsageRows: 1}, readCounts(t, s, "RULES"), "nothing taken")
	})

	t.Run("combiner", func(t *testing.T) {
		t.Parallel()
		s := newStoreWith(t, pgstore.CombinerConfig{})
		h := newHolder(s)
		newVoucher(t, s, "RULES", 10, 1)
		other := lockCounter(t, s, "RULES", 10)
		release := h.holdNext("RULES")
		answers := make(chan answer, 3)
		for i, e := range []elem{el(30, "first"), el(10, "o1"), el(11, "o2")} {
			go func() { answers <- answerOf(s.Reserve(ctx, e.request("RULES"), now, ttl)) }()
			if i == 0 {
				eventually(t, "first write held", func() bool { return len(h.batchesOf("RULES")) == 1 })
			} else {
				eventually(t, "queued", func() bool { return pgstore.CombinerWaiting(s, "RULES") == i })
			}
		}
		release()
		require.Equal(t, "ok", (<-answers).short())
		waitBatchBlocked(t, s)
		raiseMinimum(t, s)
		require.NoError(t, other.Commit(ctx))
		for range 2 {
			require.Equal(t, "NOT_ELIGIBLE/ORDER_AMOUNT_TOO_LOW", (<-answers).short())
		}
		require.Equal(t, counts{UsedCount: 1, Held: 1, Rows: 1, UsageRows: 2, CustomerSum: 1}, readCounts(t, s, "RULES"))
	})
}

// Concurrent reservations of one voucher share transactions.
func TestCombinerBatchesConcurrentReservations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStoreWith(t, pgstore.CombinerConfig{})
	newVoucher(t, s, "MANY", 1000, 1)
	const n = 100
	before := s.Queries()
	results := concurrently(n, func(i int) error {
		_, err := s.Reserve(ctx, request("MANY", int64(i+1), fmt.Sprintf("o-%d", i)), now, ttl)
		return err
	})
	statements := s.Queries() - before
	for _, err := range results {
		require.NoError(t, err)
	}
	t.Logf("%d reservations in %d statements", n, statements)
	require.Less(t, statements, int64(n), "some reservations were written together")
	require.Equal(t, int32(n), readCounts(t, s, "MANY").UsedCount)
}

// A caller that leaves while its reservation is queued gets UNAVAILABLE and
// the reservation is never written; one that leaves after it was sent gets
// what happened to it.
func TestCombinerCallerLeaves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStoreWith(t, pgstore.CombinerConfig{})
	h := newHolder(s)
	newVoucher(t, s, "LEAVE", 10, 1)

	reserveAsync := func(ctx context.Context, e elem) <-chan answer {
		ch := make(chan answer, 1)
		go func() { ch <- answerOf(s.Reserve(ctx, e.request("LEAVE"), now, ttl)) }()
		return ch
	}

	// Queued, then cancelled: answered at once, never written.
	release := h.holdNext("LEAVE")
	first := reserveAsync(ctx, el(1, "first"))
	eventually(t, "first write held", func() bool { return len(h.batchesOf("LEAVE")) == 1 })
	qctx, qcancel := context.WithCancel(ctx)
	queued := reserveAsync(qctx, el(2, "queued"))
	eventually(t, "queued", func() bool { return pgstore.CombinerWaiting(s, "LEAVE") == 1 })
	qcancel()
	require.Equal(t, voucher.CodeUnavailable, (<-queued).Code)
	release()
	require.Equal(t, "ok", (<-first).short())
	_, err := s.Redemption(ctx, "LEAVE", "queued")
	requireCode(t, err, voucher.CodeReservationNotFound)

	// Sent with another reservation, then cancelled while the write waits
	// in the database: the write goes on for the other one, and the caller
	// gets its success.
	other := lockCounter(t, s, "LEAVE", 5)
	release = h.holdNext("LEAVE")
	lead := reserveAsync(ctx, el(3, "lead"))
	eventually(t, "lead write held", func() bool { return len(h.batchesOf("LEAVE")) == 2 })
	sctx, scancel := context.WithCancel(ctx)
	sent := reserveAsync(sctx, el(4, "sent"))
	eventually(t, "sent queued", func() bool { return pgstore.CombinerWaiting(s, "LEAVE") == 1 })
	mate := reserveAsync(ctx, el(5, "mate"))
	eventually(t, "mate queued", func() bool { return pgstore.CombinerWaiting(s, "LEAVE") == 2 })
	release()
	require.Equal(t, "ok", (<-lead).short())
	waitBatchBlocked(t, s)
	require.Equal(t, []string{"sent", "mate"}, h.batchesOf("LEAVE")[2])
	scancel()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, other.Commit(ctx))
	require.Equal(t, "ok", (<-sent).short(), "the write it was part of succeeded")
	require.Equal(t, "ok", (<-mate).short())

	// Taken into a batch but cancelled before the batch is sent: not sent,
	// and answered UNAVAILABLE.
	release = h.holdNext("LEAVE")
	actx, acancel := context.WithCancel(ctx)
	alone := reserveAsync(actx, el(6, "alone"))
	eventually(t, "alone write held", func() bool { return len(h.batchesOf("LEAVE")) == 4 })
	acancel()
	release()
	require.Equal(t, voucher.CodeUnavailable, (<-alone).Code)
	_, err = s.Redemption(ctx, "LEAVE", "alone")
	requireCode(t, err, voucher.CodeReservationNotFound)

	require.Equal(t, int32(4), readCounts(t, s, "LEAVE").UsedCount)
}

// A batch whose connection is lost fails every reservation in it with
// UNAVAILABLE, and nothing is taken.
func TestCombinerBatchFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStoreWith(t, pgstore.CombinerConfig{})
	h := newHolder(s)
	newVoucher(t, s, "LOST", 10, 1)
	other := lockCounter(t, s, "LOST", 2)

	release := h.holdNext("LOST")
	first := make(chan answer, 1)
	go func() { first <- answerOf(s.Reserve(ctx, el(1, "first").request("LOST"), now, ttl)) }()
	eventually(t, "first write held", func() bool { return len(h.batchesOf("LOST")) == 1 })
	batch := make(chan answer, 3)
	for i, e := range []elem{el(2, "a"), el(3, "b"), el(4, "c")} {
		go func() { batch <- answerOf(s.Reserve(ctx, e.request("LOST"), now, ttl)) }()
		eventually(t, "queued", func() bool { return pgstore.CombinerWaiting(s, "LOST") == i+1 })
	}
	release()
	require.Equal(t, "ok", (<-first).short())
	waitBatchBlocked(t, s)
	// Kill the batch's backend, as a lost connection would.
	_, err := other.Exec(ctx, `
		SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE '%voucherd_reserve_batch(%' AND pid <> pg_backend_pid()`)
	require.NoError(t, err)
	for range 3 {
		require.Equal(t, voucher.CodeUnavailable, (<-batch).Code)
	}
	require.NoError(t, other.Rollback(ctx))
	require.Equal(t, counts{UsedCount: 1, Held: 1, Rows: 1, UsageRows: 2, CustomerSum: 1}, readCounts(t, s, "LOST"))
}

// Two instances, each with its own combiner, on one database: reservations
// with repeated customers and orderIds, releases, limit raises and Kafka
// batches on another voucher sharing the orderIds, all at once. No deadlock
// (it would surface as UNAVAILABLE), no error outside the contract, and the
// counters agree with the rows at the end.
func TestReserveBatchInstancesStress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.Postgres(t)
	var stores []*pgstore.Store
	for range 2 {
		s, err := pgstore.Open(ctx, pgstore.Config{URL: pg.URL, MaxConns: 6})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		require.NoError(t, s.Migrate(ctx))
		stores = append(stores, s)
	}
	t.Cleanup(func() { checkAllConsistent(t, stores[0]) })
	newVoucher(t, stores[0], "HOT", 60, 2)
	newVoucher(t, stores[0], "KAFKA", 1000, 3)

	const workers, ops = 24, 40
	errs := concurrently(workers, func(w int) error {
		s := stores[w%2]
		rng := rand.New(rand.NewPCG(uint64(w), 99))
		for i := 0; i < ops; i++ {
			order := fmt.Sprintf("o-%d", rng.IntN(300))
			customer := 1 + rng.Int64N(40)
			var err error
			switch op := rng.IntN(20); {
			case op < 14:
				_, err = s.Reserve(ctx, request("HOT", customer, order), now, ttl)
			case op < 17:
				_, _, err = s.Release(ctx, "HOT", order, now)
			case op < 18:
				limit := int32(60 + rng.IntN(40))
				_, _, err = s.PatchVoucher(ctx, "HOT", voucher.Patch{TotalLimit: &limit})
			default:
				var events []voucher.ReservedEvent
				for range 1 + rng.IntN(6) {
					events = append(events, event("KAFKA", 1+rng.Int64N(40), fmt.Sprintf("o-%d", rng.IntN(300))))
				}
				_, err = s.ApplyReserved(ctx, events)
			}
			switch voucher.CodeOf(err) {
			case "", voucher.CodeOutOfStock, voucher.CodeHeldOut, voucher.CodeAlreadyUsed, voucher.CodeOrderConflict,
				voucher.CodeOrderReleased, voucher.CodeReservationNotFound, voucher.CodeLimitBelowHeld:
			default:
				return fmt.Errorf("worker %d op %d: %w", w, i, err)
			}
		}
		return nil
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	assertConsistent(t, stores[0], "HOT")
	assertConsistent(t, stores[0], "KAFKA")
	t.Logf("HOT: %+v; statements run again: %d", readCounts(t, stores[0], "HOT"),
		stores[0].StatementReruns()+stores[1].StatementReruns())
}
