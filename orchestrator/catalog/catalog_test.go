package catalog

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/worktype"
)

// flat is a catalogue as plain values, to compare an incremental snapshot
// with one built whole.
type flat struct {
	agents map[string]*Agent
	// offering: "type/work type" -> ids, sorted.
	offering map[string][]string
	// schemas: "type/work type" -> the distinct schemas' agents, in the order
	// of their first id.
	schemas  map[string][][]string
	complete map[envelope.AgentType]bool
}

// flatOf reads s.
func flatOf(s *Snapshot, types []envelope.AgentType) flat {
	f := flat{agents: map[string]*Agent{}, offering: map[string][]string{}, schemas: map[string][][]string{},
		complete: map[envelope.AgentType]bool{}}
	for _, id := range s.ids() {
		f.agents[id] = s.Agent(id)
	}
	for typ, byWork := range s.offering {
		for w, o := range byWork {
			k := string(typ) + "/" + w
			f.offering[k] = slices.Clone(o.ids)
			for _, g := range o.schemas {
				f.schemas[k] = append(f.schemas[k], slices.Clone(g.ids))
			}
		}
	}
	for _, typ := range types {
		f.complete[typ] = s.Complete(typ)
	}
	return f
}

// rebuild is the catalogue of agents built whole, the way the core built it at
// every registration before snapshots were updated in place: the agents by
// sorted id, each work type's offering list in that order, each distinct
// schema in the order of its first agent; a type complete when every
// configured agent of it has registered.
func rebuild(configured map[string]envelope.AgentType, agents map[string]*Agent, types []envelope.AgentType) flat {
	f := flat{agents: maps.Clone(agents), offering: map[string][]string{}, schemas: map[string][][]string{},
		complete: map[envelope.AgentType]bool{}}
	if f.agents == nil {
		f.agents = map[string]*Agent{}
	}
	seenBy := map[string][]*worktype.Schema{} // per key, parallel to f.schemas[k]
	for _, id := range slices.Sorted(maps.Keys(agents)) {
		a := agents[id]
		for _, w := range a.Offers {
			k := string(a.Type) + "/" + w
			if slices.Contains(f.offering[k], id) {
				continue
			}
			f.offering[k] = append(f.offering[k], id)
			sc := a.Declared[w].Schema
			if sc == nil {
				continue
			}
			seen := seenBy[k]
			i := slices.IndexFunc(seen, sc.Same)
			if i < 0 {
				seenBy[k] = append(seen, sc)
				f.schemas[k] = append(f.schemas[k], []string{id})
				continue
			}
			f.schemas[k][i] = append(f.schemas[k][i], id)
		}
	}
	for _, typ := range types {
		complete, has := true, false
		for id, t := range configured {
			if t == typ {
				has = true
				complete = complete && agents[id] != nil
			}
		}
		f.complete[typ] = has && complete
	}
	return f
}

// schemaRequiring is a parameter schema that requires property prop,
// compiled.
func schemaRequiring(t testing.TB, prop string) worktype.Declared {
	t.Helper()
	params := map[string]any{"type": "object", "required": []any{prop}}
	s, err := worktype.Compile(params)
	if err != nil {
		t.Fatal(err)
	}
	return worktype.Declared{Spec: worktype.Spec{Parameters: params}, Schema: s}
}

// reg is one registration of a sequence.
type reg struct {
	id    string
	typ   envelope.AgentType
	offer []string
	// schema declares, per work type, a schema requiring that property ("" :
	// declared without a schema); nil declares no catalogue.
	schema map[string]string
	asks   []string
}

func (r reg) agent(t testing.TB) *Agent {
	var declared map[string]worktype.Declared
	if r.schema != nil {
		declared = map[string]worktype.Declared{}
		for w, p := range r.schema {
			d := worktype.Declared{}
			if p != "" {
				d = schemaRequiring(t, p)
			}
			declared[w] = d
		}
	}
	return NewAgent(r.typ, r.offer, declared, r.asks)
}

var testTypes = []envelope.AgentType{"infra", "code", "desktop"}

