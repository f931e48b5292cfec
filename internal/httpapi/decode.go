package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

// The request bodies of the API are flat JSON objects of strings, integers,
// booleans and date-times. They are read by one strict decoder rather than
// encoding/json, which accepts what the contract rejects (duplicate keys,
// names in any case, null for any field) and refuses what JSON Schema calls
// an integer (1.0). The decoder:
//   - accepts exactly one JSON object (RFC 8259), then only white space;
//   - matches member names exactly, after unescaping;
//   - rejects an unknown or repeated member, and null for any member;
//   - reads an integer member from any JSON number whose value is integral
//     (1, 1.0, 1e3), and checks it against the member's bounds;
//   - names JSON types, never Go types, in its messages.
//
// It also avoids encoding/json's reflection and most allocations: the
// reservation body is read on every request of a flash sale.

// Error codes of the HTTP layer itself; the status table maps them too.
const (
	// CodeUnsupportedMediaType answers a request body that is not
	// application/json.
	CodeUnsupportedMediaType voucher.ErrorCode = "UNSUPPORTED_MEDIA_TYPE"
	// CodeMethodNotAllowed answers a method the path does not have; the
	// Allow header lists the ones it has.
	CodeMethodNotAllowed voucher.ErrorCode = "METHOD_NOT_ALLOWED"
	// CodeNotFound answers a path that is no route.
	CodeNotFound voucher.ErrorCode = "NOT_FOUND"
)

// jsonKind is the type of a JSON value.
type jsonKind uint8

const (
	kindString jsonKind = iota + 1
	kindNumber
	kindBool
	kindNull
	kindObject
	kindArray
)

// jsonValue is one member's value: its kind and its bytes as they appear in
// the body (strings with their quotes).
type jsonValue struct {
	kind jsonKind
	raw  []byte
	// escaped marks a string with a backslash or a byte outside printable
	// ASCII: it needs the full unescaping.
	escaped bool
}

// bodyPool holds the buffers request bodies are read into.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// readBody checks the Content-Type and reads the body (at most limit bytes)
// into a pooled buffer; the caller returns it with putBody once the decoded
// values no longer refer to it.
func readBody(r *http.Request, limit int) (*[]byte, error) {
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		return nil, err
	}
	bp := bodyPool.Get().(*[]byte)
	b := (*bp)[:0]
	if r.Body == nil {
		*bp = b
		return bp, nil
	}
	for {
		if len(b) == cap(b) {
			if len(b) > limit {
				break
			}
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			*bp = b
			putBody(bp)
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return nil, voucher.Errorf(voucher.CodeInvalidRequest, "request body is larger than %d bytes", limit)
			}
			return nil, voucher.Errorf(voucher.CodeInvalidRequest, "reading the request body: %v", err)
		}
	}
	*bp = b
	if len(b) > limit {
		putBody(bp)
		return nil, voucher.Errorf(voucher.CodeInvalidRequest, "request body is larger than %d bytes", limit)
	}
	return bp, nil
}

func putBody(bp *[]byte) {
	if cap(*bp) <= 4*MaxBodyBytes {
		bodyPool.Put(bp)
	}
}

// checkContentType requires application/json, in any case, with any
// parameters.
func checkContentType(ct string) error {
	if ct == "application/json" {
		return nil
	}
	if ct == "" {
		return voucher.Errorf(CodeUnsupportedMediaType, "Content-Type application/json is required")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" { // ParseMediaType lowers the case
		return voucher.Errorf(CodeUnsupportedMediaType, "Content-Type must be application/json, not %q", ct)
	}
	return nil
}

