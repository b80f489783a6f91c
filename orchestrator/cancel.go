package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// Task returns a snapshot of one task.
func (o *Orchestrator) Task(id string) (*Task, error) {
	o.mu.Lock()
	if r := o.runs[id]; r != nil {
		c := cloneTask(r.t)
		var end *commit
		if r.finished {
			end = r.written // its end shows once it is stored
		}
		o.mu.Unlock()
		_ = end.wait()
		return c, nil
	}
	o.mu.Unlock()
	return o.st.Task(id)
}

// ListOptions filters a task list.
type ListOptions struct {
	// State keeps tasks in this state; "" keeps all.
	State State
	// AgentType keeps tasks for this agent type; "" keeps all.
	AgentType envelope.AgentType
	// Limit bounds the number of tasks; 0 means 100.
	Limit int
}

// Tasks lists tasks, newest first.
func (o *Orchestrator) Tasks(opts ListOptions) ([]*Task, error) {
	if opts.Limit <= 0 {
		opts.Limit = 100
	}
	o.mu.Lock()
	live := make(map[string]*Task, len(o.runs))
	for id, r := range o.runs {
		live[id] = cloneTask(r.t)
	}
	o.mu.Unlock()
	keep := func(t *Task) bool {
		if l := live[t.ID]; l != nil {
			*t = *l
		}
		return (opts.State == "" || t.State == opts.State) && (opts.AgentType == "" || t.ToAgent == opts.AgentType)
	}
	return o.st.Tasks(keep, opts.Limit)
}

// replayStatuses brings a recovered task's steps and progress up to date with its
// events, and returns the number of the last one. A status is stored without the
// task's record (saveStatus), so the record may miss the last of them.
func (o *Orchestrator) replayStatuses(t *Task) (int64, error) {
	var last int64
	err := o.st.Events(t.ID, 0, func(ev *Event) error {
		last = ev.Seq
		if ev.Type == EventStatus && ev.Status != nil {
			t.ProgressPercent = ev.Status.ProgressPercent
			o.updateStep(t, ev.Status, ev.At)
		}
		return nil
	})
	return last, err
}

// recover resumes every unfinished task found in the store. One that reached an agent
// is sent again to that agent with its request_id, whose cache answers; one that did
// not is queued until the agents register.
func (o *Orchestrator) recover() error {
	tasks, err := o.st.Unfinished()
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, t := range tasks { // oldest first
		r := o.newRun(t)
		if r.seq, err = o.replayStatuses(t); err != nil {
			return err
		}
		pieces, err := o.st.OutputSpans(t.ID)
		if err != nil {
			return err
		}
		for _, p := range pieces {
			r.out.Add(p)
		}
		t.OutputBytes = r.out.Contiguous()
		o.runs[t.ID] = r
		log := r.log
		if t.CancelRequested && t.State == StatePending {
			o.finish(r, StateCancelled, nil, "cancelled")
			continue
		}
		_ = o.save(r, &Event{Type: EventState, Message: "resumed after orchestrator restart"})
		if t.AgentID != "" {
			log.Info("resuming task on its agent", "agent_id", t.AgentID, "state", t.State)
			r.stick = t.AgentID
			if mayHaveStarted(t) {
				r.pinned = t.AgentID
			}
			o.schedule(r)
			continue
		}
		// Never dispatched: it waits in its type's queue, which the agents'
		// registrations drain. Routing it before they have registered would cost it a
		// retry (5002 "no online agent") for no fault of theirs. When none of its type
		// has registered after the ack timeout, it is routed as a new task would be.
		log.Info("resuming task: queued until its agents register", "state", t.State)
		o.enqueue(r)
		r.retry = time.AfterFunc(o.cfg.Timeouts.Ack, func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			if r.queued && !r.finished && !o.closed && !o.anyOnline(r.t.ToAgent) {
				o.unqueue(r)
				o.schedule(r)
			}
		})
	}
	return nil
}
