package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/client"
)

// adminFake answers each request with a canned body and records what it was
// asked.
type adminFake struct {
	method, uri, body string
	answer            string
}

func (f *adminFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.method, f.uri, f.body = r.Method, r.URL.RequestURI(), string(b)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, f.answer)
}

func TestAdminCalls(t *testing.T) {
	t.Parallel()
	f := &adminFake{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "tok")
	ctx := context.Background()
	yes := true

	f.answer = `{"vouchers":[{"code":"A","active":true,"reserved":2}],"next":"c1"}`
	vp, err := c.ListVouchers(ctx, client.VoucherQuery{State: client.StateActive, FlashSale: &yes, CodePrefix: "A",
		Page: client.Page{Limit: 5, After: "c0"}})
	require.NoError(t, err)
	require.Equal(t, "GET /vouchers?after=c0&codePrefix=A&flashSale=true&limit=5&state=active", f.method+" "+f.uri)
	require.Equal(t, "c1", vp.Next)
	require.True(t, vp.Vouchers[0].Active)
	require.EqualValues(t, 2, vp.Vouchers[0].Reserved)

	f.answer = `{"reservations":[{"orderId":"o1","status":"RESERVED","discountAmount":1}],"next":""}`
	rp, err := c.ListReservations(ctx, "A", client.ReservationQuery{Status: client.StatusReserved, CustomerID: "7"})
	require.NoError(t, err)
	require.Equal(t, "GET /vouchers/A/reservations?customerId=7&status=RESERVED", f.method+" "+f.uri)
	require.Equal(t, "o1", rp.Reservations[0].OrderID)
	require.Empty(t, rp.Next)

	f.answer = `{"redemptions":[],"next":""}`
	_, err = c.CustomerRedemptions(ctx, "42", client.Page{})
	require.NoError(t, err)
	require.Equal(t, "GET /customers/42/redemptions", f.method+" "+f.uri)

	f.answer = `{"entries":[{"id":1,"code":"A","action":"create","keyName":"ops","at":"2026-12-03T00:00:00Z","before":null,"after":{"active":true}}],"next":""}`
	ap, err := c.Audit(ctx, "A", client.Page{Limit: 1})
	require.NoError(t, err)
	require.Equal(t, "GET /vouchers/A/audit?limit=1", f.method+" "+f.uri)
	require.Equal(t, "ops", ap.Entries[0].KeyName)
	require.JSONEq(t, `{"active":true}`, string(ap.Entries[0].After))

	f.answer = `{"code":"A","active":false}`
	v, err := c.Deactivate(ctx, "A")
	require.NoError(t, err)
	require.False(t, v.Active)
	require.Equal(t, "PATCH /vouchers/A", f.method+" "+f.uri)
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(f.body), &body))
	require.Equal(t, map[string]any{"active": false}, body)
	_, err = c.Activate(ctx, "A")
	require.NoError(t, err)
	require.JSONEq(t, `{"active":true}`, f.body)
}