// decodeObject reads body as one JSON object whose member names are among
// names (at most 64), calling set with the index of each member's name and
// its value. It returns the set of indexes seen, as bits.
func decodeObject(body []byte, names []string, set func(i int, v jsonValue) error) (uint64, error) {
	d := scanner{b: body}
	d.space()
	if d.i == len(d.b) {
		return 0, voucher.Errorf(voucher.CodeInvalidRequest, "request body is empty")
	}
	if d.b[d.i] != '{' {
		if _, err := d.value(); err != nil {
			return 0, err
		}
		return 0, voucher.Errorf(voucher.CodeInvalidRequest, "request body must be a JSON object")
	}
	d.i++
	var seen uint64
	d.space()
	if d.peek() == '}' {
		d.i++
	} else {
		for {
			d.space()
			if d.peek() != '"' {
				return 0, d.syntax()
			}
			key, err := d.value()
			if err != nil {
				return 0, err
			}
			i := fieldIndex(key, names)
			if i < 0 {
				return 0, voucher.Errorf(voucher.CodeInvalidRequest, "unknown field %s", quoteKey(key))
			}
			if seen&(1<<i) != 0 {
				return 0, voucher.Errorf(voucher.CodeInvalidRequest, "field %s appears more than once", names[i])
			}
			seen |= 1 << i
			d.space()
			if d.peek() != ':' {
				return 0, d.syntax()
			}
			d.i++
			d.space()
			v, err := d.value()
			if err != nil {
				return 0, err
			}
			d.space()
			c := d.peek()
			if c != ',' && c != '}' {
				return 0, d.syntax()
			}
			d.i++
			if v.kind == kindNull {
				return 0, voucher.Errorf(voucher.CodeInvalidRequest, "field %s must not be null", names[i])
			}
			if err := set(i, v); err != nil {
				return 0, err
			}
			if c == '}' {
				break
			}
		}
	}
	d.space()
	if d.i != len(d.b) {
		return 0, voucher.Errorf(voucher.CodeInvalidRequest, "unexpected data after the JSON object")
	}
	return seen, nil
}

// fieldIndex returns the index of the member name key (a JSON string) in
// names, or -1.
func fieldIndex(key jsonValue, names []string) int {
	k := key.raw[1 : len(key.raw)-1]
	if key.escaped {
		var s string
		if json.Unmarshal(key.raw, &s) != nil {
			return -1
		}
		k = []byte(s)
	}
	for i, n := range names {
		if string(k) == n {
			return i
		}
	}
	return -1
}

// quoteKey returns a member name for an error message, unescaped and quoted.
func quoteKey(key jsonValue) string {
	var s string
	if json.Unmarshal(key.raw, &s) != nil {
		s = string(key.raw)
	}
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}

// scanner reads JSON values from b at i.
type scanner struct {
	b []byte
	i int
}

func (d *scanner) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *scanner) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *scanner) syntax() error {
	if d.i >= len(d.b) {
		return voucher.Errorf(voucher.CodeInvalidRequest, "malformed JSON: the body ends early")
	}
	return voucher.Errorf(voucher.CodeInvalidRequest, "malformed JSON at byte %d", d.i)
}

// value reads one JSON value. Objects and arrays are checked whole (depth
// bounded by the body's size limit) and returned as one raw value.
func (d *scanner) value() (jsonValue, error) {
	start := d.i
	switch c := d.peek(); {
	case c == '"':
		return d.str()
	case c == '-' || ('0' <= c && c <= '9'):
		return d.number()
	case c == 't':
		return d.literal("true", kindBool)
	case c == 'f':
		return d.literal("false", kindBool)
	case c == 'n':
		return d.literal("null", kindNull)
	case c == '{' || c == '[':
		if err := d.skipComposite(0); err != nil {
			return jsonValue{}, err
		}
		k := kindObject
		if c == '[' {
			k = kindArray
		}
		return jsonValue{kind: k, raw: d.b[start:d.i]}, nil
	}
	return jsonValue{}, d.syntax()
}

// maxDepth bounds the nesting of values the decoder skips.
const maxDepth = 100

func (d *scanner) skipComposite(depth int) error {
	if depth > maxDepth {
		return voucher.Errorf(voucher.CodeInvalidRequest, "JSON nested deeper than %d levels", maxDepth)
	}
	open := d.b[d.i]
	end := byte(']')
	if open == '{' {
		end = '}'
	}
	d.i++
	d.space()
	if d.peek() == end {
		d.i++
		return nil
	}
	for {
		d.space()
		if open == '{' {
			if d.peek() != '"' {
				return d.syntax()
			}
			if _, err := d.str(); err != nil {
				return err
			}
			d.space()
			if d.peek() != ':' {
				return d.syntax()
			}
			d.i++
			d.space()
		}
		switch d.peek() {
		case '{', '[':
			if err := d.skipComposite(depth + 1); err != nil {
				return err
			}
		default:
			if _, err := d.value(); err != nil {
				return err
			}
		}
		d.space()
		switch d.peek() {
		case ',':
			d.i++
		case end:
			d.i++
			return nil
		default:
			return d.syntax()
		}
	}
}

func (d *scanner) literal(word string, k jsonKind) (jsonValue, error) {
	if len(d.b)-d.i < len(word) || string(d.b[d.i:d.i+len(word)]) != word {
		return jsonValue{}, d.syntax()
	}
	start := d.i
	d.i += len(word)
	return jsonValue{kind: k, raw: d.b[start:d.i]}, nil
}

