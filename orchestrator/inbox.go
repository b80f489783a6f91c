package orchestrator

import (
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/output"
	"github.com/nats-io/nats.go"
)

// isNoResponders reports whether msg has the form of the NATS server's "no
// responders" status: a work_request published where no agent subscribes. Anyone
// who can publish on the subject can give a message that form; handleTaskMsg
// believes it only on the current attempt's unguessable reply subject.
func isNoResponders(msg *nats.Msg) bool {
	return len(msg.Data) == 0 && msg.Header.Get("Status") == "503"
}

// handleTaskMsg takes every message on the orchestrator's task inboxes: the agents'
// work_status, work_result and error, and the server's no-responders status.
//
// Messages already read and waiting behind this one (a short task's
// acknowledgement and result often arrive in one read) may share one commit: the
// writes of all but the last tell the store more are coming, and the last message's
// write, or a Flush after it, commits them all.
func (o *Orchestrator) handleTaskMsg(msg *nats.Msg) {
	more := morePending(msg)
	o.onTaskMsg(msg, more)
	if !more {
		o.st.Flush()
	}
}

// morePending reports whether messages of msg's subscription wait to be handled
// after msg. nats.go counts the message being handled as pending until its handler
// returns; were that to change, this would see one message fewer, which only holds
// less.
func morePending(msg *nats.Msg) bool {
	if msg.Sub == nil {
		return false
	}
	n, _, err := msg.Sub.Pending()
	return err == nil && n > 1
}

func (o *Orchestrator) onTaskMsg(msg *nats.Msg, more bool) {
	inbox, ok := broker.ParseTaskInbox(msg.Subject)
	if !ok {
		o.log.Warn("message on a subject that is no task inbox dropped", "subject", msg.Subject)
		return
	}
	taskID := inbox.TaskID
	if isNoResponders(msg) {
		o.noResponders(inbox)
		return
	}
	agentID, env, ok, err := o.receive(msg)
	if !ok {
		return
	}

	if err != nil {
		o.metrics.invalid.Inc()
		o.log.Warn("invalid message on task inbox dropped", "task_id", taskID, "agent_id", agentID, "err", err)
		return
	}
	if faultDropIncoming(env.Type) {
		return // test builds only: a lost message
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.moreComing = more
	defer func() { o.moreComing = false }()
	r := o.runs[taskID]
	if r == nil || r.finished {
		o.log.Debug("message for a finished or unknown task dropped", "task_id", taskID, "type", env.Type)
		return
	}
	log := r.log
	if agentID != r.t.AgentID || env.RequestID != r.t.RequestID {
		log.Warn("message from another agent or request dropped", "agent_id", agentID, "msg_request_id", env.RequestID)
		return
	}
	switch p := env.Payload.(type) {
	case *envelope.WorkStatus:
		if p.TaskID == taskID {
			o.onStatus(r, env, p)
			return
		}
	case *envelope.WorkResult:
		if p.TaskID == taskID {
			o.onResult(r, env, p)
			return
		}
	case *envelope.ErrorPayload:
		o.onAgentError(r, p.Err())
		return
	}
	log.Warn("unexpected message on task inbox dropped", "type", env.Type)
}

// noResponders ends an attempt nobody received: it never started, so it counts
// neither against the agent's breaker nor, unless the task is pinned, against its
// retries. The agent is unreachable until it registers again; the task goes back to
// its queue. A pinned task may go nowhere else, so it is retried on its agent as
// before. Only the server's status counts: it comes on the reply subject of the
// current attempt, which nobody but the agent it went to has seen.
func (o *Orchestrator) noResponders(inbox broker.TaskInbox) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.runs[inbox.TaskID]
	if r == nil || r.finished || r.accepted || r.t.State != StateDispatched {
		return
	}
	if inbox.Nonce != r.nonce || inbox.AgentID != r.t.AgentID {
		o.metrics.authFailures.Inc()
		o.authLog.Warn("forged-503", "no-responders status off the current attempt's subject dropped", "task_id", inbox.TaskID)
		return
	}
	var hb *time.Time
	if a := o.agents[r.t.AgentID]; a != nil {
		hb = a.lastHB
		if !a.unreachable {
			a.unreachable = true
			o.log.Warn("agent unreachable until it registers again: no responders on its work subject", "agent_id", a.id)
		}
	}
	e := errcodes.NewAgentUnavailable("no agent listens on the work subject (no responders)", r.t.AgentID, hb)
	o.settleBreaker(r, errNeverReached)
	if r.pinned != "" {
		o.failAttempt(r, e, true)
		return
	}
	o.requeue(r, e)
}

