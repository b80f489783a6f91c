package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

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
	var c *commit
	var snap *Task
	err := o.call(func() {
		if o.closed {
			return
		}
		o.admit(r)
		o.deliver(r, submitted{})
		// Routed: dispatched, queued, failed or to be retried, and written so.
		c, snap = r.written, cloneTask(t)
	})
	if err != nil || snap == nil {
		return nil, ErrClosed
	}
	if err := c.wait(); err != nil {
		o.deliverLater(r, dropped{})
		return nil, err
	}
	return snap, nil
}

// admit makes r a live task.
func (o *Orchestrator) admit(r *run) {
	o.runs[r.t.ID] = r
	o.metrics.tasks.WithLabelValues(string(r.t.State)).Inc()
	r.log.Debug("task submitted", "to_agent", r.t.ToAgent, "work_type", r.t.WorkType)
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