// str reads a string, checking its escapes; control characters are not
// allowed raw (RFC 8259 §7).
func (d *scanner) str() (jsonValue, error) {
	start := d.i
	d.i++
	escaped := false
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return jsonValue{kind: kindString, raw: d.b[start:d.i], escaped: escaped}, nil
		case c < 0x20:
			return jsonValue{}, d.syntax()
		case c == '\\':
			escaped = true
			d.i++
			switch d.peek() {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i++
			case 'u':
				d.i++
				for range 4 {
					if !isHex(d.peek()) {
						return jsonValue{}, d.syntax()
					}
					d.i++
				}
			default:
				return jsonValue{}, d.syntax()
			}
		default:
			if c >= 0x80 {
				escaped = true
			}
			d.i++
		}
	}
	return jsonValue{}, d.syntax()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number reads a number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *scanner) number() (jsonValue, error) {
	start := d.i
	if d.peek() == '-' {
		d.i++
	}
	switch c := d.peek(); {
	case c == '0':
		d.i++
	case '1' <= c && c <= '9':
		d.digits()
	default:
		return jsonValue{}, d.syntax()
	}
	if d.peek() == '.' {
		d.i++
		if d.digits() == 0 {
			return jsonValue{}, d.syntax()
		}
	}
	if c := d.peek(); c == 'e' || c == 'E' {
		d.i++
		if c := d.peek(); c == '+' || c == '-' {
			d.i++
		}
		if d.digits() == 0 {
			return jsonValue{}, d.syntax()
		}
	}
	return jsonValue{kind: kindNumber, raw: d.b[start:d.i]}, nil
}

func (d *scanner) digits() int {
	n := 0
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
		n++
	}
	return n
}

// kindName names a JSON type for messages.
func kindName(k jsonKind) string {
	switch k {
	case kindString:
		return "a string"
	case kindNumber:
		return "a number"
	case kindBool:
		return "a boolean"
	case kindObject:
		return "an object"
	case kindArray:
		return "an array"
	}
	return "null"
}

// intField reads an integer member within [lo, hi].
func intField(name string, v jsonValue, lo, hi int64) (int64, error) {
	bad := func() error {
		return voucher.Errorf(voucher.CodeInvalidRequest, "field %s must be an integer from %d to %d", name, lo, hi)
	}
	if v.kind != kindNumber {
		return 0, voucher.Errorf(voucher.CodeInvalidRequest, "field %s must be an integer, not %s", name, kindName(v.kind))
	}
	n, ok := parseInteger(v.raw)
	if !ok || n < lo || n > hi {
		return 0, bad()
	}
	return n, nil
}

// parseInteger returns the value of a JSON number (already checked against
// the grammar) when it is an integer in int64's range.
func parseInteger(raw []byte) (int64, bool) { return parseScaled(raw, 0) }

// decimalField reads a number member with at most scale decimals as an
// integer count of 10^-scale units (12.5 with scale 2 is 1250), within
// [lo, hi] of those units; what it means is worded by want.
func decimalField(name string, v jsonValue, scale int, lo, hi int64, want string) (int64, error) {
	if v.kind != kindNumber {
		return 0, voucher.Errorf(voucher.CodeInvalidRequest, "field %s must be a number, not %s", name, kindName(v.kind))
	}
	n, ok := parseScaled(v.raw, scale)
	if !ok || n < lo || n > hi {
		return 0, voucher.Errorf(voucher.CodeInvalidRequest, "field %s must be %s", name, want)
	}
	return n, nil
}

