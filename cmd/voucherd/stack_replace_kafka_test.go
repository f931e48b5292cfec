package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStackReplacementKafkaRefused: in Kafka mode a replacement of
// several codes with a flash-sale voucher on either side is refused with
// 422 NOT_ELIGIBLE, reason NOT_STACKABLE, naming the flash code, and
// changes nothing (docs/stacks.md: the move would need the pending holds
// and the consumer's replacement of a stack).
func TestStackReplacementKafkaRefused(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{kafka: true})
	flash := s.createStackable(map[string]any{"discountAmount": 100}, 10, stackable)
	std := s.createStackable(map[string]any{"discountAmount": 100, "flashSale": false}, 10, stackable)
	std2 := s.createStackable(map[string]any{"discountAmount": 100, "flashSale": false}, 10, stackable)
	replace := func(orderID, replaces string, codes ...string) response {
		return s.do(http.MethodPost, "/reservations", map[string]any{"customerId": "7", "orderId": orderID,
			"orderAmount": 20000, "codes": codes, "replacesOrderId": replaces})
	}

	// A flash single replaced by a stack of standard vouchers.
	r := s.reserve(flash, 7, "kr-flash", 20000)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	s.settle(flash, 1)
	r = replace("kr-1", "kr-flash", std, std2)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.Equal(t, "NOT_STACKABLE", r.str("reason"), string(r.raw))
	require.Equal(t, flash, r.str("failedCode"))

	// A standard single replaced by a stack naming a flash voucher.
	r = s.reserve(std, 7, "kr-std", 20000)
	require.Equal(t, http.StatusCreated, r.status, string(r.raw))
	r = replace("kr-2", "kr-std", std, flash)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.Equal(t, "NOT_STACKABLE", r.str("reason"), string(r.raw))
	require.Equal(t, flash, r.str("failedCode"))

	require.Equal(t, 1, s.state(flash).usedCount, "nothing changed")
	require.Equal(t, 1, s.state(std).usedCount, "nothing changed")
	require.Zero(t, s.state(std2).usedCount)
	r = s.do(http.MethodGet, "/vouchers/"+flash+"/reservations/kr-flash", nil)
	require.Equal(t, "RESERVED", r.str("status"), string(r.raw))
	r = s.do(http.MethodGet, "/vouchers/"+std+"/reservations/kr-std", nil)
	require.Equal(t, "RESERVED", r.str("status"), string(r.raw))
}
