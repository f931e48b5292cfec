package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

func TestDecodeReserveBody(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		body string
		want reserveRequest // compared when msg is empty
		msg  string         // a part of the INVALID_REQUEST message
	}{
		{"plain", `{"customerId":7,"orderId":"o-1","orderAmount":5000}`, reserveRequest{CustomerID: "7", OrderID: "o-1", OrderAmount: 5000}, ""},
		{"white space and order", " \n{ \"orderAmount\" : 0 ,\t\"orderId\":\"a\", \"customerId\":1}\r\n", reserveRequest{CustomerID: "1", OrderID: "a", OrderAmount: 0}, ""},
		{"integral 1.0", `{"customerId":1.0,"orderId":"a","orderAmount":2.50e3}`, reserveRequest{CustomerID: "1", OrderID: "a", OrderAmount: 2500}, ""},
		{"exponent", `{"customerId":1e2,"orderId":"a","orderAmount":0e99999999}`, reserveRequest{CustomerID: "100", OrderID: "a"}, ""},
		{"escaped name and value", `{"customer\u0049d":3,"orderId":"\u0041b","orderAmount":1}`, reserveRequest{CustomerID: "3", OrderID: "Ab", OrderAmount: 1}, ""},
		{"largest customer", `{"customerId":9223372036854775807,"orderId":"a","orderAmount":1000000000000000}`, reserveRequest{CustomerID: "9223372036854775807", OrderID: "a", OrderAmount: voucher.MaxAmount}, ""},
		{"string customer", `{"customerId":"cus_9Xk:a.b-c@shop.example+x","orderId":"a","orderAmount":1}`, reserveRequest{CustomerID: "cus_9Xk:a.b-c@shop.example+x", OrderID: "a", OrderAmount: 1}, ""},
		{"digit string", `{"customerId":"007","orderId":"a","orderAmount":1}`, reserveRequest{CustomerID: "007", OrderID: "a", OrderAmount: 1}, ""},
		{"escaped customer", `{"customerId":"\u0041\u002b1","orderId":"a","orderAmount":1}`, reserveRequest{CustomerID: "A+1", OrderID: "a", OrderAmount: 1}, ""},
		{"longest customer", `{"customerId":"` + strings.Repeat("c", 64) + `","orderId":"a","orderAmount":1}`, reserveRequest{CustomerID: strings.Repeat("c", 64), OrderID: "a", OrderAmount: 1}, ""},

		{"duplicate key", `{"customerId":1,"customerId":2,"orderId":"a","orderAmount":1}`, reserveRequest{}, "field customerId appears more than once"},
		{"duplicate key escaped", `{"customerId":1,"customer\u0049d":2}`, reserveRequest{}, "appears more than once"},
		{"case-insensitive name", `{"customerId":4,"CUSTOMERID":5,"orderId":"a","orderAmount":1}`, reserveRequest{}, `unknown field "CUSTOMERID"`},
		{"unknown field", `{"customerId":1,"orderId":"a","orderAmount":1,"coupon":"x"}`, reserveRequest{}, `unknown field "coupon"`},
		{"null", `{"customerId":null,"orderId":"a","orderAmount":1}`, reserveRequest{}, "field customerId must not be null"},
		{"array body", `[]`, reserveRequest{}, "request body must be a JSON object"},
		{"string body", `"x"`, reserveRequest{}, "request body must be a JSON object"},
		{"null body", `null`, reserveRequest{}, "request body must be a JSON object"},
		{"empty body", ``, reserveRequest{}, "request body is empty"},
		{"white space body", "  \n", reserveRequest{}, "request body is empty"},
		{"fraction", `{"customerId":1.5}`, reserveRequest{}, "field customerId must be a string of 1-64 characters of A-Z a-z 0-9 . _ : - @ +, or an integer from 1 to"},
		{"zero customer", `{"customerId":0}`, reserveRequest{}, "or an integer from 1 to 9223372036854775807"},
		{"negative customer", `{"customerId":-7}`, reserveRequest{}, "or an integer from 1 to"},
		{"empty customer", `{"customerId":""}`, reserveRequest{}, "field customerId must be a string of 1-64 characters"},
		{"customer too long", `{"customerId":"` + strings.Repeat("c", 65) + `"}`, reserveRequest{}, "field customerId must be a string of 1-64"},
		{"customer with a space", `{"customerId":"a b"}`, reserveRequest{}, "field customerId must be a string of 1-64"},
		{"customer with a slash", `{"customerId":"a/b"}`, reserveRequest{}, "field customerId must be a string of 1-64"},
		{"non-ASCII customer", `{"customerId":"é"}`, reserveRequest{}, "field customerId must be a string of 1-64"},
		{"boolean customer", `{"customerId":true}`, reserveRequest{}, "field customerId must be a string or an integer, not a boolean"},
		{"object for integer", `{"customerId":{}}`, reserveRequest{}, "must be a string or an integer, not an object"},
		{"integer for string", `{"orderId":7}`, reserveRequest{}, "field orderId must be a string, not a number"},
		{"int64 overflow", `{"customerId":9223372036854775808}`, reserveRequest{}, "or an integer from 1 to"},
		{"huge exponent", `{"customerId":1e400}`, reserveRequest{}, "or an integer from 1 to"},
		{"amount over the bound", `{"orderAmount":1000000000000001}`, reserveRequest{}, "field orderAmount must be an integer from 0 to 1000000000000000"},
		{"negative amount", `{"orderAmount":-1}`, reserveRequest{}, "field orderAmount must be an integer from 0 to"},
		{"malformed", `{"customerId":1,`, reserveRequest{}, "malformed JSON"},
		{"leading zero", `{"customerId":01}`, reserveRequest{}, "malformed JSON"},
		{"bare dot", `{"customerId":1.}`, reserveRequest{}, "malformed JSON"},
		{"raw control character", "{\"orderId\":\"a\tb\"}", reserveRequest{}, "malformed JSON"},
		{"bad escape", `{"orderId":"\x"}`, reserveRequest{}, "malformed JSON"},
		{"trailing comma", `{"customerId":1,}`, reserveRequest{}, "malformed JSON"},
		{"trailing data", `{"customerId":1,"orderId":"a","orderAmount":1} {}`, reserveRequest{}, "unexpected data after the JSON object"},
		{"single quotes", `{'customerId':1}`, reserveRequest{}, "malformed JSON"},
	}
	for _, c := range cases {
		var got reserveRequest
		err := got.decode([]byte(c.body))
		if c.msg != "" {
			require.Error(t, err, c.name)
			require.Equal(t, voucher.CodeInvalidRequest, voucher.CodeOf(err), c.name)
			require.Contains(t, err.Error(), c.msg, c.name)
			require.NotContains(t, err.Error(), "httpapi.", c.name)
			require.NotContains(t, err.Error(), "int64", c.name)
			continue
		}
		require.NoError(t, err, c.name)
		got.seen = 0
		require.Equal(t, c.want, got, c.name)
	}
}

