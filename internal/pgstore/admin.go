package pgstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/voucherd/voucherd/internal/voucher"
)

var _ voucher.AdminStore = (*Store)(nil)

var (
	qAuditInsert = mustQuery("audit_insert")
	qAuditPage   = mustQuery("audit_page")
)

// cursor is the position after the last row of a page: the listing it
// belongs to, the time column of the listing's order (if any) and the key
// that breaks ties (code, order_id or audit id). On the wire it is base64url
// JSON, opaque to clients.
type cursor struct {
	Listing string     `json:"l"`
	Time    *time.Time `json:"t,omitempty"`
	Key     string     `json:"k"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads s, which must be a cursor of listing; nil for "".
func decodeCursor(s, listing string) (*cursor, error) {
	if s == "" {
		return nil, nil
	}
	bad := voucher.Errorf(voucher.CodeInvalidRequest, "after is not a cursor of this listing")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil || c.Listing != listing || c.Key == "" {
		return nil, bad
	}
	return &c, nil
}

// voucherListing is how one state of the voucher listing is read: its
// condition at {now}, its order, the index that serves both, and the
// time column its cursor carries ("" when ordered by code alone).
type voucherListing struct {
	where   string
	timeCol string
	desc    bool
}

// voucherListings: the order of each state follows an index, so a page is
// one index range scan that stops after limit+1 matches. flashSale and
// codePrefix narrow that scan (the flash_sale index and the code range serve
// them when no state is asked for).
var voucherListings = map[voucher.VoucherState]voucherListing{
	// voucher_code_c_idx, or voucher_flash_code_idx with flashSale.
	"": {where: "true"},
	// voucher_disabled_code_idx.
	voucher.StateDisabled: {where: "v.disabled"},
	// voucher_starts_idx: the next to start first.
	voucher.StateScheduled: {where: "NOT v.disabled AND v.starts_at > {now}", timeCol: "v.starts_at"},
	// voucher_ends_idx: the first to end first.
	voucher.StateActive: {where: "NOT v.disabled AND v.ends_at > {now} AND v.starts_at <= {now}", timeCol: "v.ends_at"},
	// voucher_ends_idx backwards: the last to have ended first.
	voucher.StateEnded: {where: "NOT v.disabled AND v.ends_at <= {now}", timeCol: "v.ends_at", desc: true},
}

// voucherColumns are voucher_get's columns for a page. The counts cost one
// index range per voucher, not two: used_count is the number of RESERVED and
// CONFIRMED rows (every writer changes both in one transaction), so the
// RESERVED count is used_count less the CONFIRMED one.
const voucherColumns = `v.code, coalesce(v.discount_amount, 0), v.min_order_amount, v.total_limit, v.per_user_limit, v.starts_at, v.ends_at,
       v.flash_sale, v.used_count, v.created_at, v.updated_at, v.disabled,
       coalesce(v.discount_percent_bp, 0), coalesce(v.max_discount_amount, 0), v.customer_id_normalization, coalesce(v.currency, ''), coalesce(v.bound_customer, ''),
       v.used_count - c.confirmed, c.confirmed`

// voucherFrom joins each listed voucher with its CONFIRMED count.
const voucherFrom = `voucher v CROSS JOIN LATERAL (
    SELECT count(*)::integer AS confirmed FROM voucher_redemption r WHERE r.voucher_code = v.code AND r.status = 'CONFIRMED'
) c`

// codeUpper is above every character a code may hold, in byte order: a code
// starts with p exactly when p <= code < p + codeUpper.
const codeUpper = "~"

// ListVouchers implements voucher.AdminStore. The statement is put together
// from the fixed fragments above (no client text in it), one text per
// combination of filters, so each gets its own prepared plan.
func (s *Store) ListVouchers(ctx context.Context, f voucher.VoucherFilter, now time.Time) (voucher.VoucherPage, error) {
	q, args, err := voucherPageQuery(f, now)
	if err != nil {
		return voucher.VoucherPage{}, err
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return voucher.VoucherPage{}, interpretError(err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.Voucher, error) {
		var v voucher.Voucher
		return v, scanVoucherCounts(row, &v)
	})
	if err != nil {
		return voucher.VoucherPage{}, interpretError(err)
	}
	page := voucher.VoucherPage{Vouchers: list}
	if len(list) > f.Limit {
		page.Vouchers = list[:f.Limit]
		last := page.Vouchers[f.Limit-1]
		c := cursor{Listing: "v:" + string(f.State), Key: last.Code}
		switch voucherListings[f.State].timeCol {
		case "v.starts_at":
			c.Time = &last.StartsAt
		case "v.ends_at":
			c.Time = &last.EndsAt
		}
		page.Next = c.encode()
	}
	return page, nil
}

// voucherPageQuery returns the statement of one page of f (limit+1 rows) and
// its arguments.
func voucherPageQuery(f voucher.VoucherFilter, now time.Time) (string, []any, error) {
	l, ok := voucherListings[f.State]
	if !ok {
		return "", nil, voucher.Errorf(voucher.CodeInvalidRequest, "unknown state %q", f.State)
	}
	after, err := decodeCursor(f.After, "v:"+string(f.State))
	if err != nil {
		return "", nil, err
	}
	if after != nil && (l.timeCol != "") != (after.Time != nil) {
		return "", nil, voucher.Errorf(voucher.CodeInvalidRequest, "after is not a cursor of this listing")
	}
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	where := []string{l.where}
	if strings.Contains(l.where, "{now}") {
		where[0] = strings.ReplaceAll(l.where, "{now}", arg(now)+"::timestamptz")
	}
	if f.FlashSale != nil {
		where = append(where, "v.flash_sale = "+arg(*f.FlashSale))
	}
	if f.CodePrefix != "" {
		where = append(where, `v.code COLLATE "C" >= `+arg(f.CodePrefix)+`::text COLLATE "C"`,
			`v.code COLLATE "C" < `+arg(f.CodePrefix+codeUpper)+`::text COLLATE "C"`)
	}
	cmp, dir := ">", ""
	if l.desc {
		cmp, dir = "<", " DESC"
	}
	order := `v.code COLLATE "C"` + dir
	if l.timeCol != "" {
		order = l.timeCol + dir + ", " + order
	}
	if after != nil {
		if l.timeCol != "" {
			where = append(where, "("+l.timeCol+`, v.code COLLATE "C") `+cmp+" ("+arg(*after.Time)+
				"::timestamptz, "+arg(after.Key)+`::text COLLATE "C")`)
		} else {
			where = append(where, `v.code COLLATE "C" `+cmp+" "+arg(after.Key)+`::text COLLATE "C"`)
		}
	}
	q := "SELECT " + voucherColumns + "\nFROM " + voucherFrom + "\nWHERE " + strings.Join(where, " AND ") +
		"\nORDER BY " + order + "\nLIMIT " + arg(f.Limit+1)
	return q, args, nil
}

const redemptionColumns = `r.order_id, coalesce(r.code, r.voucher_code), r.customer, r.order_amount, r.discount_amount, r.status,
       r.created_at, r.updated_at, r.expires_at`

// ListRedemptions implements voucher.AdminStore. A voucher's page is read
// through voucher_redemption_code_created_idx, or
// voucher_redemption_code_status_created_idx with a status; a voucher's
// reservations of one customer through
// voucher_redemption_code_customer_created_idx (a status then filters that
// customer's rows of the voucher); a customer's redemptions across vouchers
// through voucher_redemption_customer_created_idx.
func (s *Store) ListRedemptions(ctx context.Context, f voucher.RedemptionFilter) (voucher.RedemptionPage, error) {
	q, args, err := redemptionPageQuery(f)
	if err != nil {
		return voucher.RedemptionPage{}, err
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return voucher.RedemptionPage{}, interpretError(err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.Redemption, error) {
		var r voucher.Redemption
		return r, scanRedemption(row, &r)
	})
	if err != nil {
		return voucher.RedemptionPage{}, interpretError(err)
	}
	page := voucher.RedemptionPage{Redemptions: list}
	if len(list) > f.Limit {
		page.Redemptions = list[:f.Limit]
		last := page.Redemptions[f.Limit-1]
		page.Next = cursor{Listing: "r:" + f.Code, Time: &last.CreatedAt, Key: last.OrderID}.encode()
	}
	return page, nil
}

// redemptionPageQuery returns the statement of one page of f (limit+1
// rows) and its arguments.
func redemptionPageQuery(f voucher.RedemptionFilter) (string, []any, error) {
	after, err := decodeCursor(f.After, "r:"+f.Code)
	if err != nil {
		return "", nil, err
	}
	if after != nil && after.Time == nil {
		return "", nil, voucher.Errorf(voucher.CodeInvalidRequest, "after is not a cursor of this listing")
	}
	if f.Code == "" && f.CustomerID == "" {
		return "", nil, voucher.Errorf(voucher.CodeInvalidRequest, "a voucher or a customer is required")
	}
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	var where []string
	if f.CustomerID != "" {
		where = append(where, "r.customer = "+arg(f.CustomerID))
	}
	if f.Code != "" {
		where = append(where, "r.voucher_code = "+arg(f.Code))
	}
	if f.Status != "" {
		where = append(where, "r.status = "+arg(string(f.Status)))
	}
	if after != nil {
		where = append(where, "(r.created_at, r.order_id) > ("+arg(*after.Time)+"::timestamptz, "+arg(after.Key)+"::text)")
	}
	q := "SELECT " + redemptionColumns + "\nFROM voucher_redemption r\nWHERE " + strings.Join(where, " AND ") +
		"\nORDER BY r.created_at, r.order_id\nLIMIT " + arg(f.Limit+1)
	return q, args, nil
}

// Audit implements voucher.AdminStore.
func (s *Store) Audit(ctx context.Context, code string, p voucher.PageRequest) (voucher.AuditPage, error) {
	name := "a:" + code
	after, err := decodeCursor(p.After, name)
	if err != nil {
		return voucher.AuditPage{}, err
	}
	var afterID int64
	if after != nil {
		if afterID, err = strconv.ParseInt(after.Key, 10, 64); err != nil {
			return voucher.AuditPage{}, voucher.Errorf(voucher.CodeInvalidRequest, "after is not a cursor of this listing")
		}
	}
	rows, err := s.pool.Query(ctx, qAuditPage, code, afterID, p.Limit+1)
	if err != nil {
		return voucher.AuditPage{}, interpretError(err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.AuditEntry, error) {
		var e voucher.AuditEntry
		var action string
		var before, after []byte
		if err := row.Scan(&e.ID, &e.Code, &action, &e.KeyName, &e.At, &before, &after); err != nil {
			return e, err
		}
		e.Action, e.At, e.Before, e.After = voucher.AuditAction(action), e.At.UTC(), before, after
		return e, nil
	})
	if err != nil {
		return voucher.AuditPage{}, interpretError(err)
	}
	page := voucher.AuditPage{Entries: list}
	if len(list) > p.Limit {
		page.Entries = list[:p.Limit]
		page.Next = cursor{Listing: name, Key: strconv.FormatInt(page.Entries[p.Limit-1].ID, 10)}.encode()
	}
	return page, nil
}

// RecordAudit implements voucher.AdminStore.
func (s *Store) RecordAudit(ctx context.Context, e voucher.AuditEntry) error {
	return interpretError(recordAudit(ctx, s.pool, e.Code, e.Action, e.KeyName, e.Before, e.After))
}

// querier is a pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// recordAudit appends one audit entry through q (the transaction of the
// change it records). A nil before or after is stored as NULL.
func recordAudit(ctx context.Context, q querier, code string, action voucher.AuditAction, key string, before, after json.RawMessage) error {
	nullable := func(b json.RawMessage) any {
		if b == nil {
			return nil
		}
		return string(b)
	}
	if _, err := q.Exec(ctx, qAuditInsert, code, string(action), key, nullable(before), nullable(after)); err != nil {
		return fmt.Errorf("audit %s of %s: %w", action, code, err)
	}
	return nil
}

var qAuditDefinitions = mustQuery("audit_definitions")

var _ voucher.DefinitionHistory = (*Store)(nil)

// DefinitionChanges implements voucher.DefinitionHistory from the audit
// trail, which records every change of a definition in the change's own
// transaction.
func (s *Store) DefinitionChanges(ctx context.Context, code string, since time.Time) ([]voucher.DefinitionChange, error) {
	rows, err := s.pool.Query(ctx, qAuditDefinitions, code, since)
	if err != nil {
		return nil, interpretError(err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.DefinitionChange, error) {
		var ch voucher.DefinitionChange
		var before, after []byte
		if err := row.Scan(&ch.At, &before, &after); err != nil {
			return ch, err
		}
		var err error
		if before != nil {
			if ch.Before, err = voucher.DefinitionFromAudit(before); err != nil {
				return ch, err
			}
			ch.HasBefore = true
		}
		ch.After, err = voucher.DefinitionFromAudit(after)
		return ch, err
	})
	if err != nil {
		return nil, interpretError(err)
	}
	return list, nil
}
