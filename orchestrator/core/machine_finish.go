// The end of a task: its final state, steps and write, and the deadline that
// forces one (hints.max_duration_seconds).

package core

import (
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// finish ends r: its timers stop, its slot is freed, and the final task is written
// (after its whole output, with replace); the end shows to readers and streams once
// that write is committed (finalStored).
func (m *machine) finish(r *run, state task.State, ev *task.Event, msg string, replace *string) {
	t := r.t
	r.finished = true
	m.emit(stopAll{})
	m.unqueue(r)
	m.endAttempt(r, nil)
	now := m.now()
	t.FinishedAt = &now
	if state != task.StateError {
		// A task's error is why it ended in StateError; an attempt's is in Retries.
		t.Error = nil
	}
	endSteps(t, state, now)
	t.State = state
	if ev == nil {
		ev = &task.Event{Type: task.EventState, Message: msg}
	}
	if t.Error != nil && ev.Error == nil && state == task.StateError {
		ev.Type, ev.Error = task.EventError, t.Error
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
	m.finish(r, task.StateError, nil, e.Error(), nil)
}

// deadline ends a task that outlived hints.max_duration_seconds, and tells the
// agent to stop it.
func (m *machine) deadline(r *run) {
	t := r.t
	e := timeoutError(r, fmt.Sprintf("task exceeded max_duration_seconds=%d", t.Hints.MaxDurationSeconds))
	switch {
	case t.AgentID != "" && (t.State == task.StateDispatched || t.State == task.StateRunning):
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
func endSteps(t *task.Task, state task.State, now time.Time) {
	end := string(state)
	if state == task.StateSucceeded {
		end = envelope.StatusStepCompleted
	}
	for i := range t.Steps {
		if s := &t.Steps[i]; s.Status != envelope.StatusStepCompleted {
			s.Status, s.UpdatedAt = end, now
		}
	}
}

func taskError(e *errcodes.Error) *task.TaskError {
	return &task.TaskError{Code: int(e.Code), Message: e.Message, Context: e.Context}
}
