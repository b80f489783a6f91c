package orchestrator

import (
	"fmt"
	"slices"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/sony/gobreaker/v2"
)

// pickResult is what routing decided for a task.
type pickResult struct {
	agent *agentEntry
	// queue is set when candidates exist but all are at capacity.
	queue bool
	// err is set when the task cannot be routed now; failFast says not to retry.
	err      *errcodes.Error
	failFast bool
}

// pick chooses the agent for r: among the online agents of the task's type that offer
// its work type (or the one pinned by hints.agent_id), skipping unreachable agents,
// open breakers and draining agents, the one with the fewest tasks running wins.
// avoid, when other candidates exist, is passed over. When the only agents that
// could take r are unreachable, r is queued until one registers again.
func (o *Orchestrator) pick(r *run) pickResult {
	t := r.t
	pinned := ""
	if t.Hints != nil {
		pinned = t.Hints.AgentID
	}
	var candidates, open, unreachable []*agentEntry
	typeOnline, offered := false, false
	for _, a := range o.agents {
		if a.typ == t.ToAgent && a.online {
			typeOnline = true
			offered = offered || a.offers(t.WorkType)
		}
		if a.typ != t.ToAgent || !a.online || !a.offers(t.WorkType) || pinned != "" && a.id != pinned {
			continue
		}
		if a.unreachable {
			unreachable = append(unreachable, a)
			continue
		}
		if a.breaker.State() != gobreaker.StateClosed {
			open = append(open, a)
			continue
		}
		candidates = append(candidates, a)
	}
	if typeOnline && !offered {
		// Agents of the type are here and none offers the work type: waiting and
		// retrying would only end the same way, later.
		return pickResult{err: errcodes.NewUnsupportedWorkType(t.WorkType, o.offeredWorkTypes(t.ToAgent)), failFast: true}
	}
	if len(candidates) == 0 {
		if len(unreachable) > 0 {
			// It waits in the queue for the agent to register again.
			return pickResult{queue: true}
		}
		what := fmt.Sprintf("no online %s agent offers work type %q", t.ToAgent, t.WorkType)
		if pinned != "" {
			what = fmt.Sprintf("agent %q is not an online %s agent offering work type %q", pinned, t.ToAgent, t.WorkType)
		}
		if len(open) > 0 {
			e := errcodes.NewAgentUnavailable(fmt.Sprintf("every %s agent offering %q has an open circuit breaker", t.ToAgent, t.WorkType), open[0].id, open[0].lastHB)
			return pickResult{err: e, failFast: true}
		}
		return pickResult{err: errcodes.NewAgentUnavailable(what, pinned, nil)}
	}
	var best *agentEntry
	for _, a := range candidates {
		if a.inflight >= a.capacity || a.status == "draining" {
			continue
		}
		if best == nil || better(a, best, r.avoid) {
			best = a
		}
	}
	if best == nil {
		return pickResult{queue: true}
	}
	return pickResult{agent: best}
}

// offeredWorkTypes is the sorted union of the work types the online agents of typ
// offer.
func (o *Orchestrator) offeredWorkTypes(typ envelope.AgentType) []string {
	var all []string
	for _, a := range o.agents {
		if a.typ == typ && a.online {
			all = append(all, a.workTypes...)
		}
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// better reports whether a should win over b: not the agent to avoid, then fewer
// running tasks, then more free capacity, then the one dispatched to least recently
// (so that ties take turns instead of all going to one agent), then the lower id.
func better(a, b *agentEntry, avoid string) bool {
	if (a.id == avoid) != (b.id == avoid) {
		return b.id == avoid
	}
	if a.inflight != b.inflight {
		return a.inflight < b.inflight
	}
	if fa, fb := a.capacity-a.inflight, b.capacity-b.inflight; fa != fb {
		return fa > fb
	}
	if !a.lastDispatch.Equal(b.lastDispatch) {
		return a.lastDispatch.Before(b.lastDispatch)
	}
	return a.id < b.id
}

// route asks routing where r goes and applies the answer: to the agent it must
// stick to (see retry.go), or to the one pick chooses.
func (o *Orchestrator) route(r *run) {
	if r.stick != "" {
		version := ""
		if a := o.agents[r.stick]; a != nil { // nil: not registered since a restart
			version = a.version
		}
		o.deliver(r, routed{agentID: r.stick, version: version})
		return
	}
	o.deliver(r, o.pick(r).routed())
}

// routed is the decision as the machine's event.
func (res pickResult) routed() routed {
	if res.agent != nil {
		return routed{agentID: res.agent.id, version: res.agent.version}
	}
	return routed{queue: res.queue, err: res.err, failFast: res.failFast}
}

// enqueue puts r at the end of its type's queue, or at its head.
func (o *Orchestrator) enqueue(r *run, head bool) {
	q := o.queues[r.t.ToAgent]
	if head {
		o.queues[r.t.ToAgent] = slices.Insert(q, 0, r.t.ID)
	} else {
		o.queues[r.t.ToAgent] = append(q, r.t.ID)
	}
}

// drainQueue routes queued tasks of typ, in order, while agents have room. A task
// that cannot go yet (pinned to a busy agent) keeps its place.
func (o *Orchestrator) drainQueue(typ envelope.AgentType) {
	q := o.queues[typ]
	if len(q) == 0 || o.closed {
		return
	}
	// Routing may queue tasks again (at the head, or behind): they go after the
	// ones kept, which were there first.
	o.queues[typ] = nil
	kept := q[:0:0]
	for i, id := range q {
		if !o.hasRoom(typ) {
			// Nothing more can go now: keep the rest without routing each of them,
			// which made a long queue cost O(len(queue)) per finished task.
			kept = append(kept, q[i:]...)
			break
		}
		r := o.runs[id]
		if r == nil || !r.queued {
			continue
		}
		res := o.pick(r)
		if res.queue {
			kept = append(kept, id)
			continue
		}
		o.deliver(r, res.routed())
	}
	o.queues[typ] = append(kept, o.queues[typ]...)
}

// anyOnline reports whether an agent of typ is online.
func (o *Orchestrator) anyOnline(typ envelope.AgentType) bool {
	for _, a := range o.agents {
		if a.typ == typ && a.online {
			return true
		}
	}
	return false
}

// hasRoom reports whether an online, reachable, non-draining agent of typ has a free
// slot.
func (o *Orchestrator) hasRoom(typ envelope.AgentType) bool {
	for _, a := range o.agents {
		if a.typ == typ && a.online && !a.unreachable && a.inflight < a.capacity && a.status != "draining" {
			return true
		}
	}
	return false
}