// TestIncrementalSnapshotsEqualAWholeRebuild: after each registration of a
// sequence (new agents, agents registering again alike, changing their
// offers, their schemas, their type), the snapshot With made equals the one
// built whole from the agents as they stand, and every earlier snapshot is as
// it was when made.
func TestIncrementalSnapshotsEqualAWholeRebuild(t *testing.T) {
	configured := map[string]envelope.AgentType{"a": "infra", "b": "infra", "c": "code", "d": "desktop"}
	cases := []struct {
		name string
		regs []reg
	}{
		{"new agents", []reg{
			{id: "b", typ: "infra", offer: []string{"echo", "sleep"}},
			{id: "a", typ: "infra", offer: []string{"echo"}},
			{id: "c", typ: "code", offer: []string{"echo"}}}},
		{"again alike", []reg{
			{id: "a", typ: "infra", offer: []string{"echo"}, schema: map[string]string{"echo": "x"}},
			{id: "a", typ: "infra", offer: []string{"echo"}, schema: map[string]string{"echo": "x"}}}},
		{"offers change", []reg{
			{id: "a", typ: "infra", offer: []string{"echo", "sleep"}},
			{id: "b", typ: "infra", offer: []string{"sleep"}},
			{id: "a", typ: "infra", offer: []string{"run"}},
			{id: "b", typ: "infra", offer: nil},
			{id: "a", typ: "infra", offer: []string{"sleep", "echo", "sleep"}}}},
		{"schemas change", []reg{
			{id: "b", typ: "infra", offer: []string{"echo"}, schema: map[string]string{"echo": "x"}},
			{id: "a", typ: "infra", offer: []string{"echo"}, schema: map[string]string{"echo": "y"}},
			{id: "e", typ: "infra", offer: []string{"echo"}, schema: map[string]string{"echo": "x"}},
			{id: "a", typ: "infra", offer: []string{"echo"}, schema: map[string]string{"echo": "x"}},
			{id: "b", typ: "infra", offer: []string{"echo"}, schema: map[string]string{"echo": ""}},
			{id: "e", typ: "infra", offer: []string{"echo"}}}},
		{"type changes", []reg{
			{id: "a", typ: "infra", offer: []string{"echo"}, schema: map[string]string{"echo": "x"}},
			{id: "a", typ: "code", offer: []string{"echo"}, schema: map[string]string{"echo": "x"}},
			{id: "c", typ: "code", offer: []string{"echo"}},
			{id: "a", typ: "infra", offer: []string{"echo", "sleep"}}}},
		{"approval changes", []reg{
			{id: "a", typ: "infra", offer: []string{"echo"}},
			{id: "a", typ: "infra", offer: []string{"echo"}, asks: []string{"echo"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			agents := map[string]*Agent{}
			s := New(configured)
			var snaps []*Snapshot
			var flats []flat
			for i, r := range tc.regs {
				a := r.agent(t)
				s = s.With(r.id, a)
				agents[r.id] = a
				got, want := flatOf(s, testTypes), rebuild(configured, agents, testTypes)
				if !sameFlat(got, want) {
					t.Fatalf("after registration %d (%+v):\n got %s\nwant %s", i, r, show(got), show(want))
				}
				snaps, flats = append(snaps, s), append(flats, got)
			}
			for i, old := range snaps {
				if got := flatOf(old, testTypes); !sameFlat(got, flats[i]) {
					t.Errorf("snapshot %d changed after it was made:\n now %s\nwas %s", i, show(got), show(flats[i]))
				}
			}
		})
	}
}

// TestRandomRegistrationsEqualAWholeRebuild: the same over a long random
// sequence of registrations of a few agents.
func TestRandomRegistrationsEqualAWholeRebuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	configured := map[string]envelope.AgentType{}
	for i := range 12 {
		configured[fmt.Sprintf("ag-%02d", i)] = testTypes[i%2]
	}
	works := []string{"echo", "sleep", "run", "build", "noop"}
	props := []string{"", "x", "y"}
	agents := map[string]*Agent{}
	s := New(configured)
	for step := range 600 {
		r := reg{id: fmt.Sprintf("ag-%02d", rng.IntN(16)), typ: testTypes[rng.IntN(len(testTypes))]}
		for _, w := range works {
			if rng.IntN(3) == 0 {
				r.offer = append(r.offer, w)
			}
		}
		if rng.IntN(4) > 0 {
			r.schema = map[string]string{}
			for _, w := range r.offer {
				if rng.IntN(3) > 0 {
					r.schema[w] = props[rng.IntN(len(props))]
				}
			}
		}
		if len(r.offer) > 0 && rng.IntN(4) == 0 {
			r.asks = []string{r.offer[0]}
		}
		a := r.agent(t)
		before := flatOf(s, testTypes)
		prev := s
		s = s.With(r.id, a)
		agents[r.id] = a
		if got, want := flatOf(s, testTypes), rebuild(configured, agents, testTypes); !sameFlat(got, want) {
			t.Fatalf("step %d (%+v):\n got %s\nwant %s", step, r, show(got), show(want))
		}
		if got := flatOf(prev, testTypes); !sameFlat(got, before) {
			t.Fatalf("step %d changed the snapshot before it", step)
		}
	}
}

// sameFlat compares two catalogues; agents by what they say, not by pointer.
func sameFlat(a, b flat) bool {
	if len(a.agents) != len(b.agents) {
		return false
	}
	for id, x := range a.agents {
		if y := b.agents[id]; y == nil || !sayTheSame(x, y) {
			return false
		}
	}
	return reflect.DeepEqual(a.offering, b.offering) && reflect.DeepEqual(a.schemas, b.schemas) &&
		reflect.DeepEqual(a.complete, b.complete)
}

// sayTheSame compares two entries field by field, schemas by their JSON.
func sayTheSame(a, b *Agent) bool {
	if a.Type != b.Type || !slices.Equal(a.Offers, b.Offers) || !slices.Equal(a.Asks, b.Asks) ||
		(a.Declared == nil) != (b.Declared == nil) || len(a.Declared) != len(b.Declared) {
		return false
	}
	for w, d := range a.Declared {
		e, ok := b.Declared[w]
		if !ok || d.Description != e.Description || d.Approval != e.Approval || d.StopGraceMS != e.StopGraceMS ||
			(d.Schema == nil) != (e.Schema == nil) || d.Schema != nil && !d.Schema.Same(e.Schema) {
			return false
		}
	}
	return true
}

func show(f flat) string {
	return fmt.Sprintf("agents %v offering %v schemas %v complete %v",
		slices.Sorted(maps.Keys(f.agents)), f.offering, f.schemas, f.complete)
}

// TestRegisteringAgainAlikeCopiesNothing: an agent registering again with
// the same offers, catalogue and approvals, in new values, leaves the snapshot
// as it is (the storm of re-registrations after a broker restart).
func TestRegisteringAgainAlikeCopiesNothing(t *testing.T) {
	r := reg{id: "a", typ: "infra", offer: []string{"echo", "sleep"}, schema: map[string]string{"echo": "x", "sleep": ""}}
	s := New(map[string]envelope.AgentType{"a": "infra"}).With(r.id, r.agent(t))
	if again := s.With(r.id, r.agent(t)); again != s {
		t.Fatal("registering again alike made a new snapshot")
	}
	for _, change := range []func(r *reg){
		func(r *reg) { r.schema = map[string]string{"echo": "y", "sleep": ""} },
		func(r *reg) { r.asks = []string{"sleep"} },
		func(r *reg) { r.offer = []string{"echo"} },
		func(r *reg) { r.typ = "code" },
		func(r *reg) { r.schema = nil },
	} {
		changed := r
		change(&changed)
		if again := s.With(r.id, changed.agent(t)); again == s {
			t.Errorf("a registration saying %+v kept the snapshot of one saying %+v", changed, r)
		}
	}
}

// TestCompleteCountsTheConfiguredAgentsRegistered: a type is complete once
// each of its configured agents has registered once, whatever the order, the
// registrations again, or agents outside the config; a type without
// configured agents never is.
func TestCompleteCountsTheConfiguredAgentsRegistered(t *testing.T) {
	configured := map[string]envelope.AgentType{"a": "infra", "b": "infra", "c": "code"}
	steps := []struct {
		reg  reg
		want map[envelope.AgentType]bool
	}{
		{reg{id: "a", typ: "infra"}, map[envelope.AgentType]bool{"infra": false, "code": false, "desktop": false}},
		{reg{id: "a", typ: "infra", offer: []string{"echo"}}, map[envelope.AgentType]bool{"infra": false, "code": false, "desktop": false}},
		{reg{id: "x", typ: "infra"}, map[envelope.AgentType]bool{"infra": false, "code": false, "desktop": false}},
		{reg{id: "c", typ: "code"}, map[envelope.AgentType]bool{"infra": false, "code": true, "desktop": false}},
		{reg{id: "b", typ: "desktop"}, map[envelope.AgentType]bool{"infra": true, "code": true, "desktop": false}},
		{reg{id: "b", typ: "infra"}, map[envelope.AgentType]bool{"infra": true, "code": true, "desktop": false}},
	}
	s := New(configured)
	for i, st := range steps {
		s = s.With(st.reg.id, st.reg.agent(t))
		for typ, want := range st.want {
			if got := s.Complete(typ); got != want {
				t.Errorf("step %d (%s): Complete(%s) = %v, want %v", i, st.reg.id, typ, got, want)
			}
		}
	}
}

// TestAsksAndStopGrace: an agent asks approval for the work types it offers
// that its config lists or that it declares approval: required for, and
// gives a task the stop grace it declares.
func TestAsksAndStopGrace(t *testing.T) {
	declared := map[string]worktype.Declared{
		"deploy": {Spec: worktype.Spec{Approval: worktype.ApprovalRequired, StopGraceMS: 1500}},
		"echo":   {},
	}
	a := NewAgent("infra", []string{"deploy", "echo", "sleep"}, declared, []string{"sleep", "other"})
	for _, tc := range []struct {
		work  string
		asks  bool
		grace string
	}{{"deploy", true, "1.5s"}, {"echo", false, "0s"}, {"sleep", true, "0s"}, {"other", false, "0s"}} {
		if got := a.AsksApproval(tc.work); got != tc.asks {
			t.Errorf("AsksApproval(%s) = %v, want %v", tc.work, got, tc.asks)
		}
		if got := a.StopGrace(tc.work).String(); got != tc.grace {
			t.Errorf("StopGrace(%s) = %s, want %s", tc.work, got, tc.grace)
		}
	}
	var none *Agent
	if none.AsksApproval("deploy") || none.StopGrace("deploy") != 0 {
		t.Error("an agent not registered asks or grants something")
	}
}

// TestWithoutDropsAnAgentAndOnlyItsOffers: a revoked agent's entry and the
// offers only it made are gone; an offer another agent makes stays; the
// snapshot before is untouched; the type stays complete; forgetting an agent
// not registered changes nothing.
func TestWithoutDropsAnAgentAndOnlyItsOffers(t *testing.T) {
	configured := map[string]envelope.AgentType{"a": "infra", "b": "infra"}
	s := New(configured).
		With("a", reg{id: "a", typ: "infra", offer: []string{"echo", "sleep"}}.agent(t)).
		With("b", reg{id: "b", typ: "infra", offer: []string{"echo"}}.agent(t))
	n := s.Without("a")
	if n.Agent("a") != nil || n.Agent("b") == nil {
		t.Fatalf("after Without(a): a=%v b=%v", n.Agent("a"), n.Agent("b"))
	}
	if got := n.Offered("infra"); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("offered after Without(a) = %v, want [echo]", got)
	}
	if got := s.Offered("infra"); !slices.Equal(got, []string{"echo", "sleep"}) || s.Agent("a") == nil {
		t.Errorf("the snapshot before changed: offered %v, a %v", got, s.Agent("a"))
	}
	if !n.Complete("infra") {
		t.Error("infra is no longer complete once a is gone")
	}
	if n.Without("a") != n || n.Without("nobody") != n {
		t.Error("Without of an agent not registered made a new snapshot")
	}
	if err := n.Check(&api.SubmitRequest{ToAgent: "infra", WorkType: "sleep"}); err == nil {
		t.Error("sleep, offered only by the gone agent, is still accepted")
	}
}
