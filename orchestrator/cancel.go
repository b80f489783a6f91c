package orchestrator

import (
	"context"
	"errors"
	"fmt"

	"github.com/chiffon-dev/chiffon/envelope"
)

// ErrFinished is returned when cancelling a task that has already ended.
var ErrFinished = errors.New("task already finished")

// maxCancelReason bounds a cancel's reason, in bytes.
const maxCancelReason = 1024

// CancelRequest is the optional body of a cancel.
type CancelRequest struct {
	// Reason says why; it goes to the agent, which ends the task's output with it,
	// and into the task's events. "" is "cancelled by operator".
	Reason string `json:"reason,omitempty"`
}

// Cancel cancels a task. A task not sent yet ends cancelled at once, and so does one
// waiting for a retry, whose pinned agent, which may still run an earlier attempt, is
// told to cancel it. A running task's agent is told to cancel it; the task ends
// cancelled with the agent's result, or at once when the agent says it is not running
// it or cannot be reached. reason, when not "", says why (see CancelRequest).
func (o *Orchestrator) Cancel(ctx context.Context, id, reason string) (*Task, error) {
	if len(reason) > maxCancelReason {
		return nil, &FieldError{Field: "reason", Message: fmt.Sprintf("must be at most %d bytes", maxCancelReason)}
	}
	because := func(msg string) string {
		if reason == "" {
			return msg
		}
		return msg + ": " + reason
	}
	o.mu.Lock()
	r := o.runs[id]
	if r == nil {
		o.mu.Unlock()
		t, err := o.st.Task(id)
		if err != nil {
			return nil, err
		}
		return t, ErrFinished
	}
	t := r.t
	if r.finished { // its final write is not committed yet
		c, end := cloneTask(t), r.written
		o.mu.Unlock()
		_ = end.wait()
		return c, ErrFinished
	}
	if !t.CancelRequested {
		t.CancelRequested = true
		if t.State == StatePending {
			if r.pinned != "" {
				// Between attempts (a retry wait): the agent pinned to it may still
				// be running an earlier attempt. Tell it, as for a running task.
				r.log.Info("task cancelled between attempts", "agent_id", r.pinned)
				o.sendCancel(t, r.pinned, cancelReason(reason))
				o.finish(r, StateCancelled, nil, because("cancelled between attempts"))
				c := cloneTask(t)
				o.mu.Unlock()
				return c, nil
			}
			r.log.Info("task cancelled before dispatch")
			o.finish(r, StateCancelled, nil, because("cancelled before dispatch"))
			c := cloneTask(t)
			o.mu.Unlock()
			return c, nil
		}
		_ = o.save(r, &Event{Type: EventState, Message: because("cancel requested")})
		env := envelope.New(envelope.Orchestrator, t.ToAgent, t.RequestID, t.TraceID, &envelope.Cancel{TaskID: id, Reason: cancelReason(reason)})
		agentID := t.AgentID
		o.mu.Unlock()
		rep, err := o.request(ctx, agentID, env)
		var ack *envelope.ControlAck
		if err == nil {
			ack, _ = rep.Payload.(*envelope.ControlAck)
		}
		o.mu.Lock()
		if !r.finished && (err != nil || ack == nil || !ack.OK) {
			why := "agent was not running it"
			if err != nil {
				why = "agent unreachable: " + err.Error()
			} else if ack != nil && ack.Message != "" {
				why = "agent: " + ack.Message
			}
			r.log.Info("task cancelled", "why", why)
			o.finish(r, StateCancelled, nil, because("cancelled")+"; "+why)
		}
	}
	c := cloneTask(t)
	o.mu.Unlock()
	return c, nil
}

// cancelReason is the reason a cancel gives the agent.
func cancelReason(reason string) string {
	if reason == "" {
		return "cancelled by operator"
	}
	return reason
}