func TestReserveRequiresEveryField(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"orderId":"a","orderAmount":1}`, `{"customerId":1,"orderAmount":1}`, `{"customerId":1,"orderId":"a"}`, `{}`} {
		var r reserveRequest
		require.NoError(t, r.decode([]byte(body)))
		_, err := r.toDomain("CODE")
		require.ErrorContains(t, err, "is required", body)
	}
}

func TestDecodeVoucherBody(t *testing.T) {
	t.Parallel()
	const valid = `"code":"A","discountAmount":1,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00+02:00"`
	cases := []struct {
		name  string
		body  string
		patch bool
		msg   string // empty: accepted
	}{
		{"create", `{` + valid + `}`, false, ""},
		{"create all fields", `{` + valid + `,"minOrderAmount":0,"perUserLimit":2147483647,"flashSale":true}`, false, ""},
		{"integral 1.0", `{"code":"A","discountAmount":1.0,"totalLimit":10E0,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`, false, ""},
		{"null integer", `{` + valid + `,"minOrderAmount":null}`, false, "field minOrderAmount must not be null"},
		{"null boolean", `{` + valid + `,"flashSale":null}`, false, "field flashSale must not be null"},
		{"null date", `{` + valid + `,"perUserLimit":1,"flashSale":false,"minOrderAmount":null}`, false, "must not be null"},
		{"discount at 2^63-1", `{"discountAmount":9223372036854775807}`, false, "field discountAmount must be an integer from 1 to 1000000000000000"},
		{"minimum at 2^63-1", `{"minOrderAmount":9223372036854775807}`, false, "field minOrderAmount must be an integer from 0 to 1000000000000000"},
		{"totalLimit over int32", `{"totalLimit":2147483648}`, false, "field totalLimit must be an integer from 1 to 2147483647"},
		{"year 0000", `{"startsAt":"0000-01-01T00:00:00Z"}`, false, "field startsAt must be an RFC 3339 date-time of a year from 1970 to 9998"},
		{"year 1969", `{"startsAt":"1969-12-31T23:59:59Z"}`, false, "of a year from 1970 to 9998"},
		{"year 9999", `{"endsAt":"9999-01-01T00:00:00Z"}`, false, "of a year from 1970 to 9998"},
		{"not a date", `{"endsAt":"tomorrow"}`, false, "RFC 3339"},
		{"date as number", `{"endsAt":1700000000}`, false, "RFC 3339"},
		{"boolean as string", `{"flashSale":"true"}`, false, "field flashSale must be a boolean, not a string"},
		{"case-insensitive", `{"Code":"A"}`, false, `unknown field "Code"`},
		{"patch", `{"totalLimit":5}`, true, ""},
		{"patch has no code", `{"code":"A"}`, true, `unknown field "code"`},
		{"patch null", `{"totalLimit":null}`, true, "field totalLimit must not be null"},
		{"patch duplicate", `{"totalLimit":5,"totalLimit":6}`, true, "field totalLimit appears more than once"},
	}
	for _, c := range cases {
		var r createVoucherRequest
		err := r.decode([]byte(c.body), c.patch)
		if c.msg == "" {
			require.NoError(t, err, c.name)
			continue
		}
		require.ErrorContains(t, err, c.msg, c.name)
		require.Equal(t, voucher.CodeInvalidRequest, voucher.CodeOf(err), c.name)
	}

	var r createVoucherRequest
	require.NoError(t, r.decode([]byte(`{`+valid+`}`), false))
	v, err := r.toVoucher()
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 12, 31, 22, 0, 0, 0, time.UTC), v.EndsAt.UTC())
}

