// Package roster is the agents an orchestrator's core knows, with what it
// holds for each: the type its id is bound to, its config entry, the token it
// must send and the headers that carry the orchestrator's token to it. The
// agents of the config are there from the start; a host that joins the site
// is admitted, and one revoked is forgotten, while the core runs.
package roster

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/nats-io/nats.go"
)

// Agent is what the core holds for one agent.
type Agent struct {
	// Type is the agent type its id is bound to.
	Type envelope.AgentType
	// Conf is its entry in the config.
	Conf *policy.AgentConfig
	// Token is the agent's, checked on what it sends.
	Token string
	// Header carries the orchestrator's token for the agent and its id (and,
	// in a group, which orchestrator sent it), built once and shared by every
	// message to it (see broker.AuthHeader): never change it.
	Header nats.Header
}

// Table is the agents known at one moment, by id. A Table is never changed
// once made: Admit and Forget make another.
type Table map[string]Agent

// Token is the token agent id must present, and whether it is known: what
// broker.Authenticator asks.
func (t Table) Token(id string) (string, bool) {
	a, ok := t[id]
	return a.Token, ok
}

// Config is agent id's config entry, or nil.
func (t Table) Config(id string) *policy.AgentConfig { return t[id].Conf }

// Header is the headers of a message to agent id, and false for an agent not
// known, to which nothing may be sent.
func (t Table) Header(id string) (nats.Header, bool) {
	a, ok := t[id]
	return a.Header, ok
}

// Roster holds the current Table. Its methods are safe for concurrent use;
// reading takes no lock.
type Roster struct {
	instance string
	mu       sync.Mutex // orders Admit and Forget
	now      atomic.Pointer[Table]
}

// New is the roster of agents, whose tokens are read, for messages naming
// instance (an orchestrator of a group; "" alone).
func New(agents []policy.AgentConfig, instance string) *Roster {
	t := make(Table, len(agents))
	for i := range agents {
		t[agents[i].ID] = entry(&agents[i], instance)
	}
	r := &Roster{instance: instance}
	r.now.Store(&t)
	return r
}

// entry is what the roster holds for the agent a configures.
func entry(a *policy.AgentConfig, instance string) Agent {
	hdr := broker.AuthHeader(a.OrchestratorToken, a.ID)
	if instance != "" {
		hdr.Set(broker.HeaderInstance, instance)
	}
	return Agent{Type: a.Type, Conf: a, Token: a.Token, Header: hdr}
}

// Now is the agents known now.
func (r *Roster) Now() Table { return *r.now.Load() }

// Admit adds agent a, or renews its entry: its token is accepted from now on.
// a's tokens must be set.
func (r *Roster) Admit(a policy.AgentConfig) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := maps.Clone(r.Now())
	next[a.ID] = entry(&a, r.instance)
	r.now.Store(&next)
}

// Forget drops agent id: from now on its token is refused and no message to
// it has headers.
func (r *Roster) Forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := maps.Clone(r.Now())
	delete(next, id)
	r.now.Store(&next)
}
