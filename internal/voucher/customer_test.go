package voucher

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidCustomerID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"1", "42", "007", "9223372036854775808", "cus_9Xk", "a.b_c:d-e@f+g",
		"550e8400-e29b-41d4-a716-446655440000", "jane+shop@example.com", strings.Repeat("x", 64)} {
		require.True(t, ValidCustomerID(id), id)
	}
	for _, id := range []string{"", strings.Repeat("x", 65), "a b", "a/b", "a|b", "é", "a\x00", "a%40b", "-1 ", "\"x\""} {
		require.False(t, ValidCustomerID(id), id)
	}
}

func TestCustomerIDInteger(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]int64{"1": 1, "42": 42, "9223372036854775807": 1<<63 - 1} {
		n, ok := CustomerIDInteger(id)
		require.True(t, ok, id)
		require.Equal(t, want, n, id)
	}
	for _, id := range []string{"0", "007", "-1", "+1", "1.0", "1e3", "9223372036854775808", "99999999999999999999", "cus_1", ""} {
		_, ok := CustomerIDInteger(id)
		require.False(t, ok, id)
	}
}

// The e-mail normalisation: one mailbox, one customer.
func TestNormalizeEmailAddress(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"jane@example.com", "jane@example.com"},
		{"Jane@Example.COM", "jane@example.com"},
		{"jane+1@example.com", "jane@example.com"},
		{"jane+shop+2@example.com", "jane@example.com"},
		{"JANE+Promo@X.com", "jane@x.com"},
		{"j.a.n.e@example.com", "j.a.n.e@example.com"}, // dots count outside gmail
		{"j.a.n.e@gmail.com", "jane@gmail.com"},
		{"J.Ane+x@GMail.com", "jane@gmail.com"},
		{"jane@googlemail.com", "jane@gmail.com"}, // one mailbox service, two names
		{"ja.ne+tag@googlemail.com", "jane@gmail.com"},
		{"jane@mail.gmail.com", "jane@mail.gmail.com"}, // another domain
		{"jane@gmail.com.evil", "jane@gmail.com.evil"},
		{"+tag@example.com", "+tag@example.com"}, // the local part would be empty
		{"...@gmail.com", "...@gmail.com"},       // the local part would be empty
		{".+x@gmail.com", ".@gmail.com"},         // the tag goes, the dots would empty it
		{"CUS_42", "cus_42"},                     // not an address: lower case only
		{"42", "42"},                             // integers stay themselves
		{"a@b@c.com", "a@b@c.com"},               // not local@domain
		{"@example.com", "@example.com"},         // no local part
		{"jane@", "jane@"},                       // no domain
		{"Jane.Doe+a.b@Example.Org", "jane.doe@example.org"},
	}
	for _, tc := range tests {
		got := NormalizeEmailAddress(tc.in)
		require.Equal(t, tc.want, got, tc.in)
		require.True(t, ValidCustomerID(got), "%q normalises to a valid id", tc.in)
		require.Equal(t, got, NormalizeEmailAddress(got), "%q: normalising twice changes nothing", tc.in)
	}
	require.Equal(t, "Jane@X.com", NormalizeNone.Apply("Jane@X.com"))
	require.Equal(t, "Jane@X.com", CustomerIDNormalization("").Apply("Jane@X.com"))
	require.Equal(t, "jane@x.com", NormalizeEmail.Apply("Jane+1@X.com"))
}

// Whatever valid id goes in, a valid id comes out, no longer, and
// normalising again changes nothing.
func FuzzNormalizeEmailAddress(f *testing.F) {
	for _, s := range []string{"jane@example.com", "J.a+b@GoogleMail.com", "+@gmail.com", "a@b@c", "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if !ValidCustomerID(id) {
			return
		}
		got := NormalizeEmailAddress(id)
		require.True(t, ValidCustomerID(got))
		require.LessOrEqual(t, len(got), len(id))
		require.Equal(t, got, NormalizeEmailAddress(got))
	})
}

func TestParseCustomerIDJSON(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{`42`: "42", `42.0`: "42", `4.2e1`: "42", `"42"`: "42", `"007"`: "007",
		`"cus_1@x.io"`: "cus_1@x.io", `"\u0041"`: "A", `9223372036854775807`: "9223372036854775807"} {
		got, err := ParseCustomerIDJSON([]byte(raw))
		require.NoError(t, err, raw)
		require.Equal(t, want, got, raw)
		again, err := ParseCustomerIDJSON(AppendCustomerIDJSON(nil, got))
		require.NoError(t, err)
		require.Equal(t, got, again, raw)
	}
	for _, raw := range []string{`0`, `-1`, `1.5`, `""`, `"a b"`, `true`, `null`, `{}`, `9223372036854775808`, `1e400`} {
		_, err := ParseCustomerIDJSON([]byte(raw))
		require.Error(t, err, raw)
	}
}
