// The machine's rows for an operator's cancel and the agent's answer to it.

package core

import "github.com/chiffon-dev/chiffon/orchestrator/task"

// cancel applies an operator's cancel. A task not sent yet ends cancelled at once,
// and so does one waiting for a retry, whose pinned agent, which may still run an
// earlier attempt, is told to cancel it. A running task's agent is told to cancel
// it; the task ends cancelled with the agent's result, or at once when the agent
// says it is not running it or cannot be reached (cancelAnswered).
func (m *machine) cancel(r *run, e cancelRequested) {
	t := r.t
	if t.CancelRequested {
		return
	}
	t.CancelRequested = true
	r.cancelWhy = e.reason
	reason := cancelReason(e.reason)
	ended := func(msg string) *task.Event {
		return &task.Event{Type: task.EventState, Message: because(e.reason, msg), By: e.by}
	}
	if t.State == task.StatePending || t.State == task.StateAwaitingApproval {
		if r.pinned != "" {
			r.log.Info("task cancelled between attempts", "agent_id", r.pinned)
			m.emit(cancelAgent{agentID: r.pinned, reason: reason})
			m.finish(r, task.StateCancelled, ended("cancelled between attempts"), "", nil)
			return
		}
		r.log.Info("task cancelled before dispatch")
		m.finish(r, task.StateCancelled, ended("cancelled before dispatch"), "", nil)
		return
	}
	m.save(r, ended("cancel requested"))
	m.emit(cancelAgent{agentID: t.AgentID, reason: reason, answered: e.answered})
}

// cancelAnswered ends a task whose agent would not or could not cancel it.
func (m *machine) cancelAnswered(r *run, e cancelAnswer) {
	if e.err == nil && e.ack != nil && e.ack.OK {
		return // it ends with the agent's result
	}
	why := "agent was not running it"
	if e.err != nil {
		why = "agent unreachable: " + e.err.Error()
	} else if e.ack != nil && e.ack.Message != "" {
		why = "agent: " + e.ack.Message
	}
	r.log.Info("task cancelled", "why", why)
	m.finish(r, task.StateCancelled, nil, because(r.cancelWhy, "cancelled")+"; "+why, nil)
}

// because is msg, followed by the operator's reason when one was given.
func because(reason, msg string) string {
	if reason == "" {
		return msg
	}
	return msg + ": " + reason
}
