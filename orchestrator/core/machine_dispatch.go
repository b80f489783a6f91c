// The machine's rows for routing, dispatch, the agent's acknowledgement and its
// statuses, the type's queue, and a task resumed after a restart.

package core

import (
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// routed acts on a routing decision.
func (m *machine) routed(r *run, e routed) {
	m.unqueue(r)
	switch {
	case e.agentID != "":
		m.dispatch(r, e.agentID, e.version, e.stopGrace)
	case e.queue:
		m.enqueue(r, e.why)
	case e.failFast:
		m.finishError(r, e.err)
	default:
		m.failAttempt(r, e.err, true)
	}
}

// dispatch sends the task to agentID. The task is stored as dispatched there first,
// and the work_request goes out once that write is committed (stored): after a
// crash, the store names every agent that may have the request. The ack timer
// starts with the send. The deadline, armed at the first dispatch, waits
// DeadlineGrace and the agent's stopGrace past max_duration_seconds for the
// result that says the task was stopped.
func (m *machine) dispatch(r *run, agentID, version string, stopGrace time.Duration) {
	t := r.t
	now := m.now()
	r.attempt++
	r.accepted, r.sentAt, r.nonce = false, now, m.nonce()
	t.Attempts++
	t.AgentID = agentID
	t.LastAttemptAt = &now
	if t.FirstDispatchAt == nil {
		t.FirstDispatchAt = &now
	}
	t.State = task.StateDispatched
	m.emit(claim{agentID})
	ev := &task.Event{Type: task.EventState, Message: fmt.Sprintf("dispatched to %s (attempt %d)", agentID, t.Attempts)}
	then := stored{attempt: r.attempt, agentID: agentID, version: version, first: r.fresh}
	m.write(r, write{record: true, then: func(err error) event { then.err = err; return then }}, ev)
	m.emit(notify{ev})
	if max := maxDuration(t); max > 0 && !r.deadlineArmed {
		// The ack and inactivity timers run under a deadline too: a long task is
		// not a silent one (agents send keepalive statuses), and a dead agent's task
		// must not wait for its deadline.
		r.deadlineArmed = true
		end := t.FirstDispatchAt.Add(max + m.timeouts.DeadlineGrace + stopGrace)
		m.emit(arm{timerDeadline, end.Sub(now), deadlineDue{}})
	}
}

// armSilence (re)starts the silence timer: the attempt fails with 5001 when no
// message comes within d.
func (m *machine) armSilence(r *run, d time.Duration, why string) {
	r.gen++
	m.emit(arm{timerSilence, d, silence{gen: r.gen, why: why}})
}

// stored publishes the work_request of a dispatch once it is stored, unless the
// attempt has ended meanwhile. A new task whose first write failed is Submit's to
// drop.
func (m *machine) stored(r *run, e stored) {
	if e.first && e.err != nil || e.attempt != r.attempt {
		return
	}
	t := r.t
	if e.err != nil {
		m.failAttempt(r, errcodes.NewAgentUnavailable("store dispatched task: "+e.err.Error(), e.agentID, nil), true)
		return
	}
	env := envelope.New(envelope.Orchestrator, t.ToAgent, t.RequestID, t.TraceID,
		&envelope.WorkRequest{TaskID: t.ID, WorkType: t.WorkType, Parameters: t.Parameters, Hints: hintsEnvelope(t.Hints)})
	env.XCustomFields = gpuFields(t.Hints)
	env.ProtocolVersion = envelope.ProtocolVersion
	if e.version != "" {
		env.ProtocolVersion = e.version
	}
	m.emit(publish{attempt: e.attempt, agentID: e.agentID, env: env})
	// The agent's time to answer runs from the send: a slow store is not a silent
	// agent, and must not count against its breaker.
	ack := m.timeouts.Ack
	m.armSilence(r, ack, fmt.Sprintf("no acknowledgement within %s", ack))
}

// message applies a message from the task's agent; one from another agent or for
// another request is dropped.
func (m *machine) message(r *run, e message) {
	t := r.t
	if e.agentID != t.AgentID || e.env.RequestID != t.RequestID {
		r.log.Warn("message from another agent or request dropped", "agent_id", e.agentID, "msg_request_id", e.env.RequestID)
		return
	}
	switch p := e.env.Payload.(type) {
	case *envelope.WorkStatus:
		if p.TaskID == t.ID {
			m.status(r, e.env, p)
			return
		}
	case *envelope.WorkResult:
		if p.TaskID == t.ID {
			m.result(r, e, p)
			return
		}
	case *envelope.ErrorPayload:
		// Before the first status it means the request never started.
		m.failAttempt(r, p.Err(), !r.accepted)
		return
	}
	r.log.Warn("unexpected message on task inbox dropped", "type", e.env.Type)
}

// status records a work_status: the attempt is acknowledged, its inactivity timer
// restarts, and the status is written with its output piece, but not the task's
// record. A status changes the task's steps, progress and output, which the record
// gets at its next write and recover rebuilds from the status events after a crash,
// and moves it from dispatched to running, which recover treats alike: either may
// have reached the agent.
func (m *machine) status(r *run, env *envelope.Envelope, st *envelope.WorkStatus) {
	t := r.t
	if !r.accepted {
		r.accepted = true
		m.emit(acknowledged{m.now().Sub(r.sentAt)})
	}
	t.State = task.StateRunning
	idle := m.timeouts.Inactivity
	m.armSilence(r, idle, fmt.Sprintf("no message for %s", idle))
	var off *int64
	var pieces []task.Piece
	var kept string // the output the event carries
	p, ok, err := r.out.Place(env.XCustomFields, st)
	if err != nil {
		m.emit(rejected{})
		r.log.Warn("output piece rejected", "step", st.Step.Number, "err", err)
	} else if ok {
		off, kept = &p.Offset, p.Data
		for _, s := range p.New {
			pieces = append(pieces, task.Piece{Offset: s.Start, Data: p.Piece(s)})
		}
		t.OutputBytes = r.out.Contiguous()
	}
	if kept != st.Step.Output {
		// Neither a rejected piece nor bytes past the cap are stored (an event
		// without an offset would keep them) or streamed.
		c := *st
		c.Step.Output = kept
		st = &c
	}
	capped := m.capOutput(r, p.Cut)
	ev := &task.Event{Type: task.EventStatus, Status: st, OutputOffset: off}
	first := task.Piece{}
	if len(pieces) > 0 {
		first, pieces = pieces[0], pieces[1:]
	}
	m.write(r, write{piece: first}, ev)
	for _, piece := range pieces { // more gaps that the piece fills
		m.emit(write{piece: piece})
	}
	// As replayStatuses applies the stored event after a restart.
	t.ProgressPercent = st.ProgressPercent
	updateStep(t, st, ev.At)
	if capped != nil {
		m.emit(notify{capped})
	}
	m.emit(notify{ev})
}

func updateStep(t *task.Task, st *envelope.WorkStatus, now time.Time) {
	for i := range t.Steps {
		if t.Steps[i].Number == st.Step.Number {
			t.Steps[i].Name, t.Steps[i].Status, t.Steps[i].UpdatedAt = st.Step.Name, st.Status, now
			return
		}
	}
	t.Steps = append(t.Steps, task.StepInfo{Number: st.Step.Number, Name: st.Step.Name, Status: st.Status, UpdatedAt: now})
}

// enqueue puts r in its type's queue, writing what is unwritten (a new task), and
// why it waits when a limit holds it back (its history says so).
func (m *machine) enqueue(r *run, why string) {
	if r.queued {
		return
	}
	r.queued = true
	m.emit(enqueue{head: r.t.Attempts > 0})
	if why != "" {
		m.record(r, &task.Event{Type: task.EventState, Message: "queued: " + why})
	}
	if len(r.unwritten) > 0 {
		m.write(r, write{record: true})
	}
	if why == "" {
		r.log.Info("task queued: no candidate agent can take it now", "agent_type", r.t.ToAgent)
	}
}

func (m *machine) unqueue(r *run) {
	if r.queued {
		r.queued = false
		m.emit(unqueue{})
	}
}

// resume takes up a task found unfinished in the store. One that reached an agent is
// sent again to that agent with its request_id, whose cache answers; one that did
// not is queued until the agents register.
func (m *machine) resume(r *run) {
	t := r.t
	if t.CancelRequested && (t.State == task.StatePending || t.State == task.StateAwaitingApproval) {
		m.finish(r, task.StateCancelled, nil, "cancelled", nil)
		return
	}
	if t.State == task.StateAwaitingApproval {
		m.save(r, &task.Event{Type: task.EventState, Message: "resumed after orchestrator restart: still awaiting approval"})
		m.emit(arm{timerApproval, max(t.Approval.ExpiresAt.Sub(m.now()), 0), approvalExpired{}})
		return
	}
	m.save(r, &task.Event{Type: task.EventState, Message: "resumed after orchestrator restart"})
	if t.AgentID != "" {
		r.log.Info("resuming task on its agent", "agent_id", t.AgentID, "state", t.State)
		r.stick = t.AgentID
		if mayHaveStarted(t) {
			r.pinned = t.AgentID
		}
		m.emit(route{})
		return
	}
	// Never dispatched: it waits in its type's queue, which the agents'
	// registrations drain. Routing it before they have registered would cost it a
	// retry (5002 "no online agent") for no fault of theirs. When it is still queued
	// after the ack timeout, it is routed as a new task would be.
	r.log.Info("resuming task: queued until its agents register", "state", t.State)
	m.enqueue(r, "")
	m.emit(arm{timerQueue, m.timeouts.Ack, queueWaitDue{}})
}
