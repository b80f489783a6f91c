// The end of an attempt: failure and retry (the policy is retry.go's), an attempt
// that reached no agent, and one whose agent's process was replaced.

package core

import (
	"fmt"

	"github.com/cenkalti/backoff/v4"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// endAttempt ends the current attempt: its silence timer stops, its slot is freed
// for queued tasks and its breaker learns outcome.
func (m *machine) endAttempt(r *run, outcome error) {
	r.gen++
	m.emit(stop{timerSilence}, release{outcome: outcome, drain: true})
}

// closeAttempt ends the attempt with outcome and reports whether the task goes on:
// not when a cancel waited for the attempt to end (it then ends cancelled).
func (m *machine) closeAttempt(r *run, outcome error) bool {
	m.endAttempt(r, outcome)
	if r.t.CancelRequested {
		m.finish(r, task.StateCancelled, nil, "cancelled", nil)
		return false
	}
	return true
}

// failAttempt applies the retry policy (retry.go) to a failed attempt: retryable
// codes are retried after the next backoff wait, the rest end the task.
// neverStarted says the agent provably did not run it, so the retry may go to
// another agent.
func (m *machine) failAttempt(r *run, e *errcodes.Error, neverStarted bool) {
	t := r.t
	r.log.Warn("attempt failed", "agent_id", t.AgentID, "attempt", t.Attempts, "code", int(e.Code), "err", e.Message, "never_started", neverStarted)
	if !m.closeAttempt(r, e) {
		return
	}
	if !e.Retryable() {
		m.finishError(r, e)
		return
	}
	wait := r.bo.NextBackOff()
	if wait == backoff.Stop {
		r.log.Warn("retries exhausted", "retries", len(t.Retries))
		m.finishError(r, e)
		return
	}
	t.Retries = append(t.Retries, task.Retry{Attempt: t.Attempts, Code: int(e.Code), Message: e.Message,
		AgentID: t.AgentID, WaitMS: wait.Milliseconds(), At: m.now()})
	m.emit(retried{int(e.Code)})
	r.nextAgent(neverStarted)
	t.State = task.StatePending
	m.save(r, &task.Event{Type: task.EventRetry, Error: taskError(e), Message: fmt.Sprintf("retry %d in %s", len(t.Retries), wait)})
	m.emit(arm{timerRetry, wait, retryDue{r.attempt}})
}

// noResponders ends an attempt nobody received: it never started, so it counts
// neither against the agent's breaker nor, unless the task is pinned, against its
// retries. The agent is unreachable until it registers or heartbeats again; the task
// goes back to its queue. A pinned task may go nowhere else, so it is retried on its
// agent as before. Only the status on the current attempt's reply subject counts,
// which nobody but the agent it went to has seen.
func (m *machine) noResponders(r *run, e noResponders) {
	t := r.t
	if r.accepted || t.State != task.StateDispatched {
		return
	}
	if e.nonce != r.nonce || e.agentID != t.AgentID {
		m.emit(forged{})
		return
	}
	m.emit(unreachable{t.AgentID}, settle{errNeverReached})
	err := errcodes.NewAgentUnavailable("no agent listens on the work subject (no responders)", t.AgentID, e.lastHB)
	if r.pinned != "" {
		m.failAttempt(r, err, true)
		return
	}
	r.log.Warn("attempt reached no agent: queued again", "agent_id", t.AgentID, "attempt", t.Attempts, "err", err.Message)
	if !m.closeAttempt(r, errNeverReached) {
		return
	}
	r.stick, r.avoid = "", t.AgentID
	t.State = task.StatePending
	m.save(r, &task.Event{Type: task.EventState, Error: taskError(err), Message: fmt.Sprintf("%s did not receive it (no responders): queued again", t.AgentID)})
	m.enqueue(r, "")
	m.emit(drain{})
}

// inFlight reports whether attempt of r went to agentID and has not ended.
func (m *machine) inFlight(r *run, agentID string, attempt int) bool {
	t := r.t
	return r.attempt == attempt && t.AgentID == agentID && (t.State == task.StateDispatched || t.State == task.StateRunning)
}

// resend sends a task that was in flight on a process its agent's new process
// replaced to the new one, with its request_id: the new process's dedupe cache
// answers (a task that was running there ends "interrupted"). The re-send spends no
// retry and does not count against the breaker.
func (m *machine) resend(r *run, e agentReplaced) {
	if !m.inFlight(r, e.agentID, e.attempt) {
		return // the attempt ended, or another one went out, since the registration
	}
	// End the old attempt without draining the queue into its slot.
	r.gen++
	m.emit(stop{timerSilence}, release{outcome: errNeverReached})
	r.pinned, r.stick = e.agentID, e.agentID // only this agent's cache knows whether it ran
	r.log.Info("agent process replaced: task sent again", "agent_id", e.agentID, "attempt", r.t.Attempts)
	m.save(r, &task.Event{Type: task.EventState, Message: e.agentID + " restarted: sent again"})
	m.dispatch(r, e.agentID, e.version, 0) // its deadline runs from the first dispatch
}
