package core

import (
	"fmt"
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/gpuroom"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/sony/gobreaker/v2"
)

// pickResult is what routing decided for a task.
type pickResult struct {
	agent *agentEntry
	// queue is set when candidates exist but all are at capacity or held back
	// by their rate limits.
	queue bool
	// held are the candidates with room that their rate limits held back.
	held []rateHold
	// why says why a task is queued, when no rate limit does.
	why string
	// err is set when the task cannot be routed now; failFast says not to retry.
	err      *errcodes.Error
	failFast bool
}

// pick chooses the agent for r: among the online agents of the task's type that offer
// its work type (or the one pinned by hints.agent_id), skipping agents whose
// max_request_bytes the task is over, unreachable agents, open breakers, agents
// without a GPU with room for its hints.gpu_vram_mb now (gpu.go), draining agents
// and agents whose rate limits hold a dispatch back now, the one with the fewest
// tasks running wins. avoid, when other candidates exist, is passed over.
// When the only agents that could take r are unreachable, r is queued until one
// registers again; when their GPUs lack room, until a heartbeat or an ended
// attempt shows some; when they are held back by rate limits, until the earliest
// allows (see dispatchOrHold). pick takes no rate limit's token: its caller does
// for the agent chosen.
func (o *Core) pick(r *run) pickResult {
	t := r.t
	pinned := ""
	if t.Hints != nil {
		pinned = t.Hints.AgentID
	}
	// The slices stay local, where the compiler keeps small ones off the heap.
	var candidates []*agentEntry
	var u unfit
	size := taskSize(t)
	need := t.Hints.GPUNeed()
	typeOnline, offered := false, false
	for _, a := range o.byType[t.ToAgent] {
		if a.typ == t.ToAgent && a.online {
			typeOnline = true
			offered = offered || a.offers(t.WorkType)
		}
		if a.typ != t.ToAgent || !a.online || !a.offers(t.WorkType) || pinned != "" && a.id != pinned {
			continue
		}
		if a.conf != nil && a.conf.MaxRequestBytes > 0 && size.Over(a.conf.MaxRequestBytes) {
			u.tooSmall = append(u.tooSmall, a)
			continue
		}
		if a.asksApproval(t.WorkType) && !approved(t) {
			u.asking = append(u.asking, a) // approval.go: only approved work goes there
			continue
		}
		if a.unreachable {
			u.unreachable = append(u.unreachable, a)
			continue
		}
		if a.breaker.State() != gobreaker.StateClosed {
			u.open = append(u.open, a)
			continue
		}
		if need > 0 {
			if fit, _ := a.gpuFit(need); fit != gpuroom.Now {
				u.gpu[fit] = append(u.gpu[fit], a)
				continue
			}
		}
		candidates = append(candidates, a)
	}
	if typeOnline && !offered {
		if o.awaitingAgents(t.ToAgent, pinned) {
			return pickResult{queue: true} // one still to come may offer it
		}
		// Agents of the type are here and none offers the work type: waiting and
		// retrying would only end the same way, later.
		return pickResult{err: errcodes.NewUnsupportedWorkType(t.WorkType, o.offeredWorkTypes(t.ToAgent)), failFast: true}
	}
	if len(candidates) == 0 {
		if len(u.open)+len(u.tooSmall)+len(u.asking) == 0 && o.awaitingAgents(t.ToAgent, pinned) {
			return pickResult{queue: true}
		}
		return u.noCandidate(t, pinned, size.Size())
	}
	return o.leastLoaded(r, candidates)
}

// unfit are the agents pick passes over, by why: over their max_request_bytes
// (tooSmall), requiring approval for unapproved work (asking), unreachable,
// with a breaker that is not closed (open), or without room on a GPU for the
// task (gpu, by gpuroom.Never and gpuroom.Later).
type unfit struct {
	open, unreachable, tooSmall, asking []*agentEntry
	gpu                                 [gpuroom.Later + 1][]*agentEntry
}

