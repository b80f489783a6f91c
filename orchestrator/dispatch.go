package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/output"
)

// run is the live state of one unfinished task. Guarded by Orchestrator.mu.
type run struct {
	t        *Task
	log      *slog.Logger // carries the task's ids (see taskLog)
	seq      int64        // last event number
	attempt  int          // dispatches so far in this process; stale timers compare it
	timerGen int
	accepted bool
	finished bool
	queued   bool
	sentAt   time.Time
	// nonce is the last token of the current attempt's reply subject, which only
	// the agent it went to learns: a "no responders" counts only on it.
	nonce    string
	timer    *time.Timer // ack or inactivity
	deadline *time.Timer // hints.max_duration_seconds
	retry    *time.Timer
	agent    *agentEntry     // where the attempt counts as load
	done     func(err error) // the breaker's outcome callback for this attempt
	bo       backoff.BackOff // waits between retries
	stick    string          // the agent the next dispatch must go to
	avoid    string          // an agent to pass over when others can take the task
	// pinned is the agent that may have started the request (it acknowledged an
	// attempt, or one timed out there). Every later dispatch goes to it, even after
	// an attempt that provably never reached it: only its dedupe cache can tell
	// whether the request ran, and another agent would run it a second time.
	pinned  string
	out     output.Assembler // which output bytes are held
	written *commit          // the last saveAsync write
	reasks  int              // re-requests for a truncated result with a gap
}

func (r *run) stopTimers() {
	for _, t := range []*time.Timer{r.timer, r.deadline, r.retry} {
		if t != nil {
			t.Stop()
		}
	}
}

// maxReasks bounds how often a result with missing output is asked for again.
const maxReasks = 2

func (o *Orchestrator) newRun(t *Task) *run {
	return &run{t: t, log: o.taskLog(t), bo: o.cfg.Retry.backoff(len(t.Retries))}
}

// SubmitRequest is a task to run.
type SubmitRequest struct {
	ToAgent    envelope.AgentType `json:"to_agent"`
	WorkType   string             `json:"work_type"`
	Parameters map[string]any     `json:"parameters,omitempty"`
	Hints      *Hints             `json:"hints,omitempty"`
}

// FieldError is a bad value in a request, naming its field.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// ErrClosed is returned by methods of a closed orchestrator.
var ErrClosed = errors.New("orchestrator closed")

// Validate checks a submission and names the offending field.
func (req *SubmitRequest) Validate() error {
	if !req.ToAgent.Valid() || req.ToAgent == envelope.Orchestrator {
		return &FieldError{"to_agent", fmt.Sprintf("must be one of infra, desktop, code, research, got %q", req.ToAgent)}
	}
	if msg := envelope.CheckWorkType(req.WorkType); msg != "" {
		return &FieldError{"work_type", msg}
	}
	if h := req.Hints; h != nil {
		switch {
		case h.MaxDurationSeconds < 0:
			return &FieldError{"hints.max_duration_seconds", "must be a positive integer"}
		case h.MaxMemoryMB < 0:
			return &FieldError{"hints.max_memory_mb", "must be a positive integer"}
		}
		if h.AgentID != "" {
			if msg := envelope.CheckAgentID(h.AgentID); msg != "" {
				return &FieldError{"hints.agent_id", msg}
			}
		}
	}
	return nil
}

