package core

import (
	"slices"

	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/roster"
)

// known are the agents the core knows now, with their tokens.
func (o *Core) known() roster.Table { return o.roster.Now() }

// Admit lets agent a in from now on, or renews its entry (a host that joined
// the site after the core started: package enroll): its token is accepted and
// work may be sent to it once it registers. a's tokens must be set.
func (o *Core) Admit(a policy.AgentConfig) { o.roster.Admit(a) }

// Forget drops agent id for good (revoked): from now on its token is refused
// and nothing is sent to it; it leaves the agent list and the catalogue, and
// each task in flight there fails with why, not retried, since whether it ran
// there cannot be known. It returns once the loop has done so.
func (o *Core) Forget(id, why string) {
	o.roster.Forget(id)
	_ = o.call(func() {
		a := o.agents[id]
		if a == nil {
			return
		}
		a.stopTimers()
		delete(o.agents, id)
		o.byType[a.typ] = slices.DeleteFunc(o.byType[a.typ], func(x *agentEntry) bool { return x == a })
		o.catalog.Store(o.catalog.Load().Without(id))
		for _, f := range o.inFlightOn(id) {
			o.deliver(f.r, agentLost{agentID: id, attempt: f.attempt, why: why, revoked: true})
		}
	})
}
