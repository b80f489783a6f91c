package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
)

// maxDuration is t's hints.max_duration_seconds, or 0.
func maxDuration(t *Task) time.Duration {
	if t.Hints == nil {
		return 0
	}
	return time.Duration(t.Hints.MaxDurationSeconds) * time.Second
}

// armTimers starts the timers of a fresh dispatch: the ack timer and, the first
// time a task with a max duration goes out, its whole-task deadline. The ack and
// inactivity timers run under a deadline too: a long task is not a silent one, since
// agents send keepalive statuses, and a dead agent's task must not wait for its
// deadline. Called with o.mu held.
func (o *Orchestrator) armTimers(r *run) {
	if r.timer != nil {
		r.timer.Stop()
	}
	r.timerGen++
	if max := maxDuration(r.t); max > 0 && r.deadline == nil {
		end := r.t.FirstDispatchAt.Add(max + o.cfg.Timeouts.DeadlineGrace)
		r.deadline = time.AfterFunc(time.Until(end), func() { o.onDeadline(r) })
	}
	gen := r.timerGen
	ack := o.cfg.Timeouts.Ack
	r.timer = time.AfterFunc(ack, func() {
		o.onSilence(r, gen, fmt.Sprintf("no acknowledgement within %s", ack))
	})
}

// touch restarts the inactivity timer after a message. Called with o.mu held.
func (o *Orchestrator) touch(r *run) {
	if r.timer != nil {
		r.timer.Stop()
	}
	r.timerGen++
	gen := r.timerGen
	idle := o.cfg.Timeouts.Inactivity
	r.timer = time.AfterFunc(idle, func() {
		o.onSilence(r, gen, fmt.Sprintf("no message for %s", idle))
	})
}

// onSilence fails the attempt with 5001 when its timer is still the current one.
func (o *Orchestrator) onSilence(r *run, gen int, why string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r.finished || o.closed || gen != r.timerGen {
		return
	}
	o.failAttempt(r, o.timeoutError(r, why), false)
}

// onDeadline ends a task that outlived hints.max_duration_seconds, and tells the
// agent to stop it.
func (o *Orchestrator) onDeadline(r *run) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r.finished || o.closed {
		return
	}
	t := r.t
	e := o.timeoutError(r, fmt.Sprintf("task exceeded max_duration_seconds=%d", t.Hints.MaxDurationSeconds))
	if t.AgentID != "" && (t.State == StateDispatched || t.State == StateRunning) {
		o.sendCancel(t, t.AgentID, "max_duration_seconds exceeded")
	}
	o.finishError(r, e)
}

func (o *Orchestrator) timeoutError(r *run, why string) *errcodes.Error {
	last := r.sentAt
	if r.t.LastAttemptAt != nil {
		last = *r.t.LastAttemptAt
	}
	return errcodes.NewTimeout(why, len(r.t.Retries), last)
}

// sendCancel tells agentID to cancel t, in the background. Called with o.mu held.
func (o *Orchestrator) sendCancel(t *Task, agentID, reason string) {
	if o.closed {
		return
	}
	typ, id := t.ToAgent, t.ID
	log := o.taskLog(t)
	env := envelope.New(envelope.Orchestrator, typ, t.RequestID, t.TraceID, &envelope.Cancel{TaskID: id, Reason: reason})
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		if _, err := o.request(context.Background(), agentID, env); err != nil {
			log.Warn("cancel not delivered", "agent_id", agentID, "err", err)
		}
	}()
}
