package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"

	"github.com/voucherd/voucherd/internal/pgstore"
	"github.com/voucherd/voucherd/internal/redisgate"
	"github.com/voucherd/voucherd/internal/voucher"
)

// verifyPoll is the pause between two looks while waiting for the state to
// add up (the Kafka consumer catching up).
const verifyPoll = 250 * time.Millisecond

// maxDetails bounds the examples listed per kind of violation, so a broken
// server produces a readable report rather than a million lines.
const maxDetails = 5

// Verification is what Verify found.
type Verification struct {
	Vouchers []VoucherCheck `json:"vouchers"`
	// Violations lists every broken invariant; empty means all held.
	Violations []string `json:"violations"`
	// WaitedSeconds is how long Verify waited for the state to add up.
	WaitedSeconds float64 `json:"waitedSeconds"`
}

// VoucherCheck is the state of one bench voucher as Verify last saw it.
type VoucherCheck struct {
	Code         string `json:"code"`
	TotalLimit   int64  `json:"totalLimit"`
	PerUserLimit int64  `json:"perUserLimit"`
	// UsedCount is the voucher row's used_count column.
	UsedCount int64 `json:"usedCount"`
	// Granted is the number of distinct orderIds answered 201.
	Granted int64 `json:"granted"`
	// HeldRows counts RESERVED and CONFIRMED redemption rows.
	HeldRows int64 `json:"heldRows"`
	// Released counts RELEASED rows (expired reservations).
	Released int64 `json:"released"`
	// RowsWritten counts every redemption row of the voucher: the database
	// writes the run caused.
	RowsWritten int64 `json:"rowsWritten"`
	// Unknown counts orders sent without a definite answer (timeouts, broken
	// connections, 5xx other than 503); the server may hold them.
	Unknown int64 `json:"unknown"`
	// RedisRemaining is the gate's remaining count, when checked.
	RedisRemaining *int64 `json:"redisRemaining,omitempty"`
	// RedisCodes is, for a flash campaign, the number of codes the gate
	// holds in use, when checked.
	RedisCodes *int64 `json:"redisCodes,omitempty"`
}

// Verify checks the invariants (docs/rules.md) for the vouchers of a reserve run,
// reading PostgreSQL directly (and Redis for flash vouchers when
// cfg.RedisAddrs is set):
//
//   - distinct orderIds answered 201 <= totalLimit, and held rows <= totalLimit;
//   - every orderId answered 201 has a row for the same voucher and customer,
//     and every held row is an orderId answered 201 (or one whose answer was
//     lost), so held rows == distinct 201 orderIds;
//   - used_count == held rows;
//   - per customer, held rows <= perUserLimit and voucher_customer_usage.held
//     == held rows;
//   - Redis remaining == totalLimit - held rows;
//   - for a flash campaign, the codes Redis holds in use == held rows (each
//     held row holds its own code).
//
// While something does not add up it polls again until cfg.Wait has passed,
// since in Kafka mode the database catches up after the answers. The error is
// for failing to check at all; violations are in the result.
func Verify(ctx context.Context, cfg VerifyConfig, rep *Report) (*Verification, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("bench: verify: no database URL")
	}
	if rep == nil || rep.Target != RouteReserve {
		return nil, errors.New("bench: verify: only reserve runs can be verified")
	}
	if len(rep.granted) != len(rep.Vouchers) {
		return nil, errors.New("bench: verify: the report does not come from Run")
	}
	if cfg.Wait == 0 {
		cfg.Wait = DefaultVerifyWait
	}
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("bench: verify: connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var rdb rueidis.Client
	if len(cfg.RedisAddrs) > 0 && rep.FlashSale {
		rdb, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: cfg.RedisAddrs, DisableCache: true, ClientName: RedisClientName})
		if err != nil {
			return nil, fmt.Errorf("bench: verify: connect to Redis: %w", err)
		}
		defer rdb.Close()
	}

	start := time.Now()
	deadline := start.Add(max(cfg.Wait, 0))
	for {
		v, err := verifyOnce(ctx, conn, rdb, cfg.KeyPrefix, rep)
		if err != nil {
			return nil, err
		}
		v.WaitedSeconds = time.Since(start).Seconds()
		if len(v.Violations) == 0 || !time.Now().Add(verifyPoll).Before(deadline) {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(verifyPoll):
		}
	}
}

// violations collects messages, listing at most maxDetails examples of each
// kind.
type violations struct {
	list   []string
	counts map[string]int
}