// noCandidate is pick's answer for t, of size bytes, when no agent can take it:
// the queue when the only ones that could are unreachable, else why none can.
func (u *unfit) noCandidate(t *task.Task, pinned string, size int) pickResult {
	if len(u.unreachable) > 0 {
		// It waits in the queue for the agent to register again.
		return pickResult{queue: true}
	}
	if later := u.gpu[gpuroom.Later]; len(later) > 0 {
		return pickResult{queue: true, why: gpuWait(t.Hints.GPUNeed(), later)}
	}
	what := fmt.Sprintf("no online %s agent offers work type %q", t.ToAgent, t.WorkType)
	if pinned != "" {
		what = fmt.Sprintf("agent %q is not an online %s agent offering work type %q", pinned, t.ToAgent, t.WorkType)
	}
	if len(u.open) > 0 {
		e := errcodes.NewAgentUnavailable(fmt.Sprintf("every %s agent offering %q has an open circuit breaker", t.ToAgent, t.WorkType), u.open[0].id, u.open[0].lastHB)
		return pickResult{err: e, failFast: true}
	}
	if len(u.tooSmall) > 0 {
		return pickResult{err: tooLargeFor(t, u.tooSmall, size), failFast: true}
	}
	if len(u.asking) > 0 {
		e := errcodes.NewAgentUnavailable(fmt.Sprintf("every %s agent offering %q requires approval for it (approval_required, or its own approval: required): "+
			"pin the task to one with hints.agent_id, and it waits for an operator's yes", t.ToAgent, t.WorkType), u.asking[0].id, nil)
		return pickResult{err: e, failFast: true}
	}
	if never := u.gpu[gpuroom.Never]; len(never) > 0 {
		return pickResult{err: gpuTooLarge(t, never), failFast: true}
	}
	return pickResult{err: errcodes.NewAgentUnavailable(what, pinned, nil)}
}

// leastLoaded chooses among candidates the best (see better) that has room, is not
// draining and whose rate limits allow a dispatch now; with none, r is queued,
// with the rate limits that held candidates back.
func (o *Core) leastLoaded(r *run, candidates []*agentEntry) pickResult {
	var best *agentEntry
	var held []rateHold
	now := time.Now()
	for _, a := range candidates {
		if a.inflight >= a.capacity || a.status == "draining" {
			continue
		}
		if h, ok := o.rateHeld(a, r.t.WorkType, now); ok {
			held = append(held, h)
			continue
		}
		if best == nil || better(a, best, r.avoid) {
			best = a
		}
	}
	if best == nil {
		return pickResult{queue: true, held: held}
	}
	return pickResult{agent: best}
}

// tooLargeFor is the error of task t, of size bytes, which every agent that
// could take it refuses for their max_request_bytes (tooSmall): 5005 naming the
// largest of those limits. Not retried: waiting makes it no smaller.
func tooLargeFor(t *task.Task, tooSmall []*agentEntry, size int) *errcodes.Error {
	big := tooSmall[0]
	for _, a := range tooSmall[1:] {
		if a.conf.MaxRequestBytes > big.conf.MaxRequestBytes || a.conf.MaxRequestBytes == big.conf.MaxRequestBytes && a.id < big.id {
			big = a
		}
	}
	key := "agents[" + big.id + "].max_request_bytes"
	e := errcodes.NewResourceLimitExceeded(key, big.conf.MaxRequestBytes, int64(size))
	who := fmt.Sprintf("every online %s agent offering %q", t.ToAgent, t.WorkType)
	if len(tooSmall) == 1 {
		who = "agent " + big.id
	}
	e.Message = fmt.Sprintf("work_request of %d bytes is over the max_request_bytes of %s (%s: %d bytes)",
		size, who, key, big.conf.MaxRequestBytes)
	return e
}

