package kafkalog

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/voucher"
)

func sampleEvent(i int) voucher.ReservedEvent {
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC).Add(time.Duration(i) * time.Millisecond)
	return voucher.ReservedEvent{
		Version:        voucher.EventVersion,
		Code:           "FLASH100",
		CustomerID:     strconv.Itoa(1000 + i),
		OrderID:        "order-" + strings.Repeat("x", i%3) + itoa(i),
		OrderAmount:    250_000,
		DiscountAmount: 100_000,
		ReservedAt:     at,
		ExpiresAt:      at.Add(15 * time.Minute),
	}
}

func itoa(i int) string { return string(offsetString(int64(i))) }

func TestEventWireFormat(t *testing.T) {
	t.Parallel()
	e := sampleEvent(7)
	e.ReservedAt = e.ReservedAt.In(time.FixedZone("CET", 3600))
	raw, err := encodeEvent(e)
	require.NoError(t, err)

	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	require.Equal(t, map[string]any{
		"version":        float64(1),
		"type":           "VoucherReserved",
		"code":           "FLASH100",
		"customerId":     float64(1007),
		"orderId":        "order-x7",
		"orderAmount":    float64(250000),
		"discountAmount": float64(100000),
		"reservedAt":     "2026-12-01T10:00:00.130456789Z",
		"expiresAt":      "2026-12-01T10:15:00.130456789Z",
	}, fields, "camelCase fields, version and type in the value, times in UTC")

	got, err := decodeEvent(raw)
	require.NoError(t, err)
	require.True(t, got.ReservedAt.Equal(e.ReservedAt))
	e.ReservedAt, got.ReservedAt = time.Time{}, time.Time{}
	e.ExpiresAt, got.ExpiresAt = e.ExpiresAt.UTC(), got.ExpiresAt.UTC()
	require.Equal(t, e, got)
}

// A replacement is written as version 2 with replacesOrderId; a plain
// reservation stays version 1, which older consumers read.
func TestReplacementEventWireFormat(t *testing.T) {
	t.Parallel()
	e := sampleEvent(4)
	e.ReplacesOrderID = "order-old"
	raw, err := encodeEvent(e)
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	require.Equal(t, float64(2), fields["version"])
	require.Equal(t, "order-old", fields["replacesOrderId"])
	got, err := decodeEvent(raw)
	require.NoError(t, err)
	require.Equal(t, "order-old", got.ReplacesOrderID)
	require.Equal(t, voucher.EventVersionReplace, got.Version)

	// A chain that began earlier carries its start.
	e.HeldSince = e.ReservedAt.Add(-time.Minute)
	raw, err = encodeEvent(e)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"heldSince":"`)
	got, err = decodeEvent(raw)
	require.NoError(t, err)
	require.True(t, e.HeldSince.Equal(got.HeldSince))

	plain, err := encodeEvent(sampleEvent(4))
	require.NoError(t, err)
	require.NotContains(t, string(plain), "replacesOrderId")
	require.NotContains(t, string(plain), "heldSince")
	require.Contains(t, string(plain), `"version":1`)
}

// A use of a flash campaign is written as version 3 with its campaignCode,
// replacing or not; older consumers refuse it rather than write the use
// without its code.
func TestCampaignEventWireFormat(t *testing.T) {
	t.Parallel()
	for _, replaces := range []string{"", "order-old"} {
		e := sampleEvent(4)
		e.Code, e.CampaignCode, e.ReplacesOrderID = "cmp_0123456789AB", "WELCOME-7KQ4M2XH", replaces
		raw, err := encodeEvent(e)
		require.NoError(t, err)
		var fields map[string]any
		require.NoError(t, json.Unmarshal(raw, &fields))
		require.Equal(t, float64(3), fields["version"])
		require.Equal(t, "WELCOME-7KQ4M2XH", fields["campaignCode"])
		got, err := decodeEvent(raw)
		require.NoError(t, err)
		e.Version = voucher.EventVersionCampaign
		require.Equal(t, e, got)
		require.Equal(t, "WELCOME-7KQ4M2XH", got.Redemption().VoucherCode, "answered with its code")
	}
	plain, err := encodeEvent(sampleEvent(4))
	require.NoError(t, err)
	require.NotContains(t, string(plain), "campaignCode")
}