func TestDecodeExtendBody(t *testing.T) {
	t.Parallel()
	var r extendRequest
	require.NoError(t, r.decode([]byte(`{"seconds":60.0}`)))
	d, err := r.duration()
	require.NoError(t, err)
	require.Equal(t, time.Minute, d)
	for body, msg := range map[string]string{
		`{"seconds":0}`:        "field seconds must be an integer from 1 to 31622400",
		`{"seconds":31622401}`: "from 1 to 31622400",
		`{"seconds":null}`:     "must not be null",
		`{"Seconds":1}`:        "unknown field",
	} {
		var r extendRequest
		require.ErrorContains(t, r.decode([]byte(body)), msg, body)
	}
}

func TestContentType(t *testing.T) {
	t.Parallel()
	for ct, ok := range map[string]bool{
		"application/json":                true,
		"application/json; charset=utf-8": true,
		"APPLICATION/JSON":                true,
		"Application/Json;Charset=UTF-8":  true,
		"":                                false,
		"application/jsonp":               false,
		"text/plain":                      false,
		"application/json-seq":            false,
		"application/json;":               true,
	} {
		err := checkContentType(ct)
		if ok {
			require.NoError(t, err, ct)
			continue
		}
		require.Error(t, err, ct)
		require.Equal(t, CodeUnsupportedMediaType, voucher.CodeOf(err), ct)
		require.Equal(t, 415, StatusOf(voucher.CodeOf(err)))
	}
}

