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
// could take r are unreachable, r is queued until one registers again. Called with
// o.mu held.
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
// offer. Called with o.mu held.
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

// enqueue puts r at the end of its type's queue, or at its head when r was
// dispatched before (a retry), so that a retry is not delayed behind every task
// submitted since. Called with o.mu held.
func (o *Orchestrator) enqueue(r *run) {
	if r.queued {
		return
	}
	r.queued = true
	if r.t.Attempts > 0 {
		o.queues[r.t.ToAgent] = slices.Insert(o.queues[r.t.ToAgent], 0, r.t.ID)
	} else {
		o.queues[r.t.ToAgent] = append(o.queues[r.t.ToAgent], r.t.ID)
	}
	r.log.Info("task queued: no candidate agent can take it now", "agent_type", r.t.ToAgent)
}

// drainQueue dispatches queued tasks of typ, in order, while agents have room. A task
// that cannot go yet (pinned to a busy agent) keeps its place. Called with o.mu held.
func (o *Orchestrator) drainQueue(typ envelope.AgentType) {
	q := o.queues[typ]
	if len(q) == 0 || o.closed {
		return
	}
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
		r.queued = false
		o.route(r, res)
	}
	// route may have queued more tasks behind the ones looked at.
	o.queues[typ] = append(kept, o.queues[typ][len(q):]...)
}

// hasRoom reports whether an online, reachable, non-draining agent of typ has a free
// slot. Called with o.mu held.
func (o *Orchestrator) hasRoom(typ envelope.AgentType) bool {
	for _, a := range o.agents {
		if a.typ == typ && a.online && !a.unreachable && a.inflight < a.capacity && a.status != "draining" {
			return true
		}
	}
	return false
}

// anyOnline reports whether an agent of typ is online. Called with o.mu held.
func (o *Orchestrator) anyOnline(typ envelope.AgentType) bool {
	for _, a := range o.agents {
		if a.typ == typ && a.online {
			return true
		}
	}
	return false
}

// unqueue removes a task from its queue. Called with o.mu held.
func (o *Orchestrator) unqueue(r *run) {
	if !r.queued {
		return
	}
	r.queued = false
	o.queues[r.t.ToAgent] = slices.DeleteFunc(o.queues[r.t.ToAgent], func(id string) bool { return id == r.t.ID })
}