// onStatus records a work_status. Called with o.mu held.
func (o *Orchestrator) onStatus(r *run, env *envelope.Envelope, st *envelope.WorkStatus) {
	t := r.t
	now := time.Now().UTC()
	if !r.accepted {
		r.accepted = true
		o.metrics.latency.Observe(now.Sub(r.sentAt).Seconds())
	}
	if t.State != StateRunning {
		o.setState(t, StateRunning)
	}
	o.touch(r)
	off, piece, err := o.placeOutput(r, env, st)
	if err != nil {
		o.metrics.invalid.Inc()
		r.log.Warn("output piece rejected", "step", st.Step.Number, "err", err)
	}
	ev := &Event{Type: EventStatus, Status: st, OutputOffset: off}
	o.saveStatus(r, ev, piece) // numbers and times ev
	// As replayStatuses applies the stored event after a restart.
	t.ProgressPercent = st.ProgressPercent
	o.updateStep(t, st, ev.At)
	o.notify(t.ID, ev)
}

func (o *Orchestrator) updateStep(t *Task, st *envelope.WorkStatus, now time.Time) {
	for i := range t.Steps {
		if t.Steps[i].Number == st.Step.Number {
			t.Steps[i].Name, t.Steps[i].Status, t.Steps[i].UpdatedAt = st.Step.Name, st.Status, now
			return
		}
	}
	t.Steps = append(t.Steps, StepInfo{Number: st.Step.Number, Name: st.Step.Name, Status: st.Status, UpdatedAt: now})
}

// endSteps ends the steps a finished task leaves open (its agent ends the last one
// with the work_result, and an agent may not end any): step_completed when the task
// succeeded, else the task's final state, "failed", "cancelled" or "error".
func endSteps(t *Task, state State, now time.Time) {
	end := string(state)
	if state == StateSucceeded {
		end = envelope.StatusStepCompleted
	}
	for i := range t.Steps {
		if s := &t.Steps[i]; s.Status != envelope.StatusStepCompleted {
			s.Status, s.UpdatedAt = end, now
		}
	}
}

// onResult applies the result rule: a result that is not truncated holds the whole
// output; a truncated one needs the streamed output whole, or the request is sent
// again so that the agent's cache replays it. Called with o.mu held.
func (o *Orchestrator) onResult(r *run, env *envelope.Envelope, res *envelope.WorkResult) {
	t := r.t
	r.accepted = true
	truncated, total := output.Truncation(env.XCustomFields, res)
	log := r.log
	if !truncated {
		// r.out holds what the store holds (recover rebuilds it): with no output
		// either side there is nothing to replace, and no write to wait for.
		if res.Output != "" || !r.out.Empty() {
			_ = r.written.wait() // replaceOutput reads the pieces stored so far
			if err := o.st.ReplaceOutput(t.ID, res.Output); err != nil {
				log.Error("store result output", "err", err)
			}
		}
		r.out.Replace(int64(len(res.Output)))
		t.OutputBytes, t.OutputComplete = int64(len(res.Output)), true
	} else {
		t.OutputComplete = r.out.Complete(total)
		t.OutputBytes = r.out.Contiguous()
		if !t.OutputComplete && r.reasks < maxReasks && !t.CancelRequested {
			r.reasks++
			log.Warn("truncated result with a gap in the output: asking the agent again",
				"have", t.OutputBytes, "total", total, "reask", r.reasks)
			o.endAttempt(r, nil)
			_ = o.save(r, &Event{Type: EventState, Message: fmt.Sprintf("output incomplete (%d of %d bytes): asking again", t.OutputBytes, total)})
			r.stick = t.AgentID
			r.out.Restart()
			o.schedule(r)
			return
		}
		if !t.OutputComplete {
			log.Error("output incomplete after asking again", "have", t.OutputBytes, "total", total)
		}
	}
	structured, err := output.Structured(env.XCustomFields)
	if err != nil {
		log.Warn("structured output dropped", "err", err)
	}
	t.Result = &Result{Status: res.Status, ExitCode: res.ExitCode, ResourcesUsed: res.ResourcesUsed,
		OutputTruncated: truncated, OutputTotalBytes: total, StructuredOutput: structured, At: time.Now().UTC()}
	if res.Status == envelope.ResultSuccess {
		t.ProgressPercent = 100
	}
	state := map[string]State{envelope.ResultSuccess: StateSucceeded, envelope.ResultFailed: StateFailed,
		envelope.ResultCancelled: StateCancelled}[res.Status]
	o.finish(r, state, &Event{Type: EventResult, Result: res, StructuredOutput: structured}, "")
}

// onAgentError handles an error envelope from the agent. Before the first status it
// means the request never started. Called with o.mu held.
func (o *Orchestrator) onAgentError(r *run, e *errcodes.Error) {
	o.failAttempt(r, e, !r.accepted)
}