// A use taken in an occurrence of a voucher's windows is written as version
// 4 with its occurrence, whether it replaces an order or names a campaign
// code or not, and decodes to the same event.
func TestWindowEventWireFormat(t *testing.T) {
	t.Parallel()
	w := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct{ replaces, campaign string }{{"", ""}, {"order-old", ""}, {"", "WELCOME-7KQ4M2XH"}} {
		e := sampleEvent(4)
		e.Window, e.ReplacesOrderID = w, c.replaces
		if c.campaign != "" {
			e.Code, e.CampaignCode = "cmp_0123456789AB", c.campaign
		}
		raw, err := encodeEvent(e)
		require.NoError(t, err)
		var fields map[string]any
		require.NoError(t, json.Unmarshal(raw, &fields))
		require.Equal(t, float64(4), fields["version"])
		require.Equal(t, "2026-12-07T12:00:00Z", fields["window"])
		got, err := decodeEvent(raw)
		require.NoError(t, err)
		e.Version = voucher.EventVersionWindow
		require.Equal(t, e, got)
	}
}

// An event written by the release whose customerIds were integers (these
// bytes are what its encodeEvent wrote for sampleEvent(7)) decodes to the
// customer's decimal string.
func TestDecodeEventOfIntegerRelease(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/event-81f8d46.json")
	require.NoError(t, err)
	got, err := decodeEvent(raw)
	require.NoError(t, err)
	want := sampleEvent(7)
	require.Equal(t, "1007", got.CustomerID)
	require.True(t, got.ReservedAt.Equal(want.ReservedAt))
	got.ReservedAt, want.ReservedAt = time.Time{}, time.Time{}
	require.Equal(t, want, got)

	// This release writes that customer the same way, so a consumer of the
	// integer release reads its events during a rolling upgrade.
	again, err := encodeEvent(sampleEvent(7))
	require.NoError(t, err)
	require.JSONEq(t, string(raw), string(again))
}

// A string customerId travels as a JSON string, an integer one as a number.
func TestEventCustomerIDForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ id, wire string }{
		{"42", `42`},
		{"9223372036854775807", `9223372036854775807`},
		{"9223372036854775808", `"9223372036854775808"`},
		{"007", `"007"`},
		{"cus_9Xk:a.b-c@shop.example+x", `"cus_9Xk:a.b-c@shop.example+x"`},
	} {
		e := sampleEvent(1)
		e.CustomerID = tc.id
		raw, err := encodeEvent(e)
		require.NoError(t, err)
		var fields map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &fields))
		require.Equal(t, tc.wire, string(fields["customerId"]), tc.id)
		got, err := decodeEvent(raw)
		require.NoError(t, err)
		require.Equal(t, tc.id, got.CustomerID)
	}
	// JSON integers written another way are the same customer.
	for _, wire := range []string{`42.0`, `4.2e1`, `"42"`} {
		raw := strings.Replace(string(mustEncode(t, sampleEvent(1))), `"customerId":1001`, `"customerId":`+wire, 1)
		got, err := decodeEvent([]byte(raw))
		require.NoError(t, err, wire)
		require.Equal(t, "42", got.CustomerID, wire)
	}
}

func mustEncode(t *testing.T, e voucher.ReservedEvent) []byte {
	t.Helper()
	raw, err := encodeEvent(e)
	require.NoError(t, err)
	return raw
}

