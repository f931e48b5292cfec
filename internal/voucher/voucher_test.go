package voucher

import (
	"strings"
	"testing"
	"time"
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

func TestValidateNewRefusesAnEndedWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2027, 1, 15, 12, 0, 0, 0, time.UTC)
	base := Voucher{Code: "V1", DiscountAmount: 100, TotalLimit: 10, PerUserLimit: 1,
		StartsAt: now.Add(-48 * time.Hour)}
	tests := []struct {
		name   string
		endsAt time.Time
		ok     bool
	}{
		{"ends tomorrow", now.Add(24 * time.Hour), true},
		{"ends in a nanosecond", now.Add(time.Nanosecond), true},
		{"ends now", now, false},
		{"ended an hour ago", now.Add(-time.Hour), false},
		{"ended a day ago", now.Add(-24 * time.Hour), false},
	}
	for _, tc := range tests {
		v := base
		v.EndsAt = tc.endsAt
		err := v.ValidateNew(now)
		patchErr := Patch{EndsAt: &tc.endsAt}.Validate(now)
		if tc.ok {
			if err != nil || patchErr != nil {
				t.Errorf("%s: ValidateNew = %v, Patch.Validate = %v, want both nil", tc.name, err, patchErr)
			}
			continue
		}
		for _, e := range []error{err, patchErr} {
			if CodeOf(e) != CodeInvalidRequest || !strings.Contains(e.Error(), "already past") {
				t.Errorf("%s: got %v, want INVALID_REQUEST saying the endsAt is already past", tc.name, e)
			}
		}
	}
	// Field errors still come first, and a patch that leaves endsAt alone
	// passes whatever the window.
	bad := base
	bad.TotalLimit = 0
	bad.EndsAt = now.Add(-time.Hour)
	if err := bad.ValidateNew(now); err == nil || !strings.Contains(err.Error(), "totalLimit") {
		t.Errorf("ValidateNew of a zero totalLimit = %v", err)
	}
	limit := int32(5)
	if err := (Patch{TotalLimit: &limit}).Validate(now); err != nil {
		t.Errorf("a patch without endsAt: %v", err)
	}
}

func TestStackingValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   Stacking
		ok   bool
	}{
		{"not stackable", Stacking{}, true},
		{"stackable", Stacking{Stackable: true}, true},
		{"a group", Stacking{Stackable: true, ExclusiveGroup: "seasonal sale é"}, true},
		{"longest group", Stacking{Stackable: true, ExclusiveGroup: strings.Repeat("g", MaxExclusiveGroupLen)}, true},
		{"group too long", Stacking{Stackable: true, ExclusiveGroup: strings.Repeat("g", MaxExclusiveGroupLen+1)}, false},
		{"group without stacking", Stacking{ExclusiveGroup: "g"}, false},
		{"NUL byte", Stacking{Stackable: true, ExclusiveGroup: "&n\x00\x03"}, false},
		{"control character", Stacking{Stackable: true, ExclusiveGroup: "a\tb"}, false},
		{"C1 control character", Stacking{Stackable: true, ExclusiveGroup: "a\u0085b"}, false},
		{"not UTF-8", Stacking{Stackable: true, ExclusiveGroup: "a\xffb"}, false},
	}
	for _, tc := range tests {
		err := tc.in.Validate()
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && !IsCode(err, CodeInvalidRequest) {
			t.Errorf("%s: got %v, want INVALID_REQUEST", tc.name, err)
		}
	}
}
