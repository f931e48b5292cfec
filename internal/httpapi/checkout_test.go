package httpapi

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

func TestReserveAndValidationBodies(t *testing.T) {
	t.Parallel()
	decode := func(body string) reserveRequest {
		var r reserveRequest
		require.NoError(t, r.decode([]byte(body)), body)
		return r
	}
	req, err := decode(`{"customerId":1,"orderId":"b","orderAmount":5,"replacesOrderId":"a"}`).toDomain("C")
	require.NoError(t, err)
	require.Equal(t, "a", req.ReplacesOrderID)

	_, err = decode(`{"customerId":1,"orderId":"a","orderAmount":5,"replacesOrderId":"a"}`).toDomain("C")
	require.True(t, voucher.IsCode(err, voucher.CodeInvalidRequest), "replacing itself")
	var r reserveRequest
	require.Error(t, r.decode([]byte(`{"customerId":1,"orderId":"a","orderAmount":5,"replacesOrderId":""}`)))

	v, err := decode(`{"customerId":1,"orderAmount":5}`).toValidation("C")
	require.NoError(t, err)
	require.Equal(t, voucher.ValidateRequest{Code: "C", CustomerID: "1", OrderAmount: 5}, v)
	v, err = decode(`{"customerId":1,"orderAmount":5,"orderId":"o"}`).toValidation("C")
	require.NoError(t, err)
	require.Equal(t, "o", v.OrderID)
	for _, body := range []string{
		`{"orderAmount":5}`,
		`{"customerId":1}`,
		`{"customerId":1,"orderAmount":5,"orderId":""}`,
		`{"customerId":1,"orderAmount":5,"replacesOrderId":"x"}`,
	} {
		_, err := decode(body).toValidation("C")
		require.True(t, voucher.IsCode(err, voucher.CodeInvalidRequest), body)
	}
}
