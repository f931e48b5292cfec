package voucher

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// A campaign is a budget of uses shared by many single-use codes. Its
// budget is a voucher (Campaign.Budget, whose Code is the campaign id)
// that is never reserved by its own code: a reservation names one of the
// campaign's codes, takes its use from the budget (totalLimit, and the
// perUserLimit counted across all the codes) and holds the code itself
// until the reservation is released. Everything a voucher's reservation
// does (confirm, release, extension, expiry, replay by orderId) works the
// same on a campaign code.

// Limits of campaign codes.
const (
	// MaxCodesPerRequest bounds the codes one request generates; larger
	// campaigns add codes in several requests.
	MaxCodesPerRequest = 100_000
	// MaxCampaignCodes bounds the codes of one campaign.
	MaxCampaignCodes = 10_000_000
	// DefaultCodeLength is the number of random characters of a code.
	DefaultCodeLength = 10
	// MinCodeLength and MaxCodeLength bound the random part of a code.
	MinCodeLength = 6
	MaxCodeLength = 16
	// MaxCodePrefix bounds a code prefix; with the longest random part a
	// code is 32 characters, the longest a code may be.
	MaxCodePrefix = 16
	// CodeAlphabet is Crockford's base32 alphabet: no I, L, O or U, so that
	// a code read aloud or typed is not mistaken.
	CodeAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	// campaignIDPrefix starts every campaign id.
	campaignIDPrefix = "cmp_"
	// campaignIDLength is the number of random characters of a campaign id.
	campaignIDLength = 12
)

// Campaign is a campaign with its budget.
type Campaign struct {
	// ID is the campaign's id and its budget voucher's code.
	ID   string
	Name string
	// CodePrefix starts each of its codes; CodeLength random characters of
	// CodeAlphabet follow.
	CodePrefix string
	CodeLength int
	// CodeCount is the number of codes generated so far.
	CodeCount int32
	// Budget holds the discount, the limits and the window; reads fill its
	// live counts (UsedCount, Reserved, Confirmed).
	Budget    Voucher
	CreatedAt time.Time
}

// CampaignCode is one code of a campaign; Used while a RESERVED or
// CONFIRMED reservation holds it.
type CampaignCode struct {
	Code string
	Used bool
	// CustomerID is the one customer the code serves ("" for every one).
	CustomerID string
}

// CampaignCodePage is one page of a campaign's codes in byte order; an
// empty Next means the last page.
type CampaignCodePage struct {
	Codes []CampaignCode
	Next  string
}

// NewCampaign is a campaign to create with its first codes.
type NewCampaign struct {
	Name       string
	CodePrefix string
	// CodeLength is DefaultCodeLength when 0.
	CodeLength int
	// CodeCount codes are generated with the campaign (0 to
	// MaxCodesPerRequest).
	CodeCount int
	// Budget is the discount, limits and window; its Code is ignored.
	Budget Voucher
}

// Validate checks n's fields at now.
func (n *NewCampaign) Validate(now time.Time) error {
	if n.CodeLength == 0 {
		n.CodeLength = DefaultCodeLength
	}
	switch {
	case n.Name == "" || utf8.RuneCountInString(n.Name) > 200 || !utf8.ValidString(n.Name) ||
		strings.ContainsFunc(n.Name, unicode.IsControl):
		return Errorf(CodeInvalidRequest, "name must be 1-200 characters, none a control character")
	case len(n.CodePrefix) > MaxCodePrefix || n.CodePrefix != "" && !ValidCode(n.CodePrefix):
		return Errorf(CodeInvalidRequest, "codePrefix must be at most %d characters of A-Z a-z 0-9 _ -", MaxCodePrefix)
	case n.CodeLength < MinCodeLength || n.CodeLength > MaxCodeLength:
		return Errorf(CodeInvalidRequest, "codeLength must be from %d to %d", MinCodeLength, MaxCodeLength)
	case n.CodeCount < 0 || n.CodeCount > MaxCodesPerRequest:
		return Errorf(CodeInvalidRequest, "codeCount must be from 0 to %d", MaxCodesPerRequest)
	case n.Budget.CustomerID != "":
		return Errorf(CodeInvalidRequest, "a campaign serves every customer; bind a code to one customer when importing it")
	}
	b := n.Budget
	b.Code = campaignIDPrefix + strings.Repeat("0", campaignIDLength)
	return b.ValidateNew(now)
}

// newCampaignID returns a random campaign id.
func newCampaignID() (string, error) {
	codes, err := GenerateCodes(campaignIDPrefix, campaignIDLength, 1)
	if err != nil {
		return "", err
	}
	return codes[0], nil
}

// GenerateCodes returns n codes of prefix followed by length characters of
// CodeAlphabet drawn from crypto/rand: each character is 5 uniform random
// bits, so a code tells nothing about another. Codes may repeat (with
// probability about n²/2 / 32^length); the store drops repeats and
// collisions and asks for more.
func GenerateCodes(prefix string, length, n int) ([]string, error) {
	buf := make([]byte, length*n)
	if _, err := rand.Read(buf); err != nil {
		return nil, fmt.Errorf("voucher: random codes: %w", err)
	}
	out := make([]string, n)
	code := make([]byte, len(prefix)+length)
	copy(code, prefix)
	for i := range out {
		for j, b := range buf[i*length : (i+1)*length] {
			code[len(prefix)+j] = CodeAlphabet[b&31]
		}
		out[i] = string(code)
	}
	return out, nil
}