// parseScaled returns the value of a JSON number (already checked against
// the grammar) times 10^scale when that is an integer in int64's range:
// exactly, from its digits, never through a float.
func parseScaled(raw []byte, scale int) (int64, bool) {
	neg := false
	if raw[0] == '-' {
		neg = true
		raw = raw[1:]
	}
	// Fast path: plain digits.
	if scale == 0 && len(raw) <= 18 {
		var n int64
		plain := true
		for _, c := range raw {
			if c < '0' || c > '9' {
				plain = false
				break
			}
			n = n*10 + int64(c-'0')
		}
		if plain {
			if neg {
				n = -n
			}
			return n, true
		}
	}
	// General: digits (integer and fraction part) times 10^exp.
	var mant []byte
	var buf [32]byte
	mant = buf[:0]
	exp := 0
	i := 0
	for ; i < len(raw) && raw[i] >= '0' && raw[i] <= '9'; i++ {
		mant = append(mant, raw[i])
	}
	if i < len(raw) && raw[i] == '.' {
		i++
		for ; i < len(raw) && raw[i] >= '0' && raw[i] <= '9'; i++ {
			mant = append(mant, raw[i])
			exp--
		}
	}
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		eneg := false
		if raw[i] == '+' || raw[i] == '-' {
			eneg = raw[i] == '-'
			i++
		}
		e := 0
		for ; i < len(raw); i++ {
			if e < 1_000_000 {
				e = e*10 + int(raw[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	exp += scale
	// Leading zeros say nothing; trailing ones move into the exponent.
	for len(mant) > 0 && mant[0] == '0' {
		mant = mant[1:]
	}
	if len(mant) == 0 {
		return 0, true
	}
	for exp < 0 && mant[len(mant)-1] == '0' {
		mant = mant[:len(mant)-1]
		exp++
	}
	if exp < 0 || len(mant)+exp > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range mant {
		u = u*10 + uint64(c-'0')
	}
	for range exp {
		u *= 10
	}
	// 19 digits fit in a uint64 without wrapping; int64's range is checked here.
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	case neg && u <= 1<<63:
		return int64(-u), true //nolint:gosec // G115: u <= 1<<63, so -u wraps to the two's complement of the negative value
	}
	return 0, false
}

// stringField reads a string member.
func stringField(name string, v jsonValue) (string, error) {
	if v.kind != kindString {
		return "", voucher.Errorf(voucher.CodeInvalidRequest, "field %s must be a string, not %s", name, kindName(v.kind))
	}
	if !v.escaped {
		return string(v.raw[1 : len(v.raw)-1]), nil
	}
	var s string
	if err := json.Unmarshal(v.raw, &s); err != nil {
		return "", voucher.Errorf(voucher.CodeInvalidRequest, "field %s must be a string", name)
	}
	return s, nil
}

// customerField reads a customerId member: a string of 1-64 letters, digits
// and `. _ : - @ +`, or an integer from 1 to 2^63-1 (integers were the
// only form once), which stands for its decimal string: 42, 42.0 and 4.2e1
// are the customer "42". Zero, negative and non-integral numbers are refused
// as every integer member's out-of-range values are.
func customerField(name string, v jsonValue) (string, error) {
	bad := func() error {
		return voucher.Errorf(voucher.CodeInvalidRequest,
			"field %s must be a string of 1-64 characters of A-Z a-z 0-9 . _ : - @ +, or an integer from 1 to %d",
			name, int64(math.MaxInt64))
	}
	switch v.kind {
	case kindString:
		s, err := stringField(name, v)
		if err != nil || !voucher.ValidCustomerID(s) {
			return "", bad()
		}
		return s, nil
	case kindNumber:
		n, ok := parseInteger(v.raw)
		if !ok || n < 1 {
			return "", bad()
		}
		return strconv.FormatInt(n, 10), nil
	}
	return "", voucher.Errorf(voucher.CodeInvalidRequest, "field %s must be a string or an integer, not %s", name, kindName(v.kind))
}

// boolField reads a boolean member.
func boolField(name string, v jsonValue) (bool, error) {
	if v.kind != kindBool {
		return false, voucher.Errorf(voucher.CodeInvalidRequest, "field %s must be a boolean, not %s", name, kindName(v.kind))
	}
	return v.raw[0] == 't', nil
}

// timeField reads an RFC 3339 date-time member of a year from 1970 to 9998
// as written (api/openapi.yaml's Instant).
func timeField(name string, v jsonValue) (time.Time, error) {
	bad := voucher.Errorf(voucher.CodeInvalidRequest, "field %s must be an RFC 3339 date-time of a year from 1970 to 9998", name)
	if v.kind != kindString {
		return time.Time{}, bad
	}
	s, err := stringField(name, v)
	if err != nil {
		return time.Time{}, err
	}
	var t time.Time
	if t.UnmarshalText([]byte(s)) != nil || s < "1970" || s >= "9999" || !voucher.ValidTime(t) {
		return time.Time{}, bad
	}
	return t, nil
}

// queryInteger reads an integer query parameter as JSON Schema counts
// integers: any number with an integral value ("5", "5.0", "5e0").
func queryInteger(s string) (int64, bool) {
	d := scanner{b: []byte(s)}
	if s == "" {
		return 0, false
	}
	v, err := d.number()
	if err != nil || d.i != len(d.b) {
		return 0, false
	}
	return parseInteger(v.raw)
}
