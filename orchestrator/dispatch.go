package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/dgraph-io/badger/v4"
)

// run is the live state of one unfinished task. Guarded by Orchestrator.mu.
type run struct {
	t        *Task
	seq      int64 // last event number
	attempt  int   // dispatches so far in this process; stale timers compare it
	timerGen int
	accepted bool
	finished bool
	queued   bool
	sentAt   time.Time
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
	pinned    string
	cov       coverage      // which output bytes are held
	written   chan struct{} // closed when the last saveAsync write is committed
	recovered bool          // resumed from the store: its keys may predate liveTTL
	seqs      map[int64]*chunkSeq
	reasks    int // re-requests for a truncated result with a gap
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
	t.log = o.taskLog(t)
	left := max(o.cfg.Retry.MaxRetries-len(t.Retries), 0)
	b := &backoff.ExponentialBackOff{
		InitialInterval:     o.cfg.Retry.Initial,
		RandomizationFactor: 0, // the protocol's waits are exact: 1 s, 2 s, 4 s
		Multiplier:          2,
		MaxInterval:         o.cfg.Retry.Max,
		MaxElapsedTime:      0,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()
	// A task resumed after a restart goes on from the wait it had reached.
	for range len(t.Retries) {
		b.NextBackOff()
	}
	return &run{t: t, bo: backoff.WithMaxRetries(b, uint64(left)), seqs: map[int64]*chunkSeq{}}
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
// room, or queued. The returned task is a snapshot.
func (o *Orchestrator) Submit(_ context.Context, req SubmitRequest) (*Task, error) {
	if err := req.Validate(); err != nil {
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
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil, ErrClosed
	}
	o.wg.Add(1) // Close waits for the write below before it closes the store
	o.mu.Unlock()
	// The task is written before anything is sent. Nothing else knows it yet, so it
	// is written without o.mu: concurrent submissions commit together, and the
	// lock is not held across the write.
	err := o.write(r, &Event{Type: EventState, Message: "submitted"})
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
	o.runs[t.ID] = r
	o.metrics.tasks.WithLabelValues(string(StatePending)).Inc()
	o.taskLog(t).Info("task submitted", "to_agent", t.ToAgent, "work_type", t.WorkType)
	o.schedule(r)
	return cloneTask(r.t), nil
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
// registered since a restart). Called with o.mu held.
func (o *Orchestrator) dispatch(r *run, a *agentEntry, agentID string) {
	t := r.t
	now := time.Now().UTC()
	r.attempt++
	r.accepted, r.sentAt = false, now
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
		r.agent = a
		if done, err := a.breaker.Allow(); err == nil {
			r.done = done
		}
		if a.version != "" {
			version = a.version
		}
	}
	o.saveAsync(r, &Event{Type: EventState, Message: fmt.Sprintf("dispatched to %s (attempt %d)", agentID, t.Attempts)})
	o.armTimers(r)
	env := envelope.New(envelope.Orchestrator, t.ToAgent, t.RequestID, t.TraceID,
		&envelope.WorkRequest{TaskID: t.ID, WorkType: t.WorkType, Parameters: t.Parameters, Hints: t.Hints.envelope()})
	env.ProtocolVersion = version
	o.taskLog(t).Info("work_request sent", "agent_id", agentID, "attempt", t.Attempts, "message_id", env.MessageID)
	if err := o.publish(o.subj.AgentWork(agentID), o.subj.OrchTask(o.id, t.ID), agentID, env); err != nil {
		o.failAttempt(r, errcodes.NewAgentUnavailable("publish work_request: "+err.Error(), agentID, nil), true)
	}
}

// endAttempt releases the agent's slot and reports the attempt's outcome to its
// breaker. Called with o.mu held.
func (o *Orchestrator) endAttempt(r *run, err error) {
	if r.timer != nil {
		r.timer.Stop()
		r.timerGen++
	}
	if r.done != nil {
		done := r.done
		r.done = nil
		done(err)
	}
	if a := r.agent; a != nil {
		r.agent = nil
		a.inflight--
		o.drainQueue(a.typ)
	}
}

// failAttempt handles a failed attempt: retryable codes are retried after the next
// backoff wait, the rest end the task. neverStarted says the agent provably did not
// run it, so the retry may go to another agent. Called with o.mu held.
func (o *Orchestrator) failAttempt(r *run, e *errcodes.Error, neverStarted bool) {
	t := r.t
	log := o.taskLog(t)
	log.Warn("attempt failed", "agent_id", t.AgentID, "attempt", t.Attempts, "code", int(e.Code), "err", e.Message, "never_started", neverStarted)
	o.endAttempt(r, e)
	if r.finished {
		return
	}
	if t.CancelRequested {
		o.finish(r, StateCancelled, nil, "cancelled")
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
	t.Error = taskError(e)
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
	if state == StateSucceeded {
		t.Error = nil
	}
	o.setState(t, state)
	if ev == nil {
		ev = &Event{Type: EventState, Message: msg}
	}
	if t.Error != nil && ev.Error == nil && state == StateError {
		ev.Type, ev.Error = EventError, t.Error
	}
	if err := o.save(r, ev); err != nil {
		o.taskLog(t).Error("store finished task", "err", err)
	}
	delete(o.runs, t.ID)
	if len(o.watchers[t.ID]) > 0 {
		o.closeWatchers(t.ID, cloneTask(t))
	}
	o.taskLog(t).Info("task finished", "state", state, "attempts", t.Attempts, "agent_id", t.AgentID)
	if o.closed {
		return
	}
	if !r.recovered && now.Sub(t.CreatedAt) <= expireSlack {
		return // every key was written with a TTL that outlives the record (liveTTL)
	}
	lastSeq, withOutput := r.seq, len(r.cov.spans) > 0
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		if err := o.st.expire(t.ID, o.cfg.Retention, lastSeq, withOutput); err != nil {
			o.log.Warn("set retention on task", "task_id", t.ID, "err", err)
		}
	}()
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

// save writes r's task and one event in one transaction, then sends the event to the
// task's SSE streams. Called with o.mu held.
func (o *Orchestrator) save(r *run, ev *Event) error {
	if err := o.write(r, ev); err != nil {
		return err
	}
	o.notify(r.t.ID, ev)
	return nil
}

// saveAsync is save, with extra entries in the same transaction, for a step a crash
// may lose: the task then resumes from its
// previous state and is sent again with its request_id, which the agent's dedupe
// cache answers. The write is queued in order behind the earlier ones and not waited
// for, so o.mu is not held across a commit; r.written is closed once it is done, and
// a reader of the stored history waits on it. Called with o.mu held.
func (o *Orchestrator) saveAsync(r *run, ev *Event, extra ...*badger.Entry) {
	t := r.t
	ttl := o.stamp(r, ev)
	written := make(chan struct{})
	err := o.st.saveTaskAsync(t, ev, ttl, func(err error) {
		if err != nil {
			o.log.Error("store task", "task_id", t.ID, "err", err)
		}
		close(written)
	}, extra...)
	if err != nil {
		o.taskLog(t).Error("store task", "err", err)
		return
	}
	r.written = written
	o.notify(t.ID, ev)
}

// waitWritten waits until every saveAsync write of live task id so far is
// committed, so that a read of its stored history or output sees what was sent.
func (o *Orchestrator) waitWritten(id string) {
	o.mu.Lock()
	var written chan struct{}
	if r := o.runs[id]; r != nil {
		written = r.written
	}
	o.mu.Unlock()
	if written != nil {
		<-written
	}
}

// stamp numbers ev for r and returns the TTL of its write: the retention once the
// task is final.
func (o *Orchestrator) stamp(r *run, ev *Event) time.Duration {
	t := r.t
	t.UpdatedAt = time.Now().UTC()
	r.seq++
	ev.Seq, ev.At, ev.State = r.seq, t.UpdatedAt, t.State
	if t.State.Final() {
		return o.cfg.Retention
	}
	return 0
}

// write numbers ev and writes r's task and ev in one transaction. It touches only r:
// a run nobody else knows yet may be written without o.mu.
func (o *Orchestrator) write(r *run, ev *Event) error {
	t := r.t
	ttl := o.stamp(r, ev)
	if err := o.st.saveTask(t, ev, ttl); err != nil {
		o.taskLog(t).Error("store task", "err", err)
		return err
	}
	return nil
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

// mayHaveStarted reports whether t's agent may hold t's request in its dedupe cache:
// an attempt was in flight or acknowledged, or one timed out. Every such attempt went
// to the pinned agent, which t.AgentID then names.
func mayHaveStarted(t *Task) bool {
	if t.AgentID == "" {
		return false
	}
	if t.State == StateDispatched || t.State == StateRunning || len(t.Steps) > 0 {
		return true
	}
	for _, rt := range t.Retries {
		if rt.Code == int(errcodes.Timeout) && rt.AgentID == t.AgentID {
			return true
		}
	}
	return false
}
