package faults

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voucherd/voucherd/internal/conformance"
	"github.com/voucherd/voucherd/internal/voucher"
)

// modelOutcome is an answer of the conformance table as the fault client
// records it: HELD_OUT is the same refusal as OUT_OF_STOCK for the model.
func modelOutcome(code voucher.ErrorCode) Outcome {
	switch code {
	case "":
		return OK
	case voucher.CodeHeldOut:
		return OutOfStock
	}
	return Outcome(code)
}

// The fault suite's model expects, for every case of the rule it covers,
// the answer of the conformance table, and takes a use exactly when the
// table does.
func TestConformanceModel(t *testing.T) {
	t.Parallel()
	for _, c := range conformance.Cases {
		if c.Skips(conformance.Model) != "" {
			continue
		}
		m := &Model{spec: VoucherSpec{Code: "CF", TotalLimit: int(c.Voucher.TotalLimit), PerUserLimit: int(c.Voucher.PerUserLimit)}, strict: true}
		if c.Voucher.Campaign {
			m.nCode = conformance.CampaignCodes
		}
		cust, order := map[string]int{}, map[string]int{}
		input := func(kind Kind, customer string, o string, codeIndex int) modelInput {
			in := modelInput{kind: kind, cust: -1}
			if kind == Reserve && c.Voucher.Campaign {
				in.code = codeIndex + 1
			}
			if _, ok := order[o]; !ok {
				order[o] = len(m.order)
				m.order = append(m.order, o)
			}
			in.order = order[o]
			if kind == Reserve {
				if _, ok := cust[customer]; !ok {
					cust[customer] = len(m.custID)
					m.custID = append(m.custID, customer)
				}
				in.cust = cust[customer]
			}
			return in
		}
		// Indexes first: the state's size is fixed by them.
		var steps, reqs []modelInput
		for _, st := range c.Before {
			kind := map[conformance.StepKind]Kind{conformance.StepReserve: Reserve,
				conformance.StepRelease: Release, conformance.StepConfirm: Confirm}[st.Kind]
			steps = append(steps, input(kind, st.Customer, st.Order, st.CodeIndex))
		}
		for _, r := range c.Requests {
			reqs = append(reqs, input(Reserve, r.Customer, r.Order, r.CodeIndex))
		}
		m.nCust, m.nOrder = len(m.custID), len(m.order)

		s := m.init()
		for k, in := range steps {
			var want Outcome
			switch in.kind {
			case Reserve:
				want, _, s = m.expectReserve(s, in)
			case Release:
				want, s = m.expectRelease(s, in)
			case Confirm:
				want, s = m.expectConfirm(s, in)
			}
			require.Equal(t, OK, want, "%s: step %d", c.Name, k)
		}
		for j, in := range reqs {
			w := c.Want[j]
			want, alt, next := m.expectReserve(s, in)
			require.Equal(t, modelOutcome(w.Code), want, "%s: request %d (%s)", c.Name, j, w)
			if w.Or != "" {
				require.Equal(t, modelOutcome(w.Or), alt, "%s: request %d (%s)", c.Name, j, w)
			}
			took := w.Code == "" && !w.Replay
			require.Equal(t, took, next != s, "%s: request %d takes a use exactly when the rule does", c.Name, j)
			ok, _ := m.step(s, in, modelOutput{want})
			require.True(t, ok, "%s: request %d", c.Name, j)
			s = next
		}
	}
}
