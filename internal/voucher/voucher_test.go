package voucher

import (
	"strings"
	"testing"
)

func TestValidCodeAndOrderID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in            string
		code, orderID bool
	}{
		{"FLASH100", true, true},
		{"a_b-C9", true, true},
		{"order.42:x", false, true},
		{"", false, false},
		{strings.Repeat("A", 32), true, true},
		{strings.Repeat("A", 33), false, true},
		{strings.Repeat("A", 64), false, true},
		{strings.Repeat("A", 65), false, false},
		{"has space", false, false},
		{"slash/", false, false},
		{"percent%20", false, false},
		{"é", false, false},
		{"nul\x00", false, false},
	}
	for _, tc := range tests {
		if got := ValidCode(tc.in); got != tc.code {
			t.Errorf("ValidCode(%q) = %v, want %v", tc.in, got, tc.code)
		}
		if got := ValidOrderID(tc.in); got != tc.orderID {
			t.Errorf("ValidOrderID(%q) = %v, want %v", tc.in, got, tc.orderID)
		}
	}
}
