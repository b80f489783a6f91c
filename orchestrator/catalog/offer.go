package catalog

import (
	"slices"
	"strings"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/worktype"
)

// offer is who offers one work type of one agent type. Like a snapshot, it is
// not changed once made.
type offer struct {
	// ids are the agents offering it, sorted, each once.
	ids []string
	// schemas are the distinct parameter schemas they declare for it, each
	// with the agents declaring it, in the order of those agents' first id: a
	// submission is checked against each, whatever the number of agents.
	schemas []schemaGroup
}

// schemaGroup is one schema some agents declare, with those agents, sorted.
type schemaGroup struct {
	schema *worktype.Schema
	ids    []string
}

// offerChange is one agent's arrival in or departure from the offer of a
// work type, with the schema it declares for it there (nil: none).
type offerChange struct {
	typ      envelope.AgentType
	workType string
	schema   *worktype.Schema
	add      bool
}

// offerChanges are the changes to the offers when an agent that said old
// (nil: nothing) says a: departures first.
func offerChanges(old, a *Agent) []offerChange {
	var out []offerChange
	if old != nil {
		for _, w := range old.Offers {
			if old.Type != a.Type || !slices.Contains(a.Offers, w) || !sameSchema(old.schema(w), a.schema(w)) {
				out = append(out, offerChange{old.Type, w, old.schema(w), false})
			}
		}
	}
	for _, w := range a.Offers {
		if old == nil || old.Type != a.Type || !slices.Contains(old.Offers, w) || !sameSchema(old.schema(w), a.schema(w)) {
			out = append(out, offerChange{a.Type, w, a.schema(w), true})
		}
	}
	return out
}

// schema is the parameter schema a declares for workType, or nil.
func (a *Agent) schema(workType string) *worktype.Schema { return a.Declared[workType].Schema }

func sameSchema(a, b *worktype.Schema) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Same(b))
}

// offeringWith is s's offers once agent id offers what a does instead of
// what old did (nil: nothing). Only the maps and offers that change are
// copied.
func (s *Snapshot) offeringWith(id string, old, a *Agent) map[envelope.AgentType]map[string]*offer {
	changes := offerChanges(old, a)
	if len(changes) == 0 {
		return s.offering
	}
	out := make(map[envelope.AgentType]map[string]*offer, len(s.offering)+1)
	for k, v := range s.offering {
		out[k] = v
	}
	copied := map[envelope.AgentType]bool{}
	for _, c := range changes {
		if !copied[c.typ] {
			copied[c.typ] = true
			inner := make(map[string]*offer, len(out[c.typ])+1)
			for k, v := range out[c.typ] {
				inner[k] = v
			}
			out[c.typ] = inner
		}
		next := out[c.typ][c.workType].with(id, c.schema, c.add)
		if next == nil {
			delete(out[c.typ], c.workType)
		} else {
			out[c.typ][c.workType] = next
		}
	}
	return out
}

// with is o (nil: nobody) once id, declaring schema, is added or removed:
// a new offer, or nil when nobody is left.
func (o *offer) with(id string, schema *worktype.Schema, add bool) *offer {
	var n offer
	if o != nil {
		n = *o
	}
	var ok bool
	if n.ids, ok = setWith(n.ids, id, add); !ok {
		return o
	}
	if len(n.ids) == 0 {
		return nil
	}
	if schema == nil {
		return &n
	}
	n.schemas = slices.Clone(n.schemas)
	i := slices.IndexFunc(n.schemas, func(g schemaGroup) bool { return g.schema.Same(schema) })
	if i < 0 {
		n.schemas = append(n.schemas, schemaGroup{schema: schema})
		i = len(n.schemas) - 1
	}
	n.schemas[i].ids, _ = setWith(n.schemas[i].ids, id, add)
	if len(n.schemas[i].ids) == 0 {
		n.schemas = slices.Delete(n.schemas, i, i+1)
	}
	slices.SortFunc(n.schemas, func(a, b schemaGroup) int { return strings.Compare(a.ids[0], b.ids[0]) })
	return &n
}

// setWith is list, sorted, with id added or removed, in a new array; ok is
// false, and list returned, when that changes nothing.
func setWith(list []string, id string, add bool) (_ []string, ok bool) {
	i, found := slices.BinarySearch(list, id)
	switch {
	case add && !found:
		return slices.Insert(slices.Clip(list), i, id), true
	case !add && found:
		return slices.Delete(slices.Clone(list), i, i+1), true
	}
	return list, false
}
