package core

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/worktype"
)

// The catalogue: what the registered agents say of the work types they offer
// (worktype), kept per agent. A submission is checked against it before
// anything is stored: a work type no agent of the type offers, or parameters a
// schema refuses, is an *api.WorkTypeError. The loop builds a new catalog at
// every registration; submissions and the API read the latest without the
// loop.

// catalog is one immutable snapshot of the catalogue.
type catalog struct {
	// agents are the registered agents, by id.
	agents map[string]*agentCatalog
	// offering lists, per agent type and work type, the agents offering it,
	// sorted: a submission's check looks it up.
	offering map[envelope.AgentType]map[string][]string
	// complete holds the agent types whose configured agents have all
	// registered: only for them does "no agent offers it" mean it is unknown.
	complete map[envelope.AgentType]bool
}

// agentCatalog is what one agent offers, as its last registration said.
type agentCatalog struct {
	typ envelope.AgentType
	// offers are its work types, trimmed to those its config allows.
	offers []string
	// declared is its catalogue; nil when it sent none (an older agent).
	declared map[string]worktype.Declared
	// asks are the work types its config's approval_required lists or it
	// declares approval: required for.
	asks []string
}

// newCatalog snapshots the catalogue of o's registered agents. On the loop.
func (o *Core) newCatalog() *catalog {
	c := &catalog{agents: make(map[string]*agentCatalog, len(o.agents)), complete: map[envelope.AgentType]bool{},
		offering: map[envelope.AgentType]map[string][]string{}}
	for _, id := range slices.Sorted(maps.Keys(o.agents)) {
		a := o.agents[id]
		if c.offering[a.typ] == nil {
			c.offering[a.typ] = map[string][]string{}
		}
		for _, w := range a.workTypes {
			c.offering[a.typ][w] = append(c.offering[a.typ][w], id)
		}
		ac := &agentCatalog{typ: a.typ, offers: a.workTypes, declared: a.declared}
		for _, w := range a.workTypes {
			if a.asksApproval(w) {
				ac.asks = append(ac.asks, w)
			}
		}
		c.agents[id] = ac
	}
	for id, s := range o.sec {
		if _, seen := c.complete[s.typ]; !seen {
			c.complete[s.typ] = true
		}
		if c.agents[id] == nil {
			c.complete[s.typ] = false
		}
	}
	return c
}

// asksApproval reports whether a takes workType only once approved: its config
// entry's approval_required lists it, or it declares so itself.
func (a *agentEntry) asksApproval(workType string) bool {
	if a.conf != nil && slices.Contains(a.conf.ApprovalRequired, workType) {
		return true
	}
	return a.declared[workType].Approval == worktype.ApprovalRequired
}

// stopGrace is how long a gives a task of workType's processes to stop after
// their deadline (the work type's cancel_grace, as a declared): 0 when it
// declares none.
func (a *agentEntry) stopGrace(workType string) time.Duration {
	return time.Duration(a.declared[workType].StopGraceMS) * time.Millisecond
}

// CheckWorkType refuses req, valid, when the catalogue says its target cannot
// take it: a work type that no agent of the type offers once all of them have
// registered (or that its pinned agent does not offer), or parameters that fail
// the schema of an agent offering it: every distinct schema when the agents
// declare different ones. The refusal is an *api.WorkTypeError. An agent type
// or a pinned agent not registered yet, and agents that declare no schema,
// leave the check to the agent.
func (o *Core) CheckWorkType(req *api.SubmitRequest) error {
	c := o.catalog.Load()
	var offering []string
	if pin := pinnedAgent(req); pin != "" {
		a := c.agents[pin]
		if a == nil || a.typ != req.ToAgent {
			return nil // routing says what is wrong with the pin
		}
		if !slices.Contains(a.offers, req.WorkType) {
			return unknownWorkType(fmt.Sprintf("agent %s does not offer work type %q", pin, req.WorkType), a.offers)
		}
		offering = []string{pin}
	} else {
		offering = c.offering[req.ToAgent][req.WorkType]
		if len(offering) == 0 {
			if !c.complete[req.ToAgent] {
				return nil
			}
			return unknownWorkType(fmt.Sprintf("no %s agent offers work type %q", req.ToAgent, req.WorkType), c.offered(req.ToAgent))
		}
	}
	var checked []*worktype.Schema
	for _, id := range offering {
		s := c.agents[id].declared[req.WorkType].Schema
		if s == nil || slices.ContainsFunc(checked, s.Same) {
			continue
		}
		checked = append(checked, s)
		if err := s.Check(req.Parameters); err != nil {
			pe, ok := err.(*worktype.ParamError)
			if !ok {
				return err
			}
			msg := pe.Message
			if len(offering) > 1 && c.disagree(offering, req.WorkType) {
				msg += " (the schema of agent " + id + ")"
			}
			return &api.WorkTypeError{Code: "invalid_parameter", Field: "parameters", Pointer: pe.Pointer, Message: msg}
		}
	}
	return nil
}

func pinnedAgent(req *api.SubmitRequest) string {
	if req.Hints == nil {
		return ""
	}
	return req.Hints.AgentID
}

func unknownWorkType(what string, offered []string) *api.WorkTypeError {
	list := "none"
	if len(offered) > 0 {
		list = strings.Join(offered, ", ")
	}
	return &api.WorkTypeError{Code: "unknown_work_type", Field: "work_type",
		Message: what + "; offered: " + list}
}

// offered lists the work types the agents of typ offer, sorted.
func (c *catalog) offered(typ envelope.AgentType) []string {
	return slices.Sorted(maps.Keys(c.offering[typ]))
}

// disagree reports whether the agents ids declare different schemas for
// workType.
func (c *catalog) disagree(ids []string, workType string) bool {
	var first *worktype.Schema
	for _, id := range ids {
		s := c.agents[id].declared[workType].Schema
		switch {
		case s == nil:
		case first == nil:
			first = s
		case !first.Same(s):
			return true
		}
	}
	return false
}

// agentAsks reports whether agent id takes workType only once approved.
func (c *catalog) agentAsks(id, workType string) bool {
	a := c.agents[id]
	return a != nil && slices.Contains(a.asks, workType)
}

// WorkTypes lists the work types the registered agents offer, by agent type
// and name, with what they declare of each (api.WorkType).
func (o *Core) WorkTypes() []api.WorkType {
	c := o.catalog.Load()
	type key struct {
		typ  envelope.AgentType
		name string
	}
	byKey := map[key]*workTypeView{}
	for _, id := range slices.Sorted(maps.Keys(c.agents)) {
		a := c.agents[id]
		for _, name := range a.offers {
			v := byKey[key{a.typ, name}]
			if v == nil {
				v = &workTypeView{WorkType: api.WorkType{AgentType: a.typ, Name: name}}
				byKey[key{a.typ, name}] = v
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
		if o.cfg.WorkTypes[wt.Name].Approval == policy.ApprovalRequired {
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

// add adds agent id, of catalogue a, offering work type name.
func (v *workTypeView) add(a *agentCatalog, id, name string) {
	v.Agents = append(v.Agents, id)
	if slices.Contains(a.asks, name) {
		v.ApprovalAgents = append(v.ApprovalAgents, id)
	}
	d, ok := a.declared[name]
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

// sameSpec reports whether a and b declare the same description, approval and
// schema.
func sameSpec(a, b worktype.Declared) bool {
	if a.Description != b.Description || a.Approval != b.Approval || (a.Schema == nil) != (b.Schema == nil) {
		return false
	}
	return a.Schema == nil || a.Schema.Same(b.Schema)
}
