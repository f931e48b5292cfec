package httpapi

import (
	"github.com/voucherd/voucherd/internal/voucher"
)

// importFields are the members of one element of an import's codes.
var importFields = []string{"code", "customerId"}

// decodeImportCodes reads the codes member of POST /campaigns/{id}/codes:
// an array of 1 to voucher.MaxImportCodes objects with a code and an
// optional customerId. The answer is never nil without an error. A
// malformed element is refused with its position; the service checks the
// values' form.
func decodeImportCodes(v jsonValue) ([]voucher.ImportCode, error) {
	if v.kind != kindArray {
		return nil, voucher.Errorf(voucher.CodeInvalidRequest, "field codes must be an array, not %s", kindName(v.kind))
	}
	codes := []voucher.ImportCode{}
	d := scanner{b: v.raw, i: 1}
	d.space()
	if d.peek() == ']' {
		return nil, voucher.Errorf(voucher.CodeInvalidRequest, "codes must hold from 1 to %d codes", voucher.MaxImportCodes)
	}
	for i := 0; ; i++ {
		if i == voucher.MaxImportCodes {
			return nil, voucher.Errorf(voucher.CodeInvalidRequest, "codes must hold from 1 to %d codes", voucher.MaxImportCodes)
		}
		d.space()
		e, err := d.value()
		if err != nil {
			return nil, err
		}
		var c voucher.ImportCode
		seen, err := decodeObject(e.raw, importFields, func(k int, m jsonValue) error {
			var err error
			if k == 0 {
				c.Code, err = stringField("code", m)
			} else {
				c.CustomerID, err = customerField("customerId", m)
			}
			return err
		})
		if err != nil {
			msg := err.Error()
			if ve, ok := err.(*voucher.Error); ok {
				msg = ve.Message
			}
			return nil, voucher.Errorf(voucher.CodeInvalidRequest, "codes[%d]: %s", i, msg)
		}
		if seen&1 == 0 {
			return nil, voucher.Errorf(voucher.CodeInvalidRequest, "codes[%d].code is required", i)
		}
		codes = append(codes, c)
		d.space()
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			return codes, nil
		default:
			return nil, d.syntax()
		}
	}
}

// importJSON is the 200 answer of an import.
type importJSON struct {
	// Added is the number of codes added, Existing of those the campaign
	// had already (for the same customer): the import may be sent again.
	Added    int           `json:"added"`
	Existing int           `json:"existing"`
	Refused  []refusalJSON `json:"refused"`
	Campaign campaignJSON  `json:"campaign"`
}

// refusalJSON is one element of an import that was not added.
type refusalJSON struct {
	Index  int    `json:"index"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

func toImportJSON(r voucher.ImportResult) importJSON {
	out := importJSON{Added: r.Added, Existing: r.Existing, Refused: make([]refusalJSON, len(r.Refused)),
		Campaign: toCampaignJSON(r.Campaign)}
	for i, x := range r.Refused {
		out.Refused[i] = refusalJSON{Index: x.Index, Code: x.Code, Reason: string(x.Reason)}
	}
	return out
}