// Submit stores a new task and routes it: it is dispatched at once when an agent has
// room, or queued. It returns once the task is stored; the returned task is a
// snapshot.
func (o *Orchestrator) Submit(_ context.Context, req SubmitRequest) (*Task, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := o.checkSize(&req); err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	t := &Task{ID: envelope.NewID(), State: StatePending, ToAgent: req.ToAgent, WorkType: req.WorkType,
		Parameters: req.Parameters, Hints: req.Hints, RequestID: envelope.NewID(), TraceID: envelope.NewID(),
		Steps: []StepInfo{}, CreatedAt: now, UpdatedAt: now}
	if t.Hints != nil && *t.Hints == (Hints{}) {
		t.Hints = nil
	}
	r := o.newRun(t)
	submitted := &Event{Type: EventState, Message: "submitted"}
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil, ErrClosed
	}
	if res := o.pick(r); res.agent != nil {
		// The common case: the task is stored as submitted and dispatched in one
		// write, and its work_request goes out once that is committed.
		o.stamp(r, submitted)
		o.admit(r)
		o.dispatch(r, res.agent, res.agent.id, submitted)
		c, snap := r.written, cloneTask(t)
		o.mu.Unlock()
		if err := c.wait(); err != nil {
			o.mu.Lock()
			o.drop(r)
			o.mu.Unlock()
			return nil, err
		}
		return snap, nil
	}
	o.wg.Add(1) // Close waits for the write below before it closes the store
	o.mu.Unlock()
	// Queued, failed or to be retried: the task is written as submitted first.
	// Nothing else knows it yet, so it is written without o.mu.
	err := o.write(r, submitted)
	o.wg.Done()
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		// Stored as pending: it resumes at the next Open, as a queued task does.
		return cloneTask(t), nil
	}
	o.admit(r)
	o.schedule(r)
	return cloneTask(r.t), nil
}

// admit makes r a live task. Called with o.mu held.
func (o *Orchestrator) admit(r *run) {
	o.runs[r.t.ID] = r
	o.metrics.tasks.WithLabelValues(string(StatePending)).Inc()
	r.log.Debug("task submitted", "to_agent", r.t.ToAgent, "work_type", r.t.WorkType)
}

// drop forgets a task whose first write failed: it was never stored, nor sent.
// Called with o.mu held.
func (o *Orchestrator) drop(r *run) {
	if r.finished {
		return
	}
	r.finished = true
	r.stopTimers()
	o.unqueue(r)
	o.endAttempt(r, nil)
	o.metrics.tasks.WithLabelValues(string(r.t.State)).Dec()
	delete(o.runs, r.t.ID)
	o.closeWatchers(r.t.ID, nil)
}

// schedule routes r: to the agent it must stick to, or to the one routing picks.
// Called with o.mu held.
func (o *Orchestrator) schedule(r *run) {
	if r.finished || o.closed {
		return
	}
	if r.stick != "" {
		o.dispatch(r, o.agents[r.stick], r.stick)
		return
	}
	o.route(r, o.pick(r))
}

// route acts on a routing decision. Called with o.mu held.
func (o *Orchestrator) route(r *run, res pickResult) {
	switch {
	case res.agent != nil:
		o.dispatch(r, res.agent, res.agent.id)
	case res.queue:
		o.enqueue(r)
	case res.failFast:
		o.finishError(r, res.err)
	default:
		o.failAttempt(r, res.err, true)
	}
}

// dispatch sends r's work_request to agentID (a may be nil for an agent not
// registered since a restart). The task is stored as dispatched to agentID, together
// with the events of before, and the request is published once that write is
// committed: after a crash, the store names every agent that may have the request.
// Called with o.mu held.
func (o *Orchestrator) dispatch(r *run, a *agentEntry, agentID string, before ...*Event) {
	t := r.t
	now := time.Now().UTC()
	r.attempt++
	r.accepted, r.sentAt, r.nonce = false, now, broker.NewNonce()
	t.Attempts++
	t.AgentID = agentID
	t.LastAttemptAt = &now
	if t.FirstDispatchAt == nil {
		t.FirstDispatchAt = &now
	}
	o.setState(t, StateDispatched)
	version := envelope.ProtocolVersion
	if a != nil {
		a.inflight++
		a.lastDispatch = time.Now() // not now above: UTC drops the monotonic clock
		r.agent = a
		if done, err := a.breaker.Allow(); err == nil {
			r.done = done
		}
		if a.version != "" {
			version = a.version
		}
	}
	env := envelope.New(envelope.Orchestrator, t.ToAgent, t.RequestID, t.TraceID,
		&envelope.WorkRequest{TaskID: t.ID, WorkType: t.WorkType, Parameters: t.Parameters, Hints: hintsEnvelope(t.Hints)})
	env.ProtocolVersion = version
	ev := &Event{Type: EventState, Message: fmt.Sprintf("dispatched to %s (attempt %d)", agentID, t.Attempts)}
	attempt, reply := r.attempt, o.subj.OrchTask(o.id, agentID, t.ID, r.nonce)
	o.saveAsync(r, append(before, ev), func(err error) {
		if err != nil && len(before) > 0 {
			return // a new task's first write: Submit drops it
		}
		o.send(r, attempt, agentID, reply, env, err)
	})
	o.notify(t.ID, ev)
	o.armTimers(r)
}