// CampaignStore is the store's side of campaigns.
type CampaignStore interface {
	// CreateCampaign stores c (its budget voucher, flagged campaign, and the
	// campaign row) with n codes from gen, in one transaction.
	CreateCampaign(ctx context.Context, c Campaign, n int, gen CodeGenerator) (Campaign, error)
	// AddCampaignCodes adds n codes from gen to campaign id in one
	// transaction and returns the campaign; CodeVoucherNotFound for an
	// unknown campaign.
	AddCampaignCodes(ctx context.Context, id string, n int, gen CodeGenerator) (Campaign, error)
	// ImportCampaignCodes adds codes (well-formed, customers normalised)
	// to campaign id in one transaction, with its audit entry, and answers
	// what became of each (ImportResult); CodeCampaignNotFound for an
	// unknown campaign.
	ImportCampaignCodes(ctx context.Context, id string, codes []ImportCode) (ImportResult, error)
	// Campaign returns a campaign with live counts.
	Campaign(ctx context.Context, id string) (Campaign, error)
	// CampaignCodes returns one page of a campaign's codes after p.After.
	CampaignCodes(ctx context.Context, id string, p PageRequest) (CampaignCodePage, error)
	// EachCampaignCode calls fn with every code of a campaign in byte order,
	// reading them page by page; fn's error stops it.
	EachCampaignCode(ctx context.Context, id string, fn func(CampaignCode) error) error
	// CodeCampaign returns the id of the campaign code belongs to;
	// CodeVoucherNotFound when it is no campaign's.
	CodeCampaign(ctx context.Context, code string) (string, error)
}

// CodeGenerator returns n fresh codes (GenerateCodes with a campaign's
// prefix and length).
type CodeGenerator func(n int) ([]string, error)

func generator(prefix string, length int) CodeGenerator {
	return func(n int) ([]string, error) { return GenerateCodes(prefix, length, n) }
}

// CreateCampaign validates n and stores a new campaign with its first
// n.CodeCount codes.
func (s *Service) CreateCampaign(ctx context.Context, n NewCampaign) (Campaign, error) {
	if err := n.Validate(s.now()); err != nil {
		return Campaign{}, err
	}
	id, err := newCampaignID()
	if err != nil {
		return Campaign{}, err
	}
	c := Campaign{ID: id, Name: n.Name, CodePrefix: n.CodePrefix, CodeLength: n.CodeLength, Budget: n.Budget}
	c.Budget.Code = id
	created, err := s.store.CreateCampaign(ctx, c, n.CodeCount, generator(n.CodePrefix, n.CodeLength))
	if err != nil {
		return Campaign{}, err
	}
	if created.Budget.FlashSale && s.gate != nil {
		// As for a flash voucher: the budget's keys, with no code held yet.
		if _, err := s.Warmup(ctx, created.ID); err != nil {
			s.log.WarnContext(ctx, "warm-up after create failed; will load on first use", "campaign", created.ID, "err", err)
		}
	}
	return created, nil
}

// AddCampaignCodes generates n more codes for campaign id.
func (s *Service) AddCampaignCodes(ctx context.Context, id string, n int) (Campaign, error) {
	if n < 1 || n > MaxCodesPerRequest {
		return Campaign{}, Errorf(CodeInvalidRequest, "count must be from 1 to %d", MaxCodesPerRequest)
	}
	c, err := s.Campaign(ctx, id)
	if err != nil {
		return Campaign{}, err
	}
	if int64(c.CodeCount)+int64(n) > MaxCampaignCodes {
		return Campaign{}, Errorf(CodeInvalidRequest, "a campaign has at most %d codes", MaxCampaignCodes)
	}
	return s.store.AddCampaignCodes(ctx, id, n, generator(c.CodePrefix, c.CodeLength))
}

// Campaign returns a campaign with live counts; CodeCampaignNotFound for an
// unknown id.
func (s *Service) Campaign(ctx context.Context, id string) (Campaign, error) {
	if !ValidCode(id) {
		return Campaign{}, campaignNotFound(id)
	}
	return s.store.Campaign(ctx, id)
}

// CampaignCodes returns one page of a campaign's codes.
func (s *Service) CampaignCodes(ctx context.Context, id string, p PageRequest) (CampaignCodePage, error) {
	var err error
	if p.Limit, err = checkLimit(p.Limit); err != nil {
		return CampaignCodePage{}, err
	}
	if _, err := s.Campaign(ctx, id); err != nil {
		return CampaignCodePage{}, err
	}
	if err := s.auditExport(ctx, id, map[string]any{"format": "page", "limit": p.Limit, "after": p.After}); err != nil {
		return CampaignCodePage{}, err
	}
	return s.store.CampaignCodes(ctx, id, p)
}

// EachCampaignCode calls fn with every code of a campaign, in byte order.
func (s *Service) EachCampaignCode(ctx context.Context, id string, fn func(CampaignCode) error) error {
	if _, err := s.Campaign(ctx, id); err != nil {
		return err
	}
	if err := s.auditExport(ctx, id, map[string]any{"format": "all"}); err != nil {
		return err
	}
	return s.store.EachCampaignCode(ctx, id, fn)
}

// auditExport records a read of campaign id's codes before it happens: a
// read that cannot be recorded is not made.
func (s *Service) auditExport(ctx context.Context, id string, what map[string]any) error {
	after, err := json.Marshal(what)
	if err != nil {
		return err
	}
	return s.store.RecordAudit(ctx, AuditEntry{Code: id, Action: AuditExportCodes, KeyName: ActorOf(ctx), At: s.now().UTC(), After: after})
}

func campaignNotFound(id string) error {
	return Errorf(CodeCampaignNotFound, "campaign %s not found", id)
}