// offeredWorkTypes is the sorted union of the work types the online agents of typ
// offer.
func (o *Core) offeredWorkTypes(typ envelope.AgentType) []string {
	var all []string
	for _, a := range o.byType[typ] {
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
func (o *Core) route(r *run) {
	if r.stick != "" {
		var version string
		var grace time.Duration
		if a := o.agents[r.stick]; a != nil { // nil: not registered since a restart
			version, grace = a.version, a.stopGrace(r.t.WorkType)
		}
		o.apply(r, routed{agentID: r.stick, version: version, stopGrace: grace})
		return
	}
	o.dispatchOrHold(r, o.pick(r), false)
}

// dispatchOrHold applies pick's answer for r. An agent chosen is charged the
// dispatch's rate-limit token. A task queued while rate limits held candidates
// back is counted, logged with the earliest end of those limits, and the queue
// is drained again then (the agents' wake timers). again says r was queued
// already and stays so: it is logged at debug level only.
func (o *Core) dispatchOrHold(r *run, res pickResult, again bool) {
	if res.agent != nil {
		o.charge(res.agent, r.t.WorkType, time.Now())
	}
	if !again {
		o.apply(r, res.routed(r.t.WorkType))
	}
	first, held := res.earliestHold()
	if res.agent != nil || !held {
		if res.why != "" && !again {
			r.log.Info("task queued: " + res.why)
		}
		return
	}
	for _, h := range res.held {
		o.metrics.RateLimited.WithLabelValues(h.agent.id).Inc()
		o.wakeAt(h.agent, h.Until)
	}
	if again {
		r.log.Debug("task still queued: "+first.String(), "agent_id", first.agent.id, "until", first.Until)
	} else {
		r.log.Info("task queued: "+first.String(), "agent_id", first.agent.id, "until", first.Until)
	}
}

// routed is the decision for a task of workType as the machine's event.
func (res pickResult) routed(workType string) routed {
	if res.agent != nil {
		return routed{agentID: res.agent.id, version: res.agent.version, stopGrace: res.agent.stopGrace(workType)}
	}
	why := res.why
	if h, ok := res.earliestHold(); ok {
		why = h.String()
	}
	return routed{queue: res.queue, why: why, err: res.err, failFast: res.failFast}
}

// earliestHold is the rate limit holding the task back that ends first.
func (res pickResult) earliestHold() (rateHold, bool) {
	if !res.queue || len(res.held) == 0 {
		return rateHold{}, false
	}
	first := res.held[0]
	for _, h := range res.held[1:] {
		if h.Until.Before(first.Until) {
			first = h
		}
	}
	return first, true
}

// enqueue puts r at the end of its type's queue, or at its head.
func (o *Core) enqueue(r *run, head bool) {
	q := o.queues[r.t.ToAgent]
	if head {
		o.queues[r.t.ToAgent] = slices.Insert(q, 0, r.t.ID)
	} else {
		o.queues[r.t.ToAgent] = append(q, r.t.ID)
	}
}

// drainQueue routes queued tasks of typ, in order, while agents have room (with
// every, each of them). A task that cannot go yet (pinned to a busy agent, held
// back by a rate limit) keeps its place.
func (o *Core) drainQueue(typ envelope.AgentType, every bool) {
	q := o.queues[typ]
	if len(q) == 0 || o.closed {
		return
	}
	// Routing may queue tasks again (at the head, or behind): they go after the
	// ones kept, which were there first.
	o.queues[typ] = nil
	kept := q[:0:0]
	// stuck are the work types and GPU needs of unpinned tasks that stayed
	// queued: the next unpinned task of one would too, unless its size decides
	// (max_request_bytes).
	type kind struct {
		workType string
		gpu      int64
	}
	var stuck map[kind]bool
	sizeMatters := o.sizeLimited(typ)
	for i, id := range q {
		if !every && !o.hasRoom(typ) {
			// Nothing more can go now: keep the rest without routing each of them,
			// which made a long queue cost O(len(queue)) per finished task.
			kept = append(kept, q[i:]...)
			break
		}
		r := o.runs[id]
		if r == nil || !r.queued {
			continue
		}
		unpinned := r.t.Hints == nil || r.t.Hints.AgentID == ""
		k := kind{r.t.WorkType, r.t.Hints.GPUNeed()}
		if unpinned && !sizeMatters && stuck[k] {
			kept = append(kept, id)
			continue
		}
		res := o.pick(r)
		if res.queue {
			kept = append(kept, id)
			if unpinned {
				if stuck == nil {
					stuck = map[kind]bool{}
				}
				stuck[k] = true
			}
			o.dispatchOrHold(r, res, true)
			continue
		}
		o.dispatchOrHold(r, res, false)
	}
	o.queues[typ] = append(kept, o.queues[typ]...)
}

// sizeLimited reports whether an agent of typ has a max_request_bytes: then
// whether a task may go to it depends on the task's size.
func (o *Core) sizeLimited(typ envelope.AgentType) bool {
	for _, a := range o.byType[typ] {
		if a.typ == typ && a.conf != nil && a.conf.MaxRequestBytes > 0 {
			return true
		}
	}
	return false
}

// anyOnline reports whether an agent of typ is online.
func (o *Core) anyOnline(typ envelope.AgentType) bool {
	for _, a := range o.byType[typ] {
		if a.typ == typ && a.online {
			return true
		}
	}
	return false
}

// hasRoom reports whether an online, reachable, non-draining agent of typ has a free
// slot and its own rate limit allows a dispatch now. An agent with a slot that its
// rate limit holds back has its wake timer armed: the queue drains again when the
// limit allows.
func (o *Core) hasRoom(typ envelope.AgentType) bool {
	now := time.Now()
	for _, a := range o.byType[typ] {
		if a.typ == typ && a.online && !a.unreachable && a.inflight < a.capacity && a.status != "draining" {
			if h, held := a.ownHold(now); held {
				o.wakeAt(a, h.Until)
				continue
			}
			return true
		}
	}
	return false
}