func TestDecodeEventRejects(t *testing.T) {
	t.Parallel()
	valid := func(edit func(m map[string]any)) []byte {
		raw, err := encodeEvent(sampleEvent(1))
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		edit(m)
		out, err := json.Marshal(m)
		require.NoError(t, err)
		return out
	}
	tests := []struct {
		name  string
		value []byte
		want  string
	}{
		{"not JSON", []byte("not json"), "invalid character"},
		{"empty", nil, "EOF"},
		{"trailing data", append(valid(func(map[string]any) {}), []byte(` {}`)...), "trailing data"},
		{"wrong type", valid(func(m map[string]any) { m["type"] = "VoucherReleased" }), `type "VoucherReleased"`},
		{"newer version", valid(func(m map[string]any) { m["version"] = 6 }), "unsupported event version 6"},
		{"version 4 without window", valid(func(m map[string]any) { m["version"] = 4 }), "window comes with version 4"},
		{"window in version 1", valid(func(m map[string]any) { m["window"] = m["reservedAt"] }), "window comes with version 4"},
		{"version 3 without campaignCode", valid(func(m map[string]any) { m["version"] = 3 }), "campaignCode comes with version 3"},
		{"version 5 without members", valid(func(m map[string]any) { m["version"] = 5 }), "members come with version 5"},
		{"campaignCode in version 1", valid(func(m map[string]any) { m["campaignCode"] = "K-1" }), "campaignCode comes with version 3"},
		{"bad campaignCode", valid(func(m map[string]any) { m["version"] = 3; m["campaignCode"] = "no spaces" }), "invalid campaignCode"},
		{"version 2 without replacesOrderId", valid(func(m map[string]any) { m["version"] = 2 }), "replacesOrderId comes with version 2"},
		{"replacesOrderId in version 1", valid(func(m map[string]any) { m["replacesOrderId"] = "old-1" }), "replacesOrderId comes with version 2"},
		{"heldSince without replacesOrderId", valid(func(m map[string]any) { m["heldSince"] = m["reservedAt"] }), "heldSince comes with replacesOrderId"},
		{"heldSince after reservedAt", valid(func(m map[string]any) {
			m["version"], m["replacesOrderId"], m["heldSince"] = 2, "old-1", m["expiresAt"]
		}), "heldSince comes with replacesOrderId"},
		{"replacing itself", valid(func(m map[string]any) { m["version"] = 2; m["replacesOrderId"] = m["orderId"] }), "invalid replacesOrderId"},
		{"no version", valid(func(m map[string]any) { delete(m, "version") }), "unsupported event version 0"},
		{"bad code", valid(func(m map[string]any) { m["code"] = "no spaces" }), "invalid code"},
		{"bad orderId", valid(func(m map[string]any) { m["orderId"] = "" }), "invalid orderId"},
		{"customer zero", valid(func(m map[string]any) { m["customerId"] = 0 }), "customerId"},
		{"negative customer", valid(func(m map[string]any) { m["customerId"] = -7 }), "customerId"},
		{"fractional customer", valid(func(m map[string]any) { m["customerId"] = 1.5 }), "customerId"},
		{"empty customer", valid(func(m map[string]any) { m["customerId"] = "" }), "customerId"},
		{"customer with a space", valid(func(m map[string]any) { m["customerId"] = "a b" }), "customerId"},
		{"customer too long", valid(func(m map[string]any) { m["customerId"] = strings.Repeat("c", 65) }), "customerId"},
		{"no customer", valid(func(m map[string]any) { delete(m, "customerId") }), "customerId"},
		{"negative amount", valid(func(m map[string]any) { m["orderAmount"] = -1 }), "orderAmount"},
		{"no discount", valid(func(m map[string]any) { delete(m, "discountAmount") }), "discountAmount is missing"},
		{"negative discount", valid(func(m map[string]any) { m["discountAmount"] = -1 }), "discountAmount"},
		{"no reservedAt", valid(func(m map[string]any) { delete(m, "reservedAt") }), "reservedAt"},
		{"expires before", valid(func(m map[string]any) { m["expiresAt"] = "2020-01-01T00:00:00Z" }), "expiresAt"},
		{"string amount", valid(func(m map[string]any) { m["orderAmount"] = "12" }), "cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := decodeEvent(tt.value)
			require.Error(t, err)
			require.True(t, errors.Is(err, errUndecodable))
			require.Contains(t, err.Error(), tt.want)
		})
	}

	// A newer producer may add fields; this build ignores them.
	_, err := decodeEvent(valid(func(m map[string]any) { m["channel"] = "app" }))
	require.NoError(t, err)
}

