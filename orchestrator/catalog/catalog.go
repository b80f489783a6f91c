// Package catalog is the catalogue of the work types the registered agents
// offer: what each agent says of them (worktype), who offers what, and whether
// every configured agent of a type has registered. A submission is checked
// against it before anything is stored (Snapshot.Check); the API lists it
// (Snapshot.WorkTypes).
//
// A Snapshot is immutable: the core's loop makes the next one at each
// registration (Snapshot.With) and publishes it, and submissions and the API
// read the latest without the loop. With copies only what the registration
// changes, one agent's entry and the offering lists of its work types, so
// that a storm of registrations from thousands of agents costs each of them
// little, and an agent registering again with nothing changed costs no copy
// at all. The package is pure: no NATS, no core.
package catalog

import (
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/worktype"
)

// Agent is what one agent offers, as its last registration said. It is not
// changed once made: a Snapshot shares it.
type Agent struct {
	// Type is the agent's type.
	Type envelope.AgentType
	// Offers are its work types, trimmed to those its config allows.
	Offers []string
	// Declared is its catalogue, by work type; nil when it sent none (an older
	// agent).
	Declared map[string]worktype.Declared
	// Asks are the work types of Offers it takes only once approved.
	Asks []string
}

// NewAgent is the entry of an agent of typ that offers offers, declares
// declared, and whose config entry's approval_required lists approvalRequired:
// it asks for approval of the work types of offers that list names or that it
// declares approval: required for.
func NewAgent(typ envelope.AgentType, offers []string, declared map[string]worktype.Declared,
	approvalRequired []string) *Agent {
	a := &Agent{Type: typ, Offers: offers, Declared: declared}
	for _, w := range offers {
		if slices.Contains(approvalRequired, w) || declared[w].Approval == worktype.ApprovalRequired {
			a.Asks = append(a.Asks, w)
		}
	}
	return a
}

// AsksApproval reports whether a takes workType only once approved. A nil a
// asks for nothing.
func (a *Agent) AsksApproval(workType string) bool {
	return a != nil && slices.Contains(a.Asks, workType)
}

// StopGrace is how long a gives a task of workType's processes to stop after
// their deadline (the work type's cancel_grace, as declared): 0 when it
// declares none.
func (a *Agent) StopGrace(workType string) time.Duration {
	if a == nil {
		return 0
	}
	return time.Duration(a.Declared[workType].StopGraceMS) * time.Millisecond
}

// same reports whether a and b say the same: then a snapshot keeps a.
func (a *Agent) same(b *Agent) bool {
	if a.Type != b.Type || !slices.Equal(a.Offers, b.Offers) || !slices.Equal(a.Asks, b.Asks) ||
		(a.Declared == nil) != (b.Declared == nil) || len(a.Declared) != len(b.Declared) {
		return false
	}
	for w, d := range a.Declared {
		e, ok := b.Declared[w]
		if !ok || d.StopGraceMS != e.StopGraceMS || !sameSpec(d, e) {
			return false
		}
	}
	return true
}

// sameSpec reports whether a and b declare the same description, approval and
// schema.
func sameSpec(a, b worktype.Declared) bool {
	if a.Description != b.Description || a.Approval != b.Approval || (a.Schema == nil) != (b.Schema == nil) {
		return false
	}
	return a.Schema == nil || a.Schema.Same(b.Schema)
}

// shards is how many maps a snapshot's agents are spread over: a new agent
// copies one of them, not all.
const shards = 64

// Snapshot is one immutable state of the catalogue. The zero value is not
// usable: start from New.
type Snapshot struct {
	// agents are the registered agents by id, spread over shards by shardOf.
	agents [shards]map[string]*Agent
	// offering says, per agent type and work type, who offers it (offer.go):
	// a submission's check looks it up. A work type nobody offers has no
	// entry.
	offering map[envelope.AgentType]map[string]*offer
	// configured are the agents of the config with their types; shared by
	// every snapshot.
	configured map[string]envelope.AgentType
	// missing counts, per agent type with configured agents, those not
	// registered yet.
	missing map[envelope.AgentType]int
}

// New is the catalogue before any registration, for the agents of the config
// with their types, configured. A type is complete once every one of its
// configured agents has registered; a type without any never is.
func New(configured map[string]envelope.AgentType) *Snapshot {
	s := &Snapshot{offering: map[envelope.AgentType]map[string]*offer{},
		configured: configured, missing: map[envelope.AgentType]int{}}
	for _, typ := range configured {
		s.missing[typ]++
	}
	return s
}

// shardOf is the shard of id (FNV-1a).
func shardOf(id string) int {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return int(h % shards)
}

// Agent is agent id's entry, or nil when it has not registered.
func (s *Snapshot) Agent(id string) *Agent { return s.agents[shardOf(id)][id] }

// Complete reports whether every configured agent of typ has registered: only
// then does "no agent offers it" mean a work type is unknown.
func (s *Snapshot) Complete(typ envelope.AgentType) bool {
	n, ok := s.missing[typ]
	return ok && n == 0
}

// Offered lists the work types the agents of typ offer, sorted.
func (s *Snapshot) Offered(typ envelope.AgentType) []string {
	var out []string
	for w := range s.offering[typ] {
		out = append(out, w)
	}
	slices.Sort(out)
	return out
}

// AgentAsks reports whether agent id takes workType only once approved.
func (s *Snapshot) AgentAsks(id, workType string) bool {
	return s.Agent(id).AsksApproval(workType)
}

// With is the snapshot after agent id registered as a says; s itself when its
// entry already says the same. It copies a's shard of the agents and the
// offering lists of the work types that a adds or drops: O(offers + agents
// offering them + agents/shards), whatever the number of agents.
func (s *Snapshot) With(id string, a *Agent) *Snapshot {
	old := s.Agent(id)
	if old != nil && old.same(a) {
		return s
	}
	n := *s
	sh := shardOf(id)
	m := make(map[string]*Agent, len(s.agents[sh])+1)
	for k, v := range s.agents[sh] {
		m[k] = v
	}
	m[id] = a
	n.agents[sh] = m
	n.offering = s.offeringWith(id, old, a)
	if typ, ok := s.configured[id]; ok && old == nil {
		n.missing = make(map[envelope.AgentType]int, len(s.missing))
		for k, v := range s.missing {
			n.missing[k] = v
		}
		n.missing[typ]--
	}
	return &n
}

// ids lists the registered agents' ids, sorted.
func (s *Snapshot) ids() []string {
	var out []string
	for _, m := range s.agents {
		for id := range m {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Without is the snapshot once agent id is gone for good (revoked): its entry
// and its offers removed; s itself when it has none. A type it was configured
// for counts it as registered still, so that its going does not make the
// type's other work types unknown.
func (s *Snapshot) Without(id string) *Snapshot {
	old := s.Agent(id)
	if old == nil {
		return s
	}
	n := *s
	sh := shardOf(id)
	m := make(map[string]*Agent, len(s.agents[sh]))
	for k, v := range s.agents[sh] {
		if k != id {
			m[k] = v
		}
	}
	n.agents[sh] = m
	n.offering = s.offeringWith(id, old, &Agent{Type: old.Type})
	return &n
}
