package core

import (
	"fmt"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// ErrFinished is returned when cancelling a task that has already ended.
var ErrFinished = api.ErrFinished

// maxCancelReason bounds a cancel's reason, in bytes.
const maxCancelReason = 1024

// Cancel cancels a task. A task not sent yet ends cancelled at once, and so does one
// waiting for a retry, whose pinned agent, which may still run an earlier attempt, is
// told to cancel it. A running task's agent is told to cancel it; the task ends
// cancelled with the agent's result, or at once when the agent says it is not running
// it or cannot be reached. reason, when not "", says why (see CancelRequest).
func (o *Core) Cancel(id, reason, caller string) (*task.Task, error) {
	if len(reason) > maxCancelReason {
		return nil, &api.FieldError{Field: "reason", Message: fmt.Sprintf("must be at most %d bytes", maxCancelReason)}
	}
	var (
		r        *run
		snap     *task.Task
		end      *commit
		answered = make(chan struct{})
		asked    bool
	)
	err := o.call(func() {
		if r = o.runs[id]; r == nil || o.closed {
			return
		}
		if r.finished { // its final write is not committed yet
			snap, end = r.t.Clone(), r.written
			return
		}
		for _, eff := range o.deliver(r, cancelRequested{reason: reason, by: caller, answered: answered}) {
			if c, ok := eff.(cancelAgent); ok && c.answered != nil {
				asked = true
			}
		}
		snap = r.t.Clone()
	})
	switch {
	case err != nil:
		return nil, err
	case r != nil && snap == nil:
		return nil, ErrClosed
	case r == nil:
		t, err := o.st.Task(id)
		if err != nil {
			return nil, err
		}
		return t, ErrFinished
	case end != nil:
		_ = end.wait()
		return snap, ErrFinished
	case !asked:
		return snap, nil
	}
	// The agent was asked: the task ends cancelled at once unless it is running it.
	<-answered
	if err := o.call(func() { snap = r.t.Clone() }); err != nil {
		return nil, err
	}
	return snap, nil
}

// cancelReason is the reason a cancel gives the agent.
func cancelReason(reason string) string {
	if reason == "" {
		return "cancelled by operator"
	}
	return reason
}
