package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/voucherd/voucherd/internal/voucher"
)

var _ voucher.CampaignStore = (*Store)(nil)

var (
	qCampaignBudgetInsert = mustQuery("campaign_budget_insert")
	qCampaignInsert       = mustQuery("campaign_insert")
	qCampaignGet          = mustQuery("campaign_get")
	qCampaignLock         = mustQuery("campaign_lock")
	qCampaignCodesAdd     = mustQuery("campaign_codes_add")
	qCampaignCodesPage    = mustQuery("campaign_codes_page")
	qCampaignOfCode       = mustQuery("campaign_of_code")
)

// codeBatch is how many codes are generated, copied and inserted at a time.
const codeBatch = 10_000

// eachCodePage is the page size of EachCampaignCode's reads.
const eachCodePage = 5_000

func campaignNotFound(id string) error {
	return voucher.Errorf(voucher.CodeCampaignNotFound, "campaign %s not found", id)
}

// CreateCampaign implements voucher.CampaignStore: the budget voucher, its
// audit entry, the campaign row and n codes, in one transaction.
func (s *Store) CreateCampaign(ctx context.Context, c voucher.Campaign, n int, gen voucher.CodeGenerator) (voucher.Campaign, error) {
	b := c.Budget
	if err := b.Validate(); err != nil {
		return voucher.Campaign{}, err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var out voucher.Voucher
		if err := scanVoucherCounts(tx.QueryRow(ctx, qCampaignBudgetInsert, c.ID, b.DiscountAmount, b.MinOrderAmount,
			b.TotalLimit, b.PerUserLimit, b.StartsAt, b.EndsAt, b.DiscountPercentBP, b.MaxDiscountAmount, b.FlashSale, b.Currency), &out); err != nil {
			return err
		}
		if err := insertBudget(ctx, tx, out.Code, b.Budget); err != nil {
			return err
		}
		wb := b
		wb.Code = out.Code
		if err := insertWindows(ctx, tx, wb); err != nil {
			return err
		}
		if err := recordAudit(ctx, tx, out.Code, voucher.AuditCreate, voucher.ActorOf(ctx), nil, voucher.AuditFields(out)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, qCampaignInsert, c.ID, c.Name, c.CodePrefix, c.CodeLength); err != nil {
			return err
		}
		return addCodes(ctx, tx, c.ID, n, gen)
	})
	if err != nil {
		if code, pgErr := pgCode(err); code == sqlstateUniqueViolation && pgErr.ConstraintName == "voucher_pkey" {
			return voucher.Campaign{}, voucher.Errorf(voucher.CodeVoucherExists, "campaign id %s is taken; try again", c.ID)
		}
		return voucher.Campaign{}, interpretError(err)
	}
	return s.Campaign(ctx, c.ID)
}

// AddCampaignCodes implements voucher.CampaignStore: the codes and their
// audit entry (voucher.AuditAddCodes) in one transaction. The campaign row
// is locked meanwhile, so concurrent additions count every code.
func (s *Store) AddCampaignCodes(ctx context.Context, id string, n int, gen voucher.CodeGenerator) (voucher.Campaign, error) {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var one int
		if err := tx.QueryRow(ctx, qCampaignLock, id).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return campaignNotFound(id)
			}
			return err
		}
		if err := addCodes(ctx, tx, id, n, gen); err != nil {
			return err
		}
		return recordAudit(ctx, tx, id, voucher.AuditAddCodes, voucher.ActorOf(ctx), nil, fmt.Appendf(nil, `{"count":%d}`, n))
	})
	if err != nil {
		return voucher.Campaign{}, interpretError(err)
	}
	return s.Campaign(ctx, id)
}

// addCodes inserts n new codes from gen into campaign id, codeBatch at a
// time: each batch is copied into a staging table (COPY), then moved into
// campaign_code without the codes any campaign or voucher already has
// (the unique index drops repeats); the shortfall is generated again. The
// transaction holds voucherd_code_namespace_lock, which voucher inserts take
// too. It gives up when a batch adds nothing, which only a code space too
// small for the prefix and length makes likely.
func addCodes(ctx context.Context, tx pgx.Tx, id string, n int, gen voucher.CodeGenerator) error {
	if n == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, "SELECT voucherd_code_namespace_lock()"); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "CREATE TEMP TABLE campaign_code_staging (code text NOT NULL) ON COMMIT DROP"); err != nil {
		return err
	}
	for left := n; left > 0; {
		codes, err := gen(min(left, codeBatch))
		if err != nil {
			return err
		}
		rows := make([][]any, len(codes))
		for i, c := range codes {
			rows[i] = []any{c}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"campaign_code_staging"}, []string{"code"}, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, qCampaignCodesAdd, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return voucher.Errorf(voucher.CodeInvalidRequest,
				"no new code could be generated for campaign %s: its code space is full; use a longer codeLength", id)
		}
		left -= int(tag.RowsAffected())
		if _, err := tx.Exec(ctx, "TRUNCATE campaign_code_staging"); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, "UPDATE campaign SET code_count = code_count + $2 WHERE id = $1", id, n)
	return err
}

