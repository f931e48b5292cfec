package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// rawRequest sends a request with exactly the given headers and body.
func (s *stack) rawRequest(method, path string, header map[string]string, body string) response {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	require.NoError(s.t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	if resp.StatusCode != http.StatusMethodNotAllowed && resp.StatusCode != http.StatusNotFound {
		// Those two answer requests the description has no operation for.
		checkAgainstOpenAPI(s.t, req, resp.StatusCode, resp.Header, raw)
	}
	out := response{status: resp.StatusCode, raw: raw, header: resp.Header}
	if len(raw) > 0 && raw[0] == '{' {
		require.NoError(s.t, json.Unmarshal(raw, &out.body), string(raw))
	}
	return out
}

// TestAPIStrictRequests: what the README says the API rejects is rejected
// with a clear 4xx and changes nothing, and what JSON and HTTP allow is
// accepted.
func TestAPIStrictRequests(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	code := s.createVoucher(voucherSpec{TotalLimit: 100})
	path := "/vouchers/" + code + "/reservations"
	api := map[string]string{"Authorization": "Bearer " + testAPIToken, "Content-Type": "application/json"}
	with := func(k, v string) map[string]string {
		h := map[string]string{}
		for hk, hv := range api {
			h[hk] = hv
		}
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
		return h
	}
	refused := []struct {
		name   string
		header map[string]string
		body   string
		status int
		err    string
		msg    string
	}{
		{"duplicate key", api, `{"customerId":1,"customerId":2,"orderId":"s1","orderAmount":5000}`, 400, "INVALID_REQUEST", "customerId appears more than once"},
		{"name in another case", api, `{"customerId":4,"CUSTOMERID":5,"orderId":"s2","orderAmount":5000}`, 400, "INVALID_REQUEST", `unknown field "CUSTOMERID"`},
		{"null", api, `{"customerId":null,"orderId":"s3","orderAmount":5000}`, 400, "INVALID_REQUEST", "customerId must not be null"},
		{"array body", api, `[]`, 400, "INVALID_REQUEST", "request body must be a JSON object"},
		{"fraction", api, `{"customerId":1.5,"orderId":"s4","orderAmount":5000}`, 400, "INVALID_REQUEST", "customerId must be a string of 1-64 characters of A-Z a-z 0-9 . _ : - @ +, or an integer from 1 to"},
		{"amount too large", api, `{"customerId":1,"orderId":"s5","orderAmount":9223372036854775807}`, 400, "INVALID_REQUEST", "orderAmount must be an integer from 0 to 1000000000000000"},
		{"no Content-Type", with("Content-Type", ""), `{"customerId":1,"orderId":"s6","orderAmount":5000}`, 415, "UNSUPPORTED_MEDIA_TYPE", "application/json"},
		{"Content-Type jsonp", with("Content-Type", "application/jsonp"), `{"customerId":1,"orderId":"s7","orderAmount":5000}`, 415, "UNSUPPORTED_MEDIA_TYPE", "application/json"},
		{"Content-Type text", with("Content-Type", "text/plain"), `{"customerId":1,"orderId":"s8","orderAmount":5000}`, 415, "UNSUPPORTED_MEDIA_TYPE", "application/json"},
		{"another scheme", with("Authorization", "Basic "+testAPIToken), `{"customerId":1,"orderId":"s9","orderAmount":5000}`, 401, "UNAUTHORIZED", "bearer"},
	}
	for _, c := range refused {
		r := s.rawRequest(http.MethodPost, path, c.header, c.body)
		require.Equal(t, c.status, r.status, "%s: %s", c.name, r.raw)
		require.Equal(t, c.err, r.str("error"), c.name)
		require.Contains(t, r.str("message"), c.msg, c.name)
		require.NotContains(t, r.str("message"), "httpapi.", c.name)
	}
	st := s.state(code)
	require.Zero(t, st.usedCount+st.reserved+st.released, "a refused request changed the voucher")

	accepted := []struct {
		name   string
		header map[string]string
		body   string
	}{
		{"integral 1.0", api, `{"customerId":1.0,"orderId":"a1","orderAmount":5e3}`},
		{"Content-Type in capitals", with("Content-Type", "APPLICATION/JSON"), `{"customerId":2,"orderId":"a2","orderAmount":5000}`},
		{"Content-Type with charset", with("Content-Type", "application/json; charset=UTF-8"), `{"customerId":3,"orderId":"a3","orderAmount":5000}`},
		{"bearer in lower case", with("Authorization", "bearer "+testAPIToken), `{"customerId":4,"orderId":"a4","orderAmount":5000}`},
		{"BEARER in capitals", with("Authorization", "BEARER "+testAPIToken), `{"customerId":5,"orderId":"a5","orderAmount":5000}`},
	}
	for _, c := range accepted {
		r := s.rawRequest(http.MethodPost, path, c.header, c.body)
		require.Equal(t, http.StatusCreated, r.status, "%s: %s", c.name, r.raw)
	}
	r := s.do(http.MethodGet, "/vouchers/"+code+"/reservations/a1", nil)
	require.EqualValues(t, 1, r.num("customerId"))
	require.EqualValues(t, 5000, r.num("orderAmount"))
	require.Equal(t, 5, s.state(code).usedCount)
	s.assertConsistent(code)

	admin := map[string]string{"Authorization": "Bearer " + testAdminToken, "Content-Type": "application/json"}
	for name, body := range map[string]string{
		"discount 2^63-1":    `{"code":"X1","discountAmount":9223372036854775807,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`,
		"minimum 2^63-1":     `{"code":"X2","discountAmount":1,"minOrderAmount":9223372036854775807,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`,
		"year 0000":          `{"code":"X3","discountAmount":1,"totalLimit":1,"startsAt":"0000-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`,
		"null integer":       `{"code":"X4","discountAmount":1,"totalLimit":1,"perUserLimit":null,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`,
		"null boolean":       `{"code":"X5","discountAmount":1,"totalLimit":1,"flashSale":null,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`,
		"duplicate code key": `{"code":"X6","code":"X7","discountAmount":1,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`,
	} {
		r := s.rawRequest(http.MethodPost, "/vouchers", admin, body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", name, r.raw)
		require.Equal(t, "INVALID_REQUEST", r.str("error"), name)
	}
	for name, body := range map[string]string{"null": `{"totalLimit":null}`, "2^63-1": `{"minOrderAmount":9223372036854775807}`} {
		r := s.rawRequest(http.MethodPatch, "/vouchers/"+code, admin, body)
		require.Equal(t, http.StatusBadRequest, r.status, "PATCH %s: %s", name, r.raw)
	}
	r = s.rawRequest(http.MethodGet, "/vouchers/X1", with("Content-Type", ""), "")
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.raw)
}

// TestAPIMethodNotAllowed: a method a route does not have is 405 with Allow,
// a path that is no route 404.
func TestAPIMethodNotAllowed(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	code := s.createVoucher(voucherSpec{})
	auth := map[string]string{"Authorization": "Bearer " + testAdminToken}
	for path, allow := range map[string]string{
		"/vouchers":                                     "GET, HEAD, POST",
		"/vouchers/" + code:                             "GET, HEAD, PATCH",
		"/vouchers/" + code + "/warmup":                 "POST",
		"/vouchers/" + code + "/reservations":           "GET, HEAD, POST",
		"/vouchers/" + code + "/reservations/o1":        "GET, HEAD, DELETE",
		"/vouchers/" + code + "/reservations/o1/extend": "POST",
		"/healthz": "GET, HEAD",
	} {
		for _, m := range []string{http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodGet, http.MethodPost} {
			if strings.Contains(allow, m) {
				continue
			}
			r := s.rawRequest(m, path, auth, "")
			require.Equal(t, http.StatusMethodNotAllowed, r.status, "%s %s: %s", m, path, r.raw)
			require.Equal(t, allow, r.header.Get("Allow"), "%s %s", m, path)
			require.Equal(t, "METHOD_NOT_ALLOWED", r.str("error"))
		}
	}
	r := s.rawRequest(http.MethodGet, "/nothing/here", auth, "")
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "NOT_FOUND", r.str("error"))
}
