package catalog

import (
	"slices"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/worktype"
)

// WorkTypes lists the work types the registered agents offer, by agent type
// and name, with what they declare of each (api.WorkType). required reports
// whether the orchestrator's config makes every task of a work type wait for
// approval (work_types.<name>.approval).
func (s *Snapshot) WorkTypes(required func(workType string) bool) []api.WorkType {
	type key struct {
		typ  envelope.AgentType
		name string
	}
	byKey := map[key]*workTypeView{}
	for _, id := range s.ids() {
		a := s.Agent(id)
		for _, name := range a.Offers {
			v := byKey[key{a.Type, name}]
			if v == nil {
				v = &workTypeView{WorkType: api.WorkType{AgentType: a.Type, Name: name}}
				byKey[key{a.Type, name}] = v
			}
			v.add(a, id, name)
		}
	}
	out := make([]api.WorkType, 0, len(byKey))
	for _, v := range byKey {
		wt := v.WorkType
		for _, d := range v.variants {
			wt.Variants = append(wt.Variants, api.WorkTypeVariant{Spec: d.Spec, Agents: d.agents})
		}
		if len(wt.Variants) > 0 {
			wt.Spec = wt.Variants[0].Spec
		}
		if len(wt.Variants) == 1 {
			wt.Variants = nil
		}
		wt.Approval = ""
		if required(wt.Name) {
			wt.Approval = worktype.ApprovalRequired
		}
		out = append(out, wt)
	}
	slices.SortFunc(out, func(a, b api.WorkType) int {
		if a.AgentType != b.AgentType {
			return strings.Compare(string(a.AgentType), string(b.AgentType))
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// workTypeView gathers one work type of one agent type from its agents.
type workTypeView struct {
	api.WorkType
	variants []variant
}

// variant is one spec some agents declare, with those agents.
type variant struct {
	worktype.Declared
	agents []string
}

// add adds agent id, of entry a, offering work type name.
func (v *workTypeView) add(a *Agent, id, name string) {
	v.Agents = append(v.Agents, id)
	if a.AsksApproval(name) {
		v.ApprovalAgents = append(v.ApprovalAgents, id)
	}
	d, ok := a.Declared[name]
	if !ok {
		v.Undeclared = append(v.Undeclared, id)
		return
	}
	for i := range v.variants {
		if sameSpec(v.variants[i].Declared, d) {
			v.variants[i].agents = append(v.variants[i].agents, id)
			return
		}
	}
	v.variants = append(v.variants, variant{Declared: d, agents: []string{id}})
}
