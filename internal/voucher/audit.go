package voucher

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// AuditAction names a change recorded in the audit trail.
type AuditAction string

// Audited changes.
const (
	AuditCreate     AuditAction = "create"
	AuditPatch      AuditAction = "patch"
	AuditActivate   AuditAction = "activate"
	AuditDeactivate AuditAction = "deactivate"
	AuditReconcile  AuditAction = "reconcile"
	// AuditAddCodes records codes added to a campaign (After: {"count"}),
	// under the campaign's id.
	AuditAddCodes AuditAction = "add_codes"
	// AuditExportCodes records a read of a campaign's codes (After:
	// {"format", and for a page "limit" and "after"}): codes are bearer
	// secrets. The read is refused when it cannot be recorded.
	AuditExportCodes AuditAction = "export_codes"
)

// SystemActor is the actor of changes no API key asked for (background
// reconciliation).
const SystemActor = "system"

// AuditEntry is one recorded change of a voucher. Before and After are the
// voucher's settings as JSON (AuditFields), Before null for a create; a
// reconciliation records its report as After.
type AuditEntry struct {
	ID      int64
	Code    string
	Action  AuditAction
	KeyName string
	At      time.Time
	Before  json.RawMessage
	After   json.RawMessage
}

// AuditPage is one page of a voucher's audit trail; an empty Next means the
// last page.
type AuditPage struct {
	Entries []AuditEntry
	Next    string
}

type actorKey struct{}

// WithActor returns ctx carrying the name of the API key a change is made
// with; the store records it in the audit trail.
func WithActor(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, actorKey{}, name)
}

// ActorOf returns the key name carried by ctx, or SystemActor.
func ActorOf(ctx context.Context) string {
	if name, ok := ctx.Value(actorKey{}).(string); ok && name != "" {
		return name
	}
	return SystemActor
}

// auditFields are the settings of a voucher the audit trail records: what a
// create or patch can set, not the counters.
type auditFields struct {
	Code           string `json:"code"`
	DiscountAmount int64  `json:"discountAmount,omitempty"`
	// DiscountPercent is the API's decimal, e.g. 12.5.
	DiscountPercent   json.Number `json:"discountPercent,omitempty"`
	MaxDiscountAmount int64       `json:"maxDiscountAmount,omitempty"`
	MinOrderAmount    int64       `json:"minOrderAmount"`
	TotalLimit        int32       `json:"totalLimit"`
	PerUserLimit      int32       `json:"perUserLimit"`
	StartsAt          time.Time   `json:"startsAt"`
	EndsAt            time.Time   `json:"endsAt"`
	FlashSale         bool        `json:"flashSale"`
	Active            bool        `json:"active"`
	// CustomerIDNormalization is recorded when the voucher normalises
	// customerIds (left out for none).
	CustomerIDNormalization CustomerIDNormalization `json:"customerIdNormalization,omitempty"`
	// Currency and CustomerID are recorded when set.
	Currency   string `json:"currency,omitempty"`
	CustomerID string `json:"customerId,omitempty"`
}

// AuditFields returns the settings of v as the audit trail records them.
func AuditFields(v Voucher) json.RawMessage {
	f := auditFields{
		Code: v.Code, DiscountAmount: v.DiscountAmount, MaxDiscountAmount: v.MaxDiscountAmount,
		MinOrderAmount: v.MinOrderAmount,
		TotalLimit:     v.TotalLimit, PerUserLimit: v.PerUserLimit, StartsAt: v.StartsAt.UTC(),
		EndsAt: v.EndsAt.UTC(), FlashSale: v.FlashSale, Active: !v.Disabled,
		DiscountPercent: percentNumber(v.DiscountPercentBP), Currency: v.Currency, CustomerID: v.CustomerID,
	}
	if v.CustomerIDNormalization != "" && v.CustomerIDNormalization != NormalizeNone {
		f.CustomerIDNormalization = v.CustomerIDNormalization
	}
	b, _ := json.Marshal(f)
	return b
}

// PatchAction is the audit action of p: activate or deactivate when p only
// sets Active, patch otherwise.
func PatchAction(p Patch) AuditAction {
	only := p
	only.Active = nil
	if p.Active != nil && only.Empty() {
		if *p.Active {
			return AuditActivate
		}
		return AuditDeactivate
	}
	return AuditPatch
}

// Audit returns one page of a voucher's audit trail; CodeVoucherNotFound for
// an unknown voucher.
func (s *Service) Audit(ctx context.Context, code string, p PageRequest) (AuditPage, error) {
	var err error
	if p.Limit, err = checkLimit(p.Limit); err != nil {
		return AuditPage{}, err
	}
	if _, err := s.store.VoucherDefinition(ctx, code); err != nil {
		return AuditPage{}, err
	}
	return s.store.Audit(ctx, code, p)
}

// auditReconcile records the repairs of a reconciliation; a failure to
// record is logged, the repairs stand.
func (s *Service) auditReconcile(ctx context.Context, rep ReconcileReport) {
	after, _ := json.Marshal(rep)
	err := s.store.RecordAudit(ctx, AuditEntry{Code: rep.Code, Action: AuditReconcile, KeyName: ActorOf(ctx),
		At: s.now().UTC(), After: after})
	if err != nil {
		s.log.ErrorContext(ctx, "reconciliation repairs not recorded in the audit trail", "code", rep.Code, "err", err)
	}
}

// percentNumber is bp as a JSON number, "" (omitted) for none.
func percentNumber(bp int32) json.Number {
	if bp == 0 {
		return ""
	}
	return json.Number(FormatPercentBP(bp))
}

// DefinitionFromAudit reads back the settings AuditFields recorded: the
// voucher's definition at that change, without its counters.
func DefinitionFromAudit(b json.RawMessage) (Voucher, error) {
	var f auditFields
	if err := json.Unmarshal(b, &f); err != nil {
		return Voucher{}, fmt.Errorf("voucher: audit fields: %w", err)
	}
	bp, err := parsePercentBP(string(f.DiscountPercent))
	if err != nil {
		return Voucher{}, err
	}
	return Voucher{
		Code: f.Code, DiscountAmount: f.DiscountAmount, DiscountPercentBP: bp, MaxDiscountAmount: f.MaxDiscountAmount,
		MinOrderAmount: f.MinOrderAmount, TotalLimit: f.TotalLimit, PerUserLimit: f.PerUserLimit,
		StartsAt: f.StartsAt, EndsAt: f.EndsAt, FlashSale: f.FlashSale, Disabled: !f.Active,
		CustomerIDNormalization: f.CustomerIDNormalization,
	}, nil
}

// parsePercentBP reads a percentage as FormatPercentBP writes it ("" is 0).
func parsePercentBP(s string) (int32, error) {
	if s == "" {
		return 0, nil
	}
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 2 {
		return 0, fmt.Errorf("voucher: discountPercent %q has more than two decimals", s)
	}
	frac += strings.Repeat("0", 2-len(frac))
	w, err1 := strconv.ParseInt(whole, 10, 32)
	f, err2 := strconv.ParseInt(frac, 10, 32)
	if err1 != nil || err2 != nil || w < 0 || w > 100 || f < 0 {
		return 0, fmt.Errorf("voucher: discountPercent %q is not a percentage", s)
	}
	return int32(w*100 + f), nil //nolint:gosec // G115: at most 10099
}