// send publishes the work_request of r's attempt once its dispatch is stored,
// unless the attempt has ended meanwhile. It may run on the committing goroutine
// (see saveAsync), so a failure fails the attempt on a goroutine of its own. Called
// with o.mu held.
func (o *Orchestrator) send(r *run, attempt int, agentID, reply string, env *envelope.Envelope, stored error) {
	if r.finished || r.attempt != attempt || o.closed {
		return // a closed orchestrator sends it again at the next Open
	}
	t := r.t
	var fail *errcodes.Error
	if stored != nil {
		fail = errcodes.NewAgentUnavailable("store dispatched task: "+stored.Error(), agentID, nil)
	} else {
		r.log.Debug("work_request sent", "agent_id", agentID, "attempt", t.Attempts, "message_id", env.MessageID)
		if err := o.publish(o.subj.AgentWork(agentID), reply, agentID, env); err != nil {
			fail = errcodes.NewAgentUnavailable("publish work_request: "+err.Error(), agentID, nil)
		}
	}
	if fail != nil {
		o.later(func() {
			if !r.finished && r.attempt == attempt {
				o.failAttempt(r, fail, true)
			}
		})
	}
}

// endAttempt releases the agent's slot and reports the attempt's outcome to its
// breaker. Called with o.mu held.
func (o *Orchestrator) endAttempt(r *run, err error) {
	if r.timer != nil {
		r.timer.Stop()
		r.timerGen++
	}
	o.settleBreaker(r, err)
	if a := r.agent; a != nil {
		r.agent = nil
		a.inflight--
		o.drainQueue(a.typ)
	}
}

// settleBreaker reports the outcome of r's attempt to its agent's breaker, once.
// Called with o.mu held.
func (o *Orchestrator) settleBreaker(r *run, err error) {
	if r.done != nil {
		done := r.done
		r.done = nil
		done(err)
	}
}

// closeAttempt ends r's attempt with err and reports whether the task goes on: not
// when it has finished meanwhile, nor when a cancel waited for the attempt to end (it
// then ends cancelled). Called with o.mu held.
func (o *Orchestrator) closeAttempt(r *run, err error) bool {
	o.endAttempt(r, err)
	if r.finished {
		return false
	}
	if r.t.CancelRequested {
		o.finish(r, StateCancelled, nil, "cancelled")
		return false
	}
	return true
}

// requeue puts r, whose attempt reached no agent, back at the head of its type's
// queue without spending a retry: it goes to another agent of its type at once if
// one has room, else when one registers. Called with o.mu held.
func (o *Orchestrator) requeue(r *run, e *errcodes.Error) {
	t := r.t
	r.log.Warn("attempt reached no agent: queued again", "agent_id", t.AgentID, "attempt", t.Attempts, "err", e.Message)
	if !o.closeAttempt(r, errNeverReached) {
		return
	}
	r.stick, r.avoid = "", t.AgentID
	o.setState(t, StatePending)
	_ = o.save(r, &Event{Type: EventState, Error: taskError(e), Message: fmt.Sprintf("%s did not receive it (no responders): queued again", t.AgentID)})
	o.enqueue(r)
	o.drainQueue(t.ToAgent)
}