func TestParseInteger(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]int64{
		"0": 0, "-0": 0, "1": 1, "-1": -1, "1.0": 1, "1.000": 1, "10e-1": 1, "0.1e1": 1, "1e18": 1e18,
		"9223372036854775807": math.MaxInt64, "-9223372036854775808": math.MinInt64,
		"922337203685477580.7e1": math.MaxInt64, "0.00": 0, "0e-5": 0, "100e-2": 1,
	} {
		got, ok := parseInteger([]byte(raw))
		require.True(t, ok, raw)
		require.Equal(t, want, got, raw)
	}
	for _, raw := range []string{"1.5", "0.1", "9223372036854775808", "-9223372036854775809", "1e19", "1e-1", "1e1000000000000", "123e-2"} {
		_, ok := parseInteger([]byte(raw))
		require.False(t, ok, raw)
	}
}

// FuzzDecodeReserve checks the strict decoder against encoding/json: what it
// accepts is valid JSON with the same values, and what encoding/json accepts
// without the ambiguities the decoder refuses (duplicate or case-folded
// names, null, non-integral numbers) it accepts too.
func FuzzDecodeReserve(f *testing.F) {
	for _, s := range []string{
		`{"customerId":7,"orderId":"o-1","orderAmount":5000}`,
		`{"customerId":1.0,"orderId":"\u0041","orderAmount":2e3}`,
		`{"customerId":1,"customerId":2}`,
		`{"customerId":4,"CUSTOMERID":5}`,
		`{"orderId":null}`, `[]`, `{}`, ``, `{"orderId":"a\"b"}`, `{"orderId":"é"}`,
		`{"orderAmount":-0.0e+1}`, `{"x":[1,{"y":[]}]}`, `{"customerId":"cus_1@x.io"}`, `{"customerId":"0"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got reserveRequest
		err := got.decode(body)

		type stdReserve struct {
			CustomerID  *json.RawMessage `json:"customerId"`
			OrderID     *string          `json:"orderId"`
			OrderAmount *json.Number     `json:"orderAmount"`
		}
		var std stdReserve
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		dec.UseNumber()
		stdErr := dec.Decode(&std)
		if stdErr == nil && dec.More() {
			stdErr = errFuzzTrailing
		}
		if stdErr == nil {
			if _, terr := dec.Token(); terr == nil {
				stdErr = errFuzzTrailing
			}
		}

		if err == nil {
			require.True(t, json.Valid(body), "accepted invalid JSON %q", body)
			require.NoError(t, stdErr, "accepted %q, which encoding/json refuses", body)
			if got.seen&1 != 0 {
				raw := []byte(*std.CustomerID)
				if raw[0] == '"' {
					var s string
					require.NoError(t, json.Unmarshal(raw, &s))
					require.Equal(t, s, got.CustomerID, "%q", body)
				} else {
					n, err := strconv.ParseInt(got.CustomerID, 10, 64)
					require.NoError(t, err, "%q", body)
					require.Equal(t, numberValue(t, json.Number(raw)), float64(n), "%q", body)
				}
			}
			if got.seen&2 != 0 {
				require.Equal(t, *std.OrderID, got.OrderID, "%q", body)
			}
			if got.seen&4 != 0 {
				require.Equal(t, numberValue(t, *std.OrderAmount), float64(got.OrderAmount), "%q", body)
			}
			return
		}
		if stdErr != nil || !unambiguous(body) {
			return
		}
		// encoding/json accepted an unambiguous body: the decoder may refuse
		// it only for a value out of its range.
		require.Contains(t, err.Error(), "must be", "refused %q, which encoding/json accepts: %v", body, err)
	})
}

var errFuzzTrailing = voucher.Errorf(voucher.CodeInvalidRequest, "trailing data")

func numberValue(t *testing.T, n json.Number) float64 {
	f, err := n.Float64()
	require.NoError(t, err)
	return f
}

// unambiguous reports whether body is an object whose member names are
// distinct exact names of the reserve body, with no null value.
func unambiguous(body []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	names := 0
	for k, v := range m {
		if k != "customerId" && k != "orderId" && k != "orderAmount" || string(v) == "null" {
			return false
		}
		names++
	}
	// A repeated name collapses in the map: count the names in the body.
	count := 0
	dec := json.NewDecoder(bytes.NewReader(body))
	depth := 0
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch tok := tok.(type) {
		case json.Delim:
			if tok == '{' || tok == '[' {
				depth++
			} else {
				depth--
			}
			expectKey = depth == 1 && tok == '{'
			continue
		case string:
			if depth == 1 && expectKey {
				count++
				expectKey = false
				continue
			}
		}
		if depth == 1 {
			expectKey = true
		}
	}
	return count == names && !strings.Contains(string(body), "\x00")
}

func TestQueryInteger(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int64{"5": 5, "459.0": 459, "1e2": 100, "-3": -3} {
		got, ok := queryInteger(s)
		require.True(t, ok, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"", " 5", "5 ", "5.5", "0x10", "+5", "five", "1e400"} {
		_, ok := queryInteger(s)
		require.False(t, ok, s)
	}
}

// discountPercent is read exactly, as basis points: 1 to 100 with at most
// two decimals, in any JSON spelling of such a number; maxDiscountAmount is
// an amount. Exactly one of discountAmount and discountPercent is given, and
// a cap only with a percentage.
func TestDecodeDiscountPercent(t *testing.T) {
	t.Parallel()
	const window = `"code":"P","totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"`
	accepted := []struct {
		body    string
		bp      int32
		maxDisc int64
	}{
		{`"discountPercent":20`, 2000, 0},
		{`"discountPercent":12.5`, 1250, 0},
		{`"discountPercent":12.50`, 1250, 0},
		{`"discountPercent":1`, 100, 0},
		{`"discountPercent":1.00`, 100, 0},
		{`"discountPercent":99.99`, 9999, 0},
		{`"discountPercent":100`, 10000, 0},
		{`"discountPercent":100.000`, 10000, 0},
		{`"discountPercent":1e2`, 10000, 0},
		{`"discountPercent":1250e-2`, 1250, 0},
		{`"discountPercent":0.0125e3`, 1250, 0},
		{`"discountPercent":33.33,"maxDiscountAmount":50000`, 3333, 50000},
		{`"discountPercent":5,"maxDiscountAmount":1000000000000000`, 500, voucher.MaxAmount},
	}
	for _, c := range accepted {
		var r createVoucherRequest
		require.NoError(t, r.decode([]byte(`{`+window+`,`+c.body+`}`), false), c.body)
		v, err := r.toVoucher()
		require.NoError(t, err, c.body)
		require.Equal(t, voucher.Discount{PercentBP: c.bp, MaxAmount: c.maxDisc}, v.Discount(), c.body)
	}

	const percentBounds = "field discountPercent must be a number from 1 to 100 with at most two decimals"
	for body, msg := range map[string]string{
		`"discountPercent":0.99`:                        percentBounds,
		`"discountPercent":0`:                           percentBounds,
		`"discountPercent":0.01`:                        percentBounds,
		`"discountPercent":-5`:                          percentBounds,
		`"discountPercent":100.01`:                      percentBounds,
		`"discountPercent":12.345`:                      percentBounds,
		`"discountPercent":1e400`:                       percentBounds,
		`"discountPercent":1e-400`:                      percentBounds,
		`"discountPercent":"20"`:                        "field discountPercent must be a number, not a string",
		`"discountPercent":null`:                        "field discountPercent must not be null",
		`"discountPercent":20,"maxDiscountAmount":0`:    "field maxDiscountAmount must be an integer from 1 to 1000000000000000",
		`"discountPercent":20,"maxDiscountAmount":1.5`:  "field maxDiscountAmount must be an integer from 1 to",
		`"discountPercent":20,"maxDiscountAmount":1e16`: "field maxDiscountAmount must be an integer from 1 to",
		`"discountPercent":20,"discountAmount":100`:     "discountAmount and discountPercent exclude each other",
		`"discountAmount":100,"maxDiscountAmount":100`:  "maxDiscountAmount applies to a discountPercent only",
		`"maxDiscountAmount":100`:                       "discountAmount or discountPercent is required",
		``:                                              "discountAmount or discountPercent is required",
		`"discountPercent":20,"discountPercent":30`:     "field discountPercent appears more than once",
		`"discountPercent":20,"MaxDiscountAmount":30`:   `unknown field "MaxDiscountAmount"`,
	} {
		body = `{` + window + `,` + body + `}`
		if strings.HasSuffix(body, ",}") {
			body = body[:len(body)-2] + "}"
		}
		var r createVoucherRequest
		err := r.decode([]byte(body), false)
		if err == nil {
			_, err = r.toVoucher()
		}
		require.ErrorContains(t, err, msg, body)
		require.Equal(t, voucher.CodeInvalidRequest, voucher.CodeOf(err), body)
	}

	// A patch may switch the kind: the fields reach the domain patch, which
	// decides (voucher.Patch.Apply).
	var r createVoucherRequest
	require.NoError(t, r.decode([]byte(`{"discountPercent":7.5,"maxDiscountAmount":900}`), true))
	p := r.toPatch()
	require.Equal(t, int32(750), *p.DiscountPercentBP)
	require.Equal(t, int64(900), *p.MaxDiscountAmount)
	require.Nil(t, p.DiscountAmount)
}

// parseScaled reads a number times 10^scale exactly, refusing what is not an
// integer after scaling or does not fit an int64.
func TestParseScaled(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]int64{
		"0": 0, "0.00": 0, "1": 100, "0.01": 1, "12.5": 1250, "-3.25": -325, "1e2": 10000, "125E-1": 1250,
		"92233720368547758.07": math.MaxInt64,
	} {
		got, ok := parseScaled([]byte(raw), 2)
		require.True(t, ok, raw)
		require.Equal(t, want, got, raw)
	}
	for _, raw := range []string{"0.001", "1.005", "92233720368547758.08", "1e18", "1e-3"} {
		_, ok := parseScaled([]byte(raw), 2)
		require.False(t, ok, raw)
	}
}

// parseScaled agrees with exact rational arithmetic on every JSON number.
func FuzzParseScaled(f *testing.F) {
	for _, s := range []string{"12.5", "0.01", "1e2", "-3.25", "1250e-2", "0.001", "92233720368547758.07", "100.000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := scanner{b: []byte(s)}
		v, err := d.number()
		if err != nil || d.i != len(s) || len(s) > 40 {
			return
		}
		if i := strings.IndexAny(s, "eE"); i >= 0 && len(s)-i > 4 {
			return // big.Rat would build the huge power; parseScaled bounds it
		}
		got, ok := parseScaled(v.raw, 2)
		r, okRat := new(big.Rat).SetString(s)
		require.True(t, okRat, s)
		r.Mul(r, big.NewRat(100, 1))
		want := r.IsInt() && r.Num().IsInt64()
		require.Equal(t, want, ok, s)
		if ok {
			require.Equal(t, r.Num().Int64(), got, s)
		}
	})
}