func (vs *violations) add(kind, format string, args ...any) {
	if vs.counts == nil {
		vs.counts = map[string]int{}
	}
	vs.counts[kind]++
	if vs.counts[kind] <= maxDetails {
		vs.list = append(vs.list, fmt.Sprintf(format, args...))
	}
}

func (vs *violations) result() []string {
	out := vs.list
	for _, kind := range slices.Sorted(maps.Keys(vs.counts)) {
		if n := vs.counts[kind]; n > maxDetails {
			out = append(out, fmt.Sprintf("... and %d more of: %s", n-maxDetails, kind))
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

type row struct {
	customer string
	status   string
}

func verifyOnce(ctx context.Context, conn *pgx.Conn, rdb rueidis.Client, keyPrefix string, rep *Report) (*Verification, error) {
	v := &Verification{}
	var vs violations
	allRows := make([]map[string]row, len(rep.Vouchers))
	for i, code := range rep.Vouchers {
		c := VoucherCheck{Code: code, Granted: int64(len(rep.granted[i])), Unknown: int64(len(rep.unknown[i]))}
		err := conn.QueryRow(ctx, `SELECT total_limit, per_user_limit, used_count FROM voucher WHERE code = $1`, code).
			Scan(&c.TotalLimit, &c.PerUserLimit, &c.UsedCount)
		if errors.Is(err, pgx.ErrNoRows) {
			vs.add("missing voucher", "%s: voucher row missing from the database", code)
			v.Vouchers = append(v.Vouchers, c)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("bench: verify %s: read voucher: %w", code, err)
		}

		rows := map[string]row{}
		pgRows, err := conn.Query(ctx, `SELECT order_id, customer, status::text FROM voucher_redemption WHERE voucher_code = $1`, code)
		if err != nil {
			return nil, fmt.Errorf("bench: verify %s: read redemptions: %w", code, err)
		}
		var orderID string
		var r row
		_, err = pgx.ForEachRow(pgRows, []any{&orderID, &r.customer, &r.status}, func() error {
			rows[orderID] = r
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("bench: verify %s: read redemptions: %w", code, err)
		}

		allRows[i] = rows
		checkVoucher(&vs, &c, rep, i, rows)
		stored, err := pgstore.Violations(ctx, conn, code)
		if err != nil {
			return nil, fmt.Errorf("bench: verify %s: %w", code, err)
		}
		for _, b := range stored {
			vs.add(b.Kind, "%s", b.Message)
		}

		if rdb != nil {
			key := redisgate.RemainingKey(keyPrefix, code)
			n, err := rdb.Do(ctx, rdb.B().Get().Key(key).Build()).AsInt64()
			switch {
			case rueidis.IsRedisNil(err):
				// Not loaded (the voucher fell back to standard mode, or the
				// keys expired): nothing in Redis to be wrong.
			case err != nil:
				return nil, fmt.Errorf("bench: verify %s: read Redis %s: %w", code, key, err)
			default:
				c.RedisRemaining = &n
				if want := c.TotalLimit - c.HeldRows; n != want {
					vs.add("redis remaining", "%s: Redis remaining %d != totalLimit %d - held %d = %d",
						code, n, c.TotalLimit, c.HeldRows, want)
				}
				if rep.Campaign != "" {
					codes := redisgate.CodesKey(keyPrefix, code)
					n, err := rdb.Do(ctx, rdb.B().Hlen().Key(codes).Build()).AsInt64()
					if err != nil {
						return nil, fmt.Errorf("bench: verify %s: read Redis %s: %w", code, codes, err)
					}
					c.RedisCodes = &n
					if n != c.HeldRows {
						vs.add("redis codes", "%s: Redis holds %d codes in use, held rows %d", code, n, c.HeldRows)
					}
				}
			}
		}
		v.Vouchers = append(v.Vouchers, c)
	}
	checkStacks(&vs, rep, allRows)
	v.Violations = vs.result()
	return v, nil
}

// checkVoucher compares one voucher's rows with what the bench was answered;
// pgstore.Violations checks the stored counters.
func checkVoucher(vs *violations, c *VoucherCheck, rep *Report, i int, rows map[string]row) {
	code := c.Code
	granted, unknown := rep.granted[i], rep.unknown[i]
	if c.Granted > c.TotalLimit {
		vs.add("oversell 201", "%s: OVERSELL: %d distinct orderIds answered 201, totalLimit %d", code, c.Granted, c.TotalLimit)
	}

	var heldUnknown int64
	for id, r := range rows {
		c.RowsWritten++
		isHeld := r.status == "RESERVED" || r.status == "CONFIRMED"
		if r.status == "RELEASED" {
			c.Released++
		}
		if isHeld {
			c.HeldRows++
		}
		seq, ours := rep.rowSeq(i, id)
		o, wasGranted := granted[seq]
		_, wasUnknown := unknown[seq]
		switch {
		case !ours:
			if isHeld {
				vs.add("foreign row", "%s: held row for orderId %s that the bench never sent", code, id)
			}
		case wasGranted && rep.cfg.customerID(o.customer) != r.customer:
			vs.add("customer mismatch", "%s: orderId %s answered 201 for customer %s but its row belongs to customer %s",
				code, id, rep.cfg.customerID(o.customer), r.customer)
		case isHeld && !wasGranted && wasUnknown:
			heldUnknown++
		case isHeld && !wasGranted:
			vs.add("held not granted", "%s: orderId %s is held (%s) but was never answered 201", code, id, r.status)
		}
	}
	var grantedReleased int64
	for _, seq := range slices.Sorted(maps.Keys(granted)) {
		id := rep.rowID(i, granted[seq])
		r, ok := rows[id]
		switch {
		case !ok:
			vs.add("granted missing", "%s: orderId %s answered 201 has no row in voucher_redemption", code, id)
		case r.status == "RELEASED":
			// Expired since: fine, the use went back.
			grantedReleased++
		}
	}
	if want := c.Granted - grantedReleased; c.HeldRows-heldUnknown != want {
		vs.add("held != 201", "%s: held rows %d (of which %d for orders whose answer was lost) != orderIds answered 201 and not released %d",
			code, c.HeldRows, heldUnknown, want)
	}
}

// seqOf parses an orderId of this run back to its sequence number.
func (r *Report) seqOf(orderID string) (int64, bool) {
	rest, ok := strings.CutPrefix(orderID, r.prefix+"-")
	if !ok {
		return 0, false
	}
	seq, err := strconv.ParseInt(rest, 10, 64)
	return seq, err == nil
}

func (r *Report) orderID(seq int64) string { return r.prefix + "-" + strconv.FormatInt(seq, 10) }

// rowID is the orderId of o's redemption row of voucher i: the order's
// own, or in a run of stacks its member's (voucher.StackMemberOrderID).
func (r *Report) rowID(i int, o order) string {
	if r.cfg.Stack <= 1 {
		return r.orderID(o.seq)
	}
	n := len(r.Vouchers)
	return voucher.StackMemberOrderID(r.orderID(o.seq), (i-int(o.voucher)+n)%n+1)
}

// rowSeq is the sequence number of the order a redemption row of voucher
// i belongs to: parsed from the orderId, or in a run of stacks looked up
// among the members of the orders answered 201 or left unknown (a row of
// any other order is not the run's).
func (r *Report) rowSeq(i int, id string) (int64, bool) {
	if r.cfg.Stack <= 1 {
		return r.seqOf(id)
	}
	if r.members == nil {
		r.members = make([]map[string]int64, len(r.Vouchers))
	}
	if r.members[i] == nil {
		r.members[i] = map[string]int64{}
		for _, m := range []map[int64]order{r.granted[i], r.unknown[i]} {
			for seq, o := range m {
				r.members[i][r.rowID(i, o)] = seq
			}
		}
	}
	seq, ok := r.members[i][id]
	return seq, ok
}

// checkStacks checks all or none per order of several codes: of each
// order answered 201 or left unknown, every member row holds a use or
// none does (a 201 that expired since has every member RELEASED).
func checkStacks(vs *violations, rep *Report, rows []map[string]row) {
	if rep.cfg.Stack <= 1 {
		return
	}
	n := len(rep.Vouchers)
	seen := map[int64]bool{}
	for v := range n {
		for _, m := range []map[int64]order{rep.granted[v], rep.unknown[v]} {
			for seq, o := range m {
				if seen[seq] {
					continue
				}
				seen[seq] = true
				held := 0
				for k := range rep.cfg.Stack {
					i := stackVoucher(int(o.voucher), k, n)
					if r, ok := rows[i][rep.rowID(i, o)]; ok && (r.status == "RESERVED" || r.status == "CONFIRMED") {
						held++
					}
				}
				if held != 0 && held != rep.cfg.Stack {
					vs.add("stack partial", "order %s: %d of its %d codes held (all or none)", rep.orderID(seq), held, rep.cfg.Stack)
				}
			}
		}
	}
}
