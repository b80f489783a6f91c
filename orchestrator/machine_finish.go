// The end of a task: its final state, steps and write, and the deadline that
// forces one (hints.max_duration_seconds).

package orchestrator

import (
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
)

// finish ends r: its timers stop, its slot is freed, and the final task is written
// (after its whole output, with replace); the end shows to readers and streams once
// that write is committed (finalStored).
func (m *machine) finish(r *run, state State, ev *Event, msg string, replace *string) {
	t := r.t
	r.finished = true
	m.emit(stopAll{})
	m.unqueue(r)
	m.endAttempt(r, nil)
	now := m.now()
	t.FinishedAt = &now
	if state != StateError {
		// A task's error is why it ended in StateError; an attempt's is in Retries.
		t.Error = nil
	}
	endSteps(t, state, now)
	t.State = state
	if ev == nil {
		ev = &Event{Type: EventState, Message: msg}
	}
	if t.Error != nil && ev.Error == nil && state == StateError {
		ev.Type, ev.Error = EventError, t.Error
	}
	first := r.fresh
	m.write(r, write{record: true, replace: replace, then: func(err error) event {
		return finalStored{ev: ev, uncount: first && err != nil}
	}}, ev)
	r.log.Info("task finished", "state", state, "attempts", t.Attempts, "agent_id", t.AgentID)
}

// finishError ends r in StateError with e.
func (m *machine) finishError(r *run, e *errcodes.Error) {
	r.t.Error = taskError(e)
	m.finish(r, StateError, nil, e.Error(), nil)
}

// deadline ends a task that outlived hints.max_duration_seconds, and tells the
// agent to stop it.
func (m *machine) deadline(r *run) {
	t := r.t
	e := timeoutError(r, fmt.Sprintf("task exceeded max_duration_seconds=%d", t.Hints.MaxDurationSeconds))
	switch {
	case t.AgentID != "" && (t.State == StateDispatched || t.State == StateRunning):
		m.emit(cancelAgent{agentID: t.AgentID, reason: "max_duration_seconds exceeded"})
	case r.pinned != "":
		// Between attempts: the pinned agent may still run an earlier one.
		m.emit(cancelAgent{agentID: r.pinned, reason: "max_duration_seconds exceeded"})
	}
	m.finishError(r, e)
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

func taskError(e *errcodes.Error) *TaskError {
	return &TaskError{Code: int(e.Code), Message: e.Message, Context: e.Context}
}
