package voucher

import (
	"encoding/json"
	"strconv"
	"strings"
)

// MaxCustomerIDLen is the longest customerId.
const MaxCustomerIDLen = 64

// ValidCustomerID reports whether s is a well-formed customerId: 1–64
// characters of letters, digits and `. _ : - @ +` (a UUID, `cus_...`, an
// e-mail address, a hash in hex, or an integer's decimal digits).
func ValidCustomerID(s string) bool { return validName(s, MaxCustomerIDLen, "._:-@+") }

// errCustomerID is the answer to a malformed customerId.
func errCustomerID() error {
	return Errorf(CodeInvalidRequest, "customerId must be 1-64 characters of A-Z a-z 0-9 . _ : - @ + (or a positive integer)")
}

// CustomerIDInteger returns the value of a customerId that is the canonical
// decimal form of a positive int64 (no sign, no leading zero): the ids that
// callers sent as JSON integers before customerIds were strings. Such an id
// is written as a JSON number wherever voucherd writes one (answers, events),
// so that readers that take it for an integer keep working; "007" and "7"
// are different customers, and only "7" is an integer.
func CustomerIDInteger(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 19 || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// CustomerIDNormalization is how a voucher folds the customerIds it is given
// before any per-customer limit is counted.
type CustomerIDNormalization string

// Normalizations.
const (
	// NormalizeNone takes customerIds as they are (the default).
	NormalizeNone CustomerIDNormalization = "none"
	// NormalizeEmail takes customerIds for e-mail addresses: see
	// NormalizeEmailAddress.
	NormalizeEmail CustomerIDNormalization = "email"
)

// Valid reports whether n is a known normalization.
// The zero value is NormalizeNone.
func (n CustomerIDNormalization) Valid() bool {
	return n == "" || n == NormalizeNone || n == NormalizeEmail
}

// Apply returns the customerId id as the voucher counts it. id must be
// valid; the result is valid too and never longer.
func (n CustomerIDNormalization) Apply(id string) string {
	if n == NormalizeEmail {
		return NormalizeEmailAddress(id)
	}
	return id
}

// NormalizeEmailAddress folds the spellings of one mailbox into one id: the
// whole address in lower case, the `+tag` of the local part removed, and for
// gmail.com and googlemail.com (one mailbox service under two names, which
// ignores dots in the local part) the dots removed and the domain written
// gmail.com. An id that is not local@domain (exactly one `@`, both sides
// non-empty) is only lower-cased; a local part that folding would empty is
// kept as it is after lower-casing.
func NormalizeEmailAddress(id string) string {
	id = strings.ToLower(id)
	local, domain, ok := strings.Cut(id, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") {
		return id
	}
	if i := strings.IndexByte(local, '+'); i > 0 {
		local = local[:i]
	}
	if domain == "gmail.com" || domain == "googlemail.com" {
		domain = "gmail.com"
		if l := strings.ReplaceAll(local, ".", ""); l != "" {
			local = l
		}
	}
	return local + "@" + domain
}

// AppendCustomerIDJSON appends id as a JSON value: a number when it is an
// integer id (CustomerIDInteger), a string otherwise. id must be valid, so
// the string needs no escaping.
func AppendCustomerIDJSON(b []byte, id string) []byte {
	if _, ok := CustomerIDInteger(id); ok {
		return append(b, id...)
	}
	b = append(b, '"')
	b = append(b, id...)
	return append(b, '"')
}

// ParseCustomerIDJSON reads a customerId written as a JSON string or a JSON
// number (a positive integer, read as its decimal string: 42, 42.0 and 4.2e1
// are "42").
func ParseCustomerIDJSON(raw []byte) (string, error) {
	raw = []byte(strings.TrimSpace(string(raw)))
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || !ValidCustomerID(s) {
			return "", errCustomerID()
		}
		return s, nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return "", errCustomerID()
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		if n <= 0 {
			return "", errCustomerID()
		}
		return strconv.FormatInt(n, 10), nil
	}
	// An integral value written with a fraction or exponent; exact below
	// 2^53 only, as any JSON reader's.
	if f < 1 || f > 1<<53 || f != float64(int64(f)) {
		return "", errCustomerID()
	}
	return strconv.FormatInt(int64(f), 10), nil
}
