package voucher

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stackFakeStore is fakeStore holding at most one stack, stack, whose
// replay its ReserveStack answers (writes counts the calls).
type stackFakeStore struct {
	*fakeStore
	stack  *Stack
	writes int
}

func (s *stackFakeStore) StackOf(_ context.Context, orderID string) (string, bool, error) {
	if s.stack == nil || s.stack.OrderID != orderID {
		return "", false, nil
	}
	return orderID, true, nil
}

func (s *stackFakeStore) ReserveStack(_ context.Context, r StackRequest, _ time.Time, _ time.Duration) (Stack, error) {
	s.writes++
	if s.stack == nil || s.stack.OrderID != r.OrderID {
		return Stack{}, Errorf(CodeInternal, "this fake writes no new stack")
	}
	st := *s.stack
	st.Replay = true
	return st, nil
}

// In flash-sync mode a stack whose member's orderId the gate marks
// released is answered from the store, as a single is: the store's stack
// of the orderId by the store's own ReserveStack (a replay here), a single
// reservation of the customer's under the orderId ORDER_CONFLICT, a
// released row or none ORDER_RELEASED.
func TestStackOfAnOrderTheGateMarksReleased(t *testing.T) {
	t.Parallel()
	now := time.Now()
	row := Redemption{OrderID: "o-1", VoucherCode: "SALE", CustomerID: "7", OrderAmount: 100, DiscountAmount: 1,
		Status: StatusConfirmed, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
	released := row
	released.Status = StatusReleased
	stack := &Stack{OrderID: "o-1", CustomerID: "7", OrderAmount: 100, CreatedAt: now, Items: []StackItem{{Code: "SALE", Redemption: row}}}
	for _, tc := range []struct {
		name   string
		stack  *Stack
		rows   map[string]Redemption
		want   ErrorCode // "" for a replay
		writes int       // store ReserveStack calls
	}{
		{"a stack in the store", stack, map[string]Redemption{"o-1": row}, "", 1},
		{"a single of the customer's in the store", nil, map[string]Redemption{"o-1": row}, CodeOrderConflict, 0},
		{"a released single in the store", nil, map[string]Redemption{"o-1": released}, CodeOrderReleased, 0},
		{"nothing in the store", nil, nil, CodeOrderReleased, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &stackFakeStore{fakeStore: &fakeStore{voucher: flashVoucher(), rows: tc.rows}, stack: tc.stack}
			svc, err := NewService(ServiceConfig{Store: st, Gate: &fakeGate{decision: GateDecision{Outcome: GateReleased}},
				FlashWrites: FlashSync})
			require.NoError(t, err)
			got, err := svc.ReserveStack(context.Background(), StackRequest{CustomerID: "7", OrderID: "o-1", OrderAmount: 100, Codes: []string{"SALE"}})
			require.Equal(t, tc.writes, st.writes)
			if tc.want != "" {
				require.True(t, IsCode(err, tc.want), "%v", err)
				return
			}
			require.NoError(t, err)
			require.True(t, got.Replay)
			require.Equal(t, StatusConfirmed, got.Status())
		})
	}
}
