package core

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

// do carries out one effect of the machine for r; an effect that
// feeds an answer back (routing, a failed publish) applies it before returning.
func (o *Core) do(r *run, eff effect) {
	switch e := eff.(type) {
	case write:
		o.write(r, e)
	case publish:
		o.sendWork(r, e)
	case claim:
		o.claim(r, e.agentID)
	case release:
		o.release(r, e)
	case settle:
		o.settle(r, e.outcome)
	case arm:
		o.arm(r, e)
	case stop:
		if tm := r.timers[e.kind]; tm != nil {
			tm.Stop()
		}
	case stopAll:
		r.stopTimers()
	case notify:
		o.emit(Event{Kind: TaskStep, TaskID: r.t.ID, Event: e.ev})
	case enqueue:
		o.enqueue(r, e.head)
	case unqueue:
		o.queues[r.t.ToAgent] = slices.DeleteFunc(o.queues[r.t.ToAgent], func(id string) bool { return id == r.t.ID })
	case route:
		if !e.unlessOnline || !o.anyOnline(r.t.ToAgent) {
			o.then(followUp{r: r})
		}
	case drain:
		o.then(followUp{drain: r.t.ToAgent})
	case cancelAgent:
		o.sendCancel(r, e)
	case unreachable:
		o.markUnreachable(e.agentID)
	case forged:
		o.metrics.AuthFailures.Inc()
		o.authLog.Warn("forged-503", "no-responders status off the current attempt's subject dropped", "task_id", r.t.ID)
	case acknowledged:
		o.metrics.Latency.Observe(e.after.Seconds())
	case retried:
		o.metrics.Retries.WithLabelValues(strconv.Itoa(e.code)).Inc()
	case rejected:
		o.metrics.Invalid.Inc()
	case asked:
		o.emit(Event{Kind: TaskAwaitsApproval, TaskID: r.t.ID, Task: r.t})
	case forget:
		o.forget(r, e)
	}
}

// claim takes a slot on agentID for r's attempt, and the GPU memory it needs
// (gpu.go), and asks its breaker; nothing when agentID is not registered.
func (o *Core) claim(r *run, agentID string) {
	if a := o.agents[agentID]; a != nil {
		a.inflight++
		a.lastDispatch = time.Now()
		a.gpu.Hold(r.t.ID, a.gpus(), r.t.Hints.GPUNeed())
		r.agent = a
		if done, err := a.breaker.Allow(); err == nil {
			r.done = done
		}
	}
}

// release settles r's attempt and gives its slot and GPU memory back, draining
// the type's queue into them when e says so.
func (o *Core) release(r *run, e release) {
	o.settle(r, e.outcome)
	if a := r.agent; a != nil {
		r.agent = nil
		a.inflight--
		a.releaseGPU(r, e.outcome)
		if e.drain {
			o.then(followUp{drain: a.typ})
		}
	}
}

// arm starts r's timer e.kind, stopping the one it replaces; when it runs out,
// e.fire is delivered to the loop.
func (o *Core) arm(r *run, e arm) {
	if old := r.timers[e.kind]; old != nil {
		old.Stop()
	}
	fire := e.fire
	r.timers[e.kind] = time.AfterFunc(e.after, func() { o.deliverLater(r, fire) })
}

// markUnreachable marks agentID unreachable until it registers or heartbeats.
func (o *Core) markUnreachable(agentID string) {
	if a := o.agents[agentID]; a != nil && !a.unreachable {
		a.unreachable = true
		o.log.Warn("agent unreachable until it registers again: no responders on its work subject", "agent_id", a.id)
	}
}

// forget removes r's ended task from the live ones and tells the readers of the
// end: stored, or, for a task never stored (e.uncount, which takes it out of the
// tasks-by-state gauge too), dropped.
func (o *Core) forget(r *run, e forget) {
	delete(o.runs, r.t.ID)
	if e.uncount {
		o.metrics.Tasks.WithLabelValues(string(r.t.State)).Dec()
		o.emit(Event{Kind: TaskDropped, TaskID: r.t.ID})
		return
	}
	o.emit(Event{Kind: TaskEnded, TaskID: r.t.ID, Task: r.t})
}

func (r *run) stopTimers() {
	for _, tm := range r.timers {
		if tm != nil {
			tm.Stop()
		}
	}
}

// settle reports outcome to the breaker of r's attempt, once (see blame).
func (o *Core) settle(r *run, outcome error) {
	if done := r.done; done != nil {
		r.done = nil
		done(o.blame(r, outcome))
	}
}

// sendWork publishes the work_request of r's attempt, on the agent's work subject
// with the attempt's own reply subject.
func (o *Core) sendWork(r *run, e publish) {
	reply := o.subj.OrchTask(o.id, e.agentID, r.t.ID, r.nonce)
	r.log.Debug("work_request sent", "agent_id", e.agentID, "attempt", r.t.Attempts, "message_id", e.env.MessageID)
	if err := o.publish(o.subj.AgentWork(e.agentID), reply, e.agentID, e.env); err != nil {
		o.then(followUp{r: r, ev: sendFailed{attempt: e.attempt, err: err}})
	}
}

// sendCancel tells an agent to cancel r's task, in the background; an answer the
// machine waits for comes back as cancelAnswer.
func (o *Core) sendCancel(r *run, e cancelAgent) {
	t := r.t
	env := envelope.New(envelope.Orchestrator, t.ToAgent, t.RequestID, t.TraceID, &envelope.Cancel{TaskID: t.ID, Reason: e.reason})
	log := r.log
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		rep, err := o.request(context.Background(), e.agentID, env)
		if err != nil {
			log.Warn("cancel not delivered", "agent_id", e.agentID, "err", err)
		}
		if e.answered == nil {
			return
		}
		var ack *envelope.ControlAck
		if err == nil {
			ack, _ = rep.Payload.(*envelope.ControlAck)
		}
		if !o.post(func() {
			o.deliver(r, cancelAnswer{ack: ack, err: err})
			close(e.answered)
		}) {
			close(e.answered)
		}
	}()
}
