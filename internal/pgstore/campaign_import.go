package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/voucherd/voucherd/internal/voucher"
)

var qCampaignCodesImport = mustQuery("campaign_codes_import")

// ImportCampaignCodes implements voucher.CampaignStore: under the campaign
// row's lock and voucherd_code_namespace_lock (which voucher inserts and
// code generation take too, so no check below can race them), the codes are
// copied into a staging table (COPY) and moved into campaign_code by one
// statement that answers each element it did not add
// (campaign_codes_import); the code count and the audit entry (add_codes,
// with the number added and imported: true) are written in the same
// transaction, so an import is written whole or not at all.
func (s *Store) ImportCampaignCodes(ctx context.Context, id string, codes []voucher.ImportCode) (voucher.ImportResult, error) {
	var res voucher.ImportResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = voucher.ImportResult{}
		var one int
		if err := tx.QueryRow(ctx, qCampaignLock, id).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return campaignNotFound(id)
			}
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT voucherd_code_namespace_lock()"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE campaign_code_import (n integer NOT NULL, code text NOT NULL, customer text)
			ON COMMIT DROP`); err != nil {
			return err
		}
		rows := make([][]any, len(codes))
		for i, c := range codes {
			var customer *string
			if c.CustomerID != "" {
				customer = &codes[i].CustomerID
			}
			rows[i] = []any{int32(i + 1), c.Code, customer} //nolint:gosec // G115: at most voucher.MaxImportCodes elements
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"campaign_code_import"}, []string{"n", "code", "customer"},
			pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		out, err := tx.Query(ctx, qCampaignCodesImport, id)
		if err != nil {
			return err
		}
		var (
			n             int32
			code, verdict string
		)
		if _, err := pgx.ForEachRow(out, []any{&n, &code, &verdict}, func() error {
			if n < 1 || int(n) > len(codes) {
				return fmt.Errorf("pgstore: campaign_codes_import answered element %d of %d", n, len(codes))
			}
			if voucher.ImportReason(verdict) == voucher.ImportExists {
				res.Existing++
				return nil
			}
			res.Refused = append(res.Refused, voucher.ImportRefusal{Index: int(n) - 1, Code: code, Reason: voucher.ImportReason(verdict)})
			return nil
		}); err != nil {
			return err
		}
		res.Added = len(codes) - res.Existing - len(res.Refused)
		if _, err := tx.Exec(ctx, "UPDATE campaign SET code_count = code_count + $2 WHERE id = $1", id, res.Added); err != nil {
			return err
		}
		return recordAudit(ctx, tx, id, voucher.AuditAddCodes, voucher.ActorOf(ctx), nil,
			fmt.Appendf(nil, `{"count":%d,"imported":true}`, res.Added))
	})
	if err != nil {
		return voucher.ImportResult{}, interpretError(err)
	}
	c, err := s.Campaign(ctx, id)
	if err != nil {
		return voucher.ImportResult{}, err
	}
	res.Campaign = c
	return res, nil
}
