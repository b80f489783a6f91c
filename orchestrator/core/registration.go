package core

import (
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

// A core that has just started knows no agent yet: they register again as they
// learn of it (at once when it asks them to, or at their next heartbeat). For
// timeouts.registration it treats a type whose configured agents have not all
// come online as one whose agents are on their way: a task no online agent can
// take waits in the queue, as it would for a busy agent, instead of failing on
// 5002 (or 5006). When the wait ends the queued tasks are routed again, and
// from then on routing answers as it always does.

// awaitRegistrations starts the wait for the configured agents to register.
func (o *Core) awaitRegistrations() {
	wait := o.cfg.Timeouts.Registration
	_ = o.call(func() {
		o.registerBy = time.Now().Add(wait)
		o.registered = time.AfterFunc(wait, func() {
			o.post(func() {
				if o.closed {
					return
				}
				for typ := range o.queues {
					o.drainWith(followUp{drain: typ, every: true})
				}
			})
		})
	})
}

// awaitingAgents reports whether, within the registration wait, a configured
// agent of typ (the pinned one, when pinned is set) is not online yet. On the
// loop.
func (o *Core) awaitingAgents(typ envelope.AgentType, pinned string) bool {
	if !time.Now().Before(o.registerBy) {
		return false
	}
	for id, s := range o.known() {
		if s.Type != typ || pinned != "" && id != pinned {
			continue
		}
		if a := o.agents[id]; a == nil || !a.online {
			return true
		}
	}
	return false
}
