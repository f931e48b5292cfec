package voucher

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGuessLimiter(t *testing.T) {
	t.Parallel()
	l := guessLimiter{limit: 3, block: time.Minute, m: map[string]*guesser{}}
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		l.miss("1", t0.Add(time.Duration(i)*time.Second))
	}
	require.Zero(t, l.blocked("1", t0.Add(3*time.Second)), "at the limit, not past it")
	l.miss("1", t0.Add(4*time.Second))
	require.Equal(t, time.Minute, l.blocked("1", t0.Add(4*time.Second)))
	require.Zero(t, l.blocked("2", t0.Add(4*time.Second)), "other customers are not blocked")
	require.Zero(t, l.blocked("1", t0.Add(4*time.Second+time.Minute)), "the block ends")

	// A new window starts the count again.
	l.miss("3", t0)
	l.miss("3", t0)
	l.miss("3", t0)
	l.miss("3", t0.Add(time.Minute))
	require.Zero(t, l.blocked("3", t0.Add(time.Minute)))

	// Full: new customers are not tracked until entries end, and the
	// full map is walked at most once a second to find them.
	full := guessLimiter{limit: 3, block: time.Minute, m: map[string]*guesser{}}
	for i := range maxGuessers {
		full.miss(fmt.Sprint(i), t0)
	}
	full.miss("late", t0.Add(time.Second))
	require.NotContains(t, full.m, "late")
	require.Equal(t, t0.Add(time.Second), full.swept)
	full.miss("late2", t0.Add(1500*time.Millisecond))
	require.Equal(t, t0.Add(time.Second), full.swept, "not walked again within a second")
	full.miss("later", t0.Add(90*time.Second))
	require.Contains(t, full.m, "later", "the windows ended: swept")
	require.Len(t, full.m, 1)

	off := guessLimiter{limit: -1, m: map[string]*guesser{}}
	for range 100 {
		off.miss("1", t0)
	}
	require.Zero(t, off.blocked("1", t0))
	require.Empty(t, off.m)
}

// The guess limiter counts the spellings of one mailbox as one guesser,
// whatever the voucher (an unknown code has none) would normalise, with
// NormalizeEmailAddress's rule; ids that are not addresses count as they
// are, case included.
func TestGuessKeyFoldsEmailAddresses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		same bool
	}{
		{"Jane+1@x.com", "jane+2@x.com", true},
		{"Jane@X.com", "jane@x.com", true},
		{"jane+shop+2@example.com", "JANE@EXAMPLE.COM", true},
		{"j.a.n.e@gmail.com", "jane+promo@googlemail.com", true},
		{"j.a.n.e@example.com", "jane@example.com", false}, // dots count outside gmail
		{"jane@x.com", "john@x.com", false},
		{"jane@x.com", "jane@y.com", false},
		{"CUS_42", "cus_42", false}, // not an address: case counts
		{"42", "42", true},
		{"42", "042", false},
	}
	for _, tc := range tests {
		require.Equal(t, tc.same, guessKey(tc.a) == guessKey(tc.b), "%s / %s", tc.a, tc.b)
		if strings.Contains(tc.a, "@") {
			require.Equal(t, NormalizeEmailAddress(tc.a), guessKey(tc.a), "the one rule")
		} else {
			require.Equal(t, tc.a, guessKey(tc.a))
		}
	}

	// Through the service: three spellings of one mailbox guess, the
	// fourth is blocked; another mailbox is not.
	svc, err := NewService(ServiceConfig{Store: unknownCodes{}, UnknownCodeLimit: 2})
	require.NoError(t, err)
	ctx := context.Background()
	for i, id := range []string{"Jane+1@x.com", "jane+2@x.com", "JANE@X.COM"} {
		_, err := svc.Reserve(ctx, ReserveRequest{Code: "NOPE", CustomerID: id, OrderID: fmt.Sprint("o-", i), OrderAmount: 1})
		require.True(t, IsCode(err, CodeVoucherNotFound), "%s: %v", id, err)
	}
	_, err = svc.Validate(ctx, ValidateRequest{Code: "NOPE", CustomerID: "jane+9@x.com", OrderAmount: 1})
	require.True(t, IsCode(err, CodeTooManyRequests), "%v", err)
	_, err = svc.Reserve(ctx, ReserveRequest{Code: "NOPE", CustomerID: "john@x.com", OrderID: "o-john", OrderAmount: 1})
	require.True(t, IsCode(err, CodeVoucherNotFound), "%v", err)
}

// unknownCodes is a store in which no code exists.
type unknownCodes struct{ Store }

func (unknownCodes) Voucher(_ context.Context, code string) (Voucher, error) {
	return Voucher{}, Reject(CodeVoucherNotFound, "", Facts{Voucher: code})
}

func (u unknownCodes) VoucherDefinition(ctx context.Context, code string) (Voucher, error) {
	return u.Voucher(ctx, code)
}

func (u unknownCodes) ResolveCode(ctx context.Context, code, orderID string) (Resolution, error) {
	return resolveByReads(ctx, u, nil, code, orderID)
}

// A fresh customerId per request does not escape the limit: the client
// address and the API key are counted too.
func TestGuessLimitCountsClientAndKey(t *testing.T) {
	t.Parallel()
	s := &Service{deps: &deps{cfg: ServiceConfig{Clock: time.Now}}}
	s.guess = guessLimiter{limit: 3, block: time.Minute, m: map[string]*guesser{}}
	s.guessByClient = guessLimiter{limit: 5, block: time.Minute, m: map[string]*guesser{}}
	s.guessByKey = guessLimiter{limit: 8, block: time.Minute, m: map[string]*guesser{}}
	notFound := Errorf(CodeVoucherNotFound, "no")
	who := Requester{Key: "checkout", Client: "203.0.113.9"}
	for i := 0; i < 6; i++ {
		c := strconv.Itoa(i)
		require.NoError(t, s.guessCheck(c, who), "miss %d", i)
		s.guessNoted(c, who, notFound)
	}
	err := s.guessCheck("fresh", who)
	require.True(t, IsCode(err, CodeTooManyRequests))
	require.Contains(t, err.Error(), "client address")
	other := Requester{Key: "checkout", Client: "198.51.100.7"}
	require.NoError(t, s.guessCheck("fresh", other), "another client of the same key")
	for i := 0; i < 3; i++ {
		s.guessNoted("f"+strconv.Itoa(i), other, notFound)
	}
	err = s.guessCheck("fresh", Requester{Key: "checkout", Client: "192.0.2.1"})
	require.True(t, IsCode(err, CodeTooManyRequests), "the key is past its limit")
	require.Contains(t, err.Error(), "API key")
	require.NoError(t, s.guessCheck("fresh", Requester{}), "no requester: the customer alone counts")
}