func FuzzDecodeEvent(f *testing.F) {
	raw, _ := encodeEvent(sampleEvent(3))
	f.Add(raw)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, value []byte) {
		e, err := decodeEvent(value)
		if err != nil {
			require.ErrorIs(t, err, errUndecodable)
			return
		}
		// Whatever decodes is a well-formed event that encodes and decodes
		// to itself.
		require.True(t, voucher.ValidCode(e.Code))
		require.True(t, voucher.ValidOrderID(e.OrderID))
		again, err := encodeEvent(e)
		require.NoError(t, err)
		back, err := decodeEvent(again)
		require.NoError(t, err)
		require.True(t, back.ReservedAt.Equal(e.ReservedAt))
		require.True(t, back.ExpiresAt.Equal(e.ExpiresAt))
		back.ReservedAt, back.ExpiresAt, e.ReservedAt, e.ExpiresAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		require.Equal(t, e, back)
	})
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Config{Brokers: []string{"127.0.0.1:9092"}}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultTopic, cfg.Topic)
	require.Equal(t, DefaultDeadLetterTopic, cfg.DeadLetterTopic)
	require.Equal(t, DefaultEventsTopic, cfg.EventsTopic)
	require.Equal(t, DefaultEventsBuffer, cfg.EventsBuffer)
	require.Equal(t, DefaultGroup, cfg.Group)
	require.Equal(t, int32(3), cfg.Partitions)
	require.Equal(t, int16(1), cfg.ReplicationFactor)
	require.Equal(t, 2*time.Second, cfg.ProduceTimeout)
	require.Equal(t, 5*time.Millisecond, cfg.Linger)
	require.Equal(t, int32(1), cfg.FetchMinBytes)
	require.Equal(t, 5*time.Second, cfg.FetchMaxWait)
	require.NotNil(t, cfg.Logger)

	cfg, err = Config{Brokers: []string{"b:1"}, Linger: -1}.withDefaults()
	require.NoError(t, err)
	require.Zero(t, cfg.Linger, "negative linger means none")

	bad := []struct {
		name string
		cfg  Config
	}{
		{"no brokers", Config{}},
		{"bad topic", Config{Brokers: []string{"b:1"}, Topic: "a topic"}},
		{"bad dlq", Config{Brokers: []string{"b:1"}, DeadLetterTopic: "x/y"}},
		{"same topics", Config{Brokers: []string{"b:1"}, Topic: "t", DeadLetterTopic: "t"}},
		{"bad events topic", Config{Brokers: []string{"b:1"}, EventsTopic: "a b"}},
		{"events topic is the topic", Config{Brokers: []string{"b:1"}, Topic: "t", EventsTopic: "t"}},
		{"negative partitions", Config{Brokers: []string{"b:1"}, Partitions: -1}},
		{"negative fetch min bytes", Config{Brokers: []string{"b:1"}, FetchMinBytes: -1}},
		{"fetch wait under 1ms", Config{Brokers: []string{"b:1"}, FetchMaxWait: time.Microsecond}},
		{"negative timeout", Config{Brokers: []string{"b:1"}, ProduceTimeout: -time.Second}},
		{"backoff above max", Config{Brokers: []string{"b:1"}, RetryBackoff: time.Minute}},
	}
	for _, tt := range bad {
		_, err := tt.cfg.withDefaults()
		require.Error(t, err, tt.name)
	}
}