// Campaign implements voucher.CampaignStore.
func (s *Store) Campaign(ctx context.Context, id string) (voucher.Campaign, error) {
	var c voucher.Campaign
	b := &c.Budget
	err := s.pool.QueryRow(ctx, qCampaignGet, id).Scan(&c.ID, &c.Name, &c.CodePrefix, &c.CodeLength, &c.CodeCount, &c.CreatedAt,
		&b.Code, &b.DiscountAmount, &b.MinOrderAmount, &b.TotalLimit, &b.PerUserLimit, &b.StartsAt, &b.EndsAt,
		&b.FlashSale, &b.UsedCount, &b.CreatedAt, &b.UpdatedAt, &b.Disabled, &b.DiscountPercentBP, &b.MaxDiscountAmount,
		&b.CustomerIDNormalization, &b.Currency, &b.CustomerID, &b.Reserved, &b.Confirmed)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return voucher.Campaign{}, campaignNotFound(id)
		}
		return voucher.Campaign{}, interpretError(err)
	}
	if err := readBudget(ctx, s.pool, b); err != nil {
		return voucher.Campaign{}, interpretError(err)
	}
	if err := readWindows(ctx, s.pool, b); err != nil {
		return voucher.Campaign{}, interpretError(err)
	}
	c.CreatedAt = c.CreatedAt.UTC()
	b.StartsAt, b.EndsAt = b.StartsAt.UTC(), b.EndsAt.UTC()
	b.CreatedAt, b.UpdatedAt = b.CreatedAt.UTC(), b.UpdatedAt.UTC()
	return c, nil
}

// CampaignCodes implements voucher.CampaignStore; the cursor is the last
// code of the previous page.
func (s *Store) CampaignCodes(ctx context.Context, id string, p voucher.PageRequest) (voucher.CampaignCodePage, error) {
	after, err := decodeCursor(p.After, "c:"+id)
	if err != nil {
		return voucher.CampaignCodePage{}, err
	}
	key := ""
	if after != nil {
		key = after.Key
	}
	codes, err := s.codesPage(ctx, id, key, p.Limit+1)
	if err != nil {
		return voucher.CampaignCodePage{}, err
	}
	page := voucher.CampaignCodePage{Codes: codes}
	if len(codes) > p.Limit {
		page.Codes = codes[:p.Limit]
		page.Next = cursor{Listing: "c:" + id, Key: page.Codes[p.Limit-1].Code}.encode()
	}
	return page, nil
}

func (s *Store) codesPage(ctx context.Context, id, after string, limit int) ([]voucher.CampaignCode, error) {
	rows, err := s.pool.Query(ctx, qCampaignCodesPage, id, after, limit)
	if err != nil {
		return nil, interpretError(err)
	}
	codes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[voucher.CampaignCode])
	if err != nil {
		return nil, interpretError(err)
	}
	return codes, nil
}

// EachCampaignCode implements voucher.CampaignStore, eachCodePage codes per
// statement, so no statement runs for the whole export.
func (s *Store) EachCampaignCode(ctx context.Context, id string, fn func(voucher.CampaignCode) error) error {
	after := ""
	for {
		codes, err := s.codesPage(ctx, id, after, eachCodePage)
		if err != nil {
			return err
		}
		for _, c := range codes {
			if err := fn(c); err != nil {
				return err
			}
		}
		if len(codes) < eachCodePage {
			return nil
		}
		after = codes[len(codes)-1].Code
	}
}

// CodeCampaign implements voucher.CampaignStore.
func (s *Store) CodeCampaign(ctx context.Context, code string) (string, error) {
	var id string
	if err := s.pool.QueryRow(ctx, qCampaignOfCode, code).Scan(&id); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return "", voucherNotFound(code)
		}
		return "", interpretError(err)
	}
	return id, nil
}
