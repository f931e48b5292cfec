package faults

import (
	"fmt"
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

// caseModel builds the model of one conformance case: the voucher (or
// campaign) and dense indexes for its customers and orders.
type caseModel struct {
	m        *Model
	campaign bool
	cust     map[string]int
	order    map[string]int
}

func newCaseModel(v conformance.VoucherSpec) *caseModel {
	cm := &caseModel{m: &Model{spec: VoucherSpec{Code: "CF", TotalLimit: int(v.TotalLimit), PerUserLimit: int(v.PerUserLimit)}, strict: true},
		campaign: v.Campaign, cust: map[string]int{}, order: map[string]int{}}
	if v.Campaign {
		cm.m.nCode = conformance.CampaignCodes
	}
	return cm
}

func (cm *caseModel) orderIndex(o string) int {
	if _, ok := cm.order[o]; !ok {
		cm.order[o] = len(cm.m.order)
		cm.m.order = append(cm.m.order, o)
	}
	return cm.order[o]
}

func (cm *caseModel) input(kind Kind, customer string, o string, codeIndex int) modelInput {
	m := cm.m
	in := modelInput{kind: kind, cust: -1}
	if kind == Reserve && cm.campaign {
		in.code = codeIndex + 1
	}
	in.order = cm.orderIndex(o)
	if kind == Reserve {
		if _, ok := cm.cust[customer]; !ok {
			cm.cust[customer] = len(m.custID)
			m.custID = append(m.custID, customer)
		}
		in.cust = cm.cust[customer]
	}
	return in
}

// steps turns the case's steps into inputs.
func (cm *caseModel) steps(before []conformance.Step) []modelInput {
	var out []modelInput
	for _, st := range before {
		kind := map[conformance.StepKind]Kind{conformance.StepReserve: Reserve,
			conformance.StepRelease: Release, conformance.StepConfirm: Confirm}[st.Kind]
		out = append(out, cm.input(kind, st.Customer, st.Order, st.CodeIndex))
	}
	return out
}

// init fixes the state's size (call it once every index is known) and
// runs the steps, each of which must succeed.
func (cm *caseModel) init(t *testing.T, name string, steps []modelInput) modelState {
	m := cm.m
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
		require.Equal(t, OK, want, "%s: step %d", name, k)
	}
	return s
}

// ask checks the model's answer to one request against the table's and
// returns the state after it.
func (cm *caseModel) ask(t *testing.T, s modelState, in modelInput, w conformance.Answer, what string) modelState {
	m := cm.m
	want, alt, next := m.expectReserve(s, in)
	require.Equal(t, modelOutcome(w.Code), want, "%s (%s)", what, w)
	if w.Or != "" {
		require.Equal(t, modelOutcome(w.Or), alt, "%s (%s)", what, w)
	}
	took := w.Code == "" && !w.Replay
	require.Equal(t, took, next != s, "%s takes a use exactly when the rule does", what)
	ok, _ := m.step(s, in, modelOutput{want})
	require.True(t, ok, what)
	return next
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
		cm := newCaseModel(c.Voucher)
		// Indexes first: the state's size is fixed by them.
		steps := cm.steps(c.Before)
		var reqs []modelInput
		for _, r := range c.Requests {
			reqs = append(reqs, cm.input(Reserve, r.Customer, r.Order, r.CodeIndex))
		}
		s := cm.init(t, c.Name, steps)
		for j, in := range reqs {
			s = cm.ask(t, s, in, c.Want[j], fmt.Sprintf("%s: request %d", c.Name, j))
		}
	}
}

// The model answers every replacement case it covers as the conformance
// table does: the replacement, then the plain reservations after it (the
// replaced order released, the use still held, none freed), and a
// replacement moves neither the uses left nor the customer's count.
func TestConformanceReplaceModel(t *testing.T) {
	t.Parallel()
	ran := 0
	for _, c := range conformance.ReplaceCases {
		if c.Skips(conformance.Model) != "" {
			continue
		}
		ran++
		cm := newCaseModel(c.Voucher)
		steps := cm.steps(c.Before)
		var reqs, after []modelInput
		for _, r := range c.Requests {
			in := cm.input(Reserve, r.Customer, r.Order, r.CodeIndex)
			in.replaces = cm.orderIndex(r.Replaces) + 1
			reqs = append(reqs, in)
		}
		for _, r := range c.After {
			after = append(after, cm.input(Reserve, r.Customer, r.Order, r.CodeIndex))
		}
		s := cm.init(t, c.Name, steps)
		for j, in := range reqs {
			next := cm.ask(t, s, in, c.Want[j], fmt.Sprintf("%s: replacement %d", c.Name, j))
			require.Equal(t, s.remaining, next.remaining, "%s: a replacement takes no use from the stock", c.Name)
			require.Equal(t, s.cust, next.cust, "%s: a replacement leaves the customer's count", c.Name)
			s = next
		}
		for j, in := range after {
			s = cm.ask(t, s, in, c.WantAfter[j], fmt.Sprintf("%s: request %d after", c.Name, j))
		}
	}
	require.Positive(t, ran)
}