// A percentage discount may round down to 0 on a small order: such an event
// decodes, and carries its computed discount unchanged.
func TestDecodeEventZeroDiscount(t *testing.T) {
	t.Parallel()
	e := sampleEvent(2)
	e.OrderAmount, e.DiscountAmount = 9, 0
	raw, err := encodeEvent(e)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"discountAmount":0`)
	got, err := decodeEvent(raw)
	require.NoError(t, err)
	require.Equal(t, int64(0), got.DiscountAmount)
	require.Equal(t, int64(9), got.OrderAmount)
}

// An event written before percentage discounts existed (same version, a
// fixed discount) decodes as it did.
func TestDecodeEventOfAFixedDiscount(t *testing.T) {
	t.Parallel()
	got, err := decodeEvent([]byte(`{"version":1,"type":"VoucherReserved","code":"FLASH100","customerId":7,"orderId":"o-1",` +
		`"orderAmount":250000,"discountAmount":100000,"reservedAt":"2026-12-01T10:00:00Z","expiresAt":"2026-12-01T10:15:00Z"}`))
	require.NoError(t, err)
	require.Equal(t, int64(100_000), got.DiscountAmount)
	require.Equal(t, int64(250_000), got.OrderAmount)
}

func TestStackEventWireFormat(t *testing.T) {
	t.Parallel()
	e := sampleEvent(3)
	e.Members = []voucher.StackEventMember{
		{Code: e.Code, CustomerID: e.CustomerID, OrderID: e.OrderID, OrderAmount: e.OrderAmount, DiscountAmount: e.DiscountAmount},
		{Code: "SECOND", CustomerID: "c-9", OrderID: voucher.StackMemberOrderID(e.OrderID, 2), OrderAmount: 150_000, DiscountAmount: 0},
	}
	e.StackCustomerID = "C-9"
	raw, err := encodeEvent(e)
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	require.Equal(t, float64(voucher.EventVersionStack), fields["version"])
	require.Len(t, fields["members"], 2)
	got, err := decodeEvent(raw)
	require.NoError(t, err)
	e.Version = voucher.EventVersionStack
	e.ReservedAt, e.ExpiresAt = e.ReservedAt.UTC(), e.ExpiresAt.UTC()
	got.ReservedAt, got.ExpiresAt = got.ReservedAt.UTC(), got.ExpiresAt.UTC()
	require.Equal(t, e, got)

	windowed := e
	start := e.ReservedAt.Truncate(time.Hour)
	windowed.Window = start
	windowed.Members = slices.Clone(e.Members)
	windowed.Members[0].Window = start
	windowed.Members[1].Window = start.Add(-time.Hour)
	rawWindowed, err := encodeEvent(windowed)
	require.NoError(t, err)
	got, err = decodeEvent(rawWindowed)
	require.NoError(t, err)
	require.Equal(t, voucher.EventVersionStack, got.Version)
	require.True(t, got.Window.Equal(start))
	require.True(t, got.Members[1].Window.Equal(start.Add(-time.Hour)))

	// A stack that replaces an order: version 5 with replacesOrderId (and
	// heldSince); a build whose version 5 refused the field dead-letters it.
	replacing := e
	replacing.ReplacesOrderID = "old-order"
	replacing.HeldSince = e.ReservedAt.Add(-time.Minute).UTC()
	rawReplacing, err := encodeEvent(replacing)
	require.NoError(t, err)
	got, err = decodeEvent(rawReplacing)
	require.NoError(t, err)
	require.Equal(t, voucher.EventVersionStack, got.Version)
	require.Equal(t, "old-order", got.ReplacesOrderID)
	require.True(t, got.HeldSince.Equal(replacing.HeldSince))

	bad := map[string]func(*wireEvent){
		"first member's window not the event's": func(w *wireEvent) { t := w.ReservedAt; w.Members[0].Window = &t },
		"members without version 5":             func(w *wireEvent) { w.Version = voucher.EventVersion },
		"version 5 without members":             func(w *wireEvent) { w.Members = nil },
		"first member not the event":            func(w *wireEvent) { w.Members[0].Code = "OTHER" },
		"repeated code":                         func(w *wireEvent) { w.Members[1].Code = w.Code },
		"member orderId":                        func(w *wireEvent) { w.Members[1].OrderID = "other" },
		"member discount missing":               func(w *wireEvent) { w.Members[1].DiscountAmount = nil },
		"stack customer missing":                func(w *wireEvent) { w.StackCustomerID = "" },
		"with a campaign code":                  func(w *wireEvent) { w.CampaignCode = "CAMPAIGN-1" },
		"replacing its own orderId":             func(w *wireEvent) { w.ReplacesOrderID = w.OrderID },
		"replacing its second member":           func(w *wireEvent) { w.ReplacesOrderID = w.Members[1].OrderID },
		"held since without a replacement":      func(w *wireEvent) { t := w.ReservedAt.Add(-time.Hour); w.HeldSince = &t },
		"six members": func(w *wireEvent) {
			for i := 2; i < 6; i++ {
				d := int64(0)
				w.Members = append(w.Members, wireMember{Code: "C" + strconv.Itoa(i), CustomerID: "1",
					OrderID: voucher.StackMemberOrderID(w.OrderID, i+1), DiscountAmount: &d})
			}
		},
	}
	for name, edit := range bad {
		var w wireEvent
		require.NoError(t, json.Unmarshal(raw, &w))
		edit(&w)
		b, err := json.Marshal(w)
		require.NoError(t, err)
		_, err = decodeEvent(b)
		require.ErrorIs(t, err, errUndecodable, name)
	}
}

// TestEncodeEventIsEncodingJSON checks that the appending encoder writes
// exactly what encoding/json writes for wireEvent, for every version, both
// customerId forms, times in other zones and at every precision, and that
// fields it cannot write take encoding/json's path (its escapes, its
// errors).
func TestEncodeEventIsEncodingJSON(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	var events []voucher.ReservedEvent
	for i := range 40 {
		e := sampleEvent(i)
		e.ReservedAt = e.ReservedAt.Truncate(time.Duration([]int64{1, 1e3, 1e6, 1e9}[i%4]))
		if i%5 == 1 {
			e.ReservedAt = e.ReservedAt.In(berlin)
		}
		if i%2 == 1 {
			e.CustomerID = "cus-" + strconv.Itoa(i) + "@shop.example"
		}
		if i%3 == 1 {
			e.ReplacesOrderID = "prev-" + strconv.Itoa(i)
			if i%2 == 0 {
				e.HeldSince = e.ReservedAt.Add(-time.Minute)
			}
		}
		if i%4 == 2 {
			e.CampaignCode = "CAMP-" + strconv.Itoa(i)
		}
		if i%7 == 3 {
			e.Window = time.Date(2026, 12, 1, 9, 0, 0, 0, berlin)
		}
		if i%11 == 4 {
			e.DiscountAmount = 0
		}
		events = append(events, e)
	}
	odd := sampleEvent(1)
	odd.Code = "A<B&C>"
	events = append(events, odd)
	old := sampleEvent(2)
	old.ReservedAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
	events = append(events, old)
	for i, e := range events {
		want, werr := marshalEvent(e)
		got, gerr := encodeEvent(e)
		require.Equal(t, werr == nil, gerr == nil, "event %d: %v / %v", i, werr, gerr)
		require.Equal(t, string(want), string(got), "event %d", i)
	}
	bad := sampleEvent(3)
	bad.CustomerID = "no spaces"
	_, err = encodeEvent(bad)
	require.ErrorContains(t, err, "invalid customerId")
}

func BenchmarkEncodeEvent(b *testing.B) {
	e := sampleEvent(7)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeEvent(e); err != nil {
			b.Fatal(err)
		}
	}
}