// failAttempt handles a failed attempt: retryable codes are retried after the next
// backoff wait, the rest end the task. neverStarted says the agent provably did not
// run it, so the retry may go to another agent. Called with o.mu held.
func (o *Orchestrator) failAttempt(r *run, e *errcodes.Error, neverStarted bool) {
	t := r.t
	log := r.log
	log.Warn("attempt failed", "agent_id", t.AgentID, "attempt", t.Attempts, "code", int(e.Code), "err", e.Message, "never_started", neverStarted)
	if !o.closeAttempt(r, e) {
		return
	}
	if !e.Retryable() {
		o.finishError(r, e)
		return
	}
	wait := r.bo.NextBackOff()
	if wait == backoff.Stop {
		log.Warn("retries exhausted", "retries", len(t.Retries))
		o.finishError(r, e)
		return
	}
	t.Retries = append(t.Retries, Retry{Attempt: t.Attempts, Code: int(e.Code), Message: e.Message,
		AgentID: t.AgentID, WaitMS: wait.Milliseconds(), At: time.Now().UTC()})
	o.metrics.retries.WithLabelValues(fmt.Sprint(int(e.Code))).Inc()
	if !neverStarted || r.accepted {
		// The agent accepted it, or may have: only its cache knows the outcome.
		r.pinned = t.AgentID
	}
	if r.pinned != "" {
		r.stick, r.avoid = r.pinned, ""
	} else {
		r.stick, r.avoid = "", t.AgentID
	}
	o.setState(t, StatePending)
	_ = o.save(r, &Event{Type: EventRetry, Error: taskError(e), Message: fmt.Sprintf("retry %d in %s", len(t.Retries), wait)})
	attempt := r.attempt
	r.retry = time.AfterFunc(wait, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if r.attempt == attempt {
			o.schedule(r)
		}
	})
}

// finishError ends r in StateError with e. Called with o.mu held.
func (o *Orchestrator) finishError(r *run, e *errcodes.Error) {
	r.t.Error = taskError(e)
	o.finish(r, StateError, nil, e.Error())
}

// finish ends r: it stops its timers, writes the final task with the retention TTL,
// ends its SSE streams and frees its agent slot. Called with o.mu held.
func (o *Orchestrator) finish(r *run, state State, ev *Event, msg string) {
	if r.finished {
		return
	}
	t := r.t
	r.finished = true
	r.stopTimers()
	o.unqueue(r)
	o.endAttempt(r, nil)
	now := time.Now().UTC()
	t.FinishedAt = &now
	if state != StateError {
		// A task's error is why it ended in StateError; an attempt's is in Retries.
		t.Error = nil
	}
	endSteps(t, state, now)
	o.setState(t, state)
	if ev == nil {
		ev = &Event{Type: EventState, Message: msg}
	}
	if t.Error != nil && ev.Error == nil && state == StateError {
		ev.Type, ev.Error = EventError, t.Error
	}
	// The end becomes visible (to Wait, to streams, in the store) once written.
	o.saveAsync(r, []*Event{ev}, func(error) {
		o.notify(t.ID, ev)
		delete(o.runs, t.ID)
		if len(o.watchers[t.ID]) > 0 {
			o.closeWatchers(t.ID, cloneTask(t))
		}
	})
	r.log.Info("task finished", "state", state, "attempts", t.Attempts, "agent_id", t.AgentID)
}

// setState moves t to s and keeps the tasks-by-state gauge right.
func (o *Orchestrator) setState(t *Task, s State) {
	if t.State == s {
		return
	}
	o.metrics.tasks.WithLabelValues(string(t.State)).Dec()
	o.metrics.tasks.WithLabelValues(string(s)).Inc()
	t.State = s
}

func taskError(e *errcodes.Error) *TaskError {
	return &TaskError{Code: int(e.Code), Message: e.Message, Context: e.Context}
}

// cloneTask copies t deeply enough for a caller to read while t changes.
func cloneTask(t *Task) *Task {
	c := *t
	c.Steps = slices.Clone(t.Steps)
	c.Retries = slices.Clone(t.Retries)
	if t.Result != nil {
		res := *t.Result
		c.Result = &res
	}
	if t.Error != nil {
		e := *t.Error
		c.Error = &e
	}
	return &c
}
