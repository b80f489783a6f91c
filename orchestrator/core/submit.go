package core

import (
	"errors"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/output"
)

func (o *Core) newRun(t *task.Task) *run {
	return &run{t: t, log: o.taskLog(t), bo: backoffFor(o.cfg.Retry, len(t.Retries)),
		out: output.Assembler{Limit: o.cfg.MaxOutputBytes}}
}

// ErrClosed is returned by methods of a closed orchestrator.
var ErrClosed = api.ErrClosed

// Submit stores a new task and routes it: it is dispatched at once when an agent has
// room, or queued. It returns once the task is stored; the returned task is a
// snapshot.
func (o *Core) Submit(req api.SubmitRequest, caller string) (*task.Task, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := o.CheckWorkType(&req); err != nil {
		return nil, err
	}
	if err := o.CheckSize(&req); err != nil {
		return nil, err
	}
	t, _, err := o.SubmitAs(req, task.Origin{By: caller})
	return t, err
}

// SubmitAs stores and routes a task for req, validated, made as org says. With
// org.ID set it is idempotent: a task of that id that exists (live or stored) is
// returned as it is, with made false.
func (o *Core) SubmitAs(req api.SubmitRequest, org task.Origin) (t *task.Task, made bool, err error) {
	now := time.Now().UTC()
	t = &task.Task{ID: org.ID, State: task.StatePending, ToAgent: req.ToAgent, WorkType: req.WorkType,
		Parameters: req.Parameters, Hints: req.Hints, RequestID: org.RequestID, TraceID: envelope.NewID(),
		BatchID: org.BatchID, WorkflowRun: org.WorkflowRun, Schedule: org.Schedule, FireTime: org.FireTime,
		Steps: []task.StepInfo{}, CreatedAt: now, UpdatedAt: now}
	if t.ID == "" {
		t.ID, t.RequestID = envelope.NewID(), envelope.NewID()
	} else if old, err := o.st.Task(t.ID); !errors.Is(err, task.ErrNotFound) {
		return old, false, err // stored before, or the store cannot say
	}
	if t.Hints != nil && *t.Hints == (task.Hints{}) {
		t.Hints = nil
	}
	if org.Approval != nil {
		a := *org.Approval
		t.Approval = &a
	} else {
		t.Approval = o.Approval(&req, now)
	}
	r := o.newRun(t)
	var c *commit
	var snap *task.Task
	err = o.call(func() {
		if o.closed {
			return
		}
		if live := o.runs[t.ID]; live != nil {
			snap = live.t.Clone()
			return
		}
		o.admit(r)
		o.deliver(r, submitted{by: org.By})
		// Routed: dispatched, queued, failed or to be retried, and written so.
		c, snap, made = r.written, t.Clone(), true
	})
	if err != nil || snap == nil {
		return nil, false, ErrClosed
	}
	if !made {
		return snap, false, nil
	}
	if err := c.wait(); err != nil {
		o.deliverLater(r, dropped{})
		return nil, false, err
	}
	return snap, true, nil
}

// admit makes r a live task.
func (o *Core) admit(r *run) {
	o.runs[r.t.ID] = r
	o.metrics.Tasks.WithLabelValues(string(r.t.State)).Inc()
	r.log.Debug("task submitted", "to_agent", r.t.ToAgent, "work_type", r.t.WorkType)
}

// hintsEnvelope returns h as a work_request's hints carry it: nil when none of
// them is set. The GPU need goes in x_custom_fields (gpuFields).
func hintsEnvelope(h *task.Hints) *envelope.Hints {
	if h == nil || h.MaxDurationSeconds == 0 && h.MaxMemoryMB == 0 && h.AgentID == "" {
		return nil
	}
	return &envelope.Hints{MaxDurationSeconds: h.MaxDurationSeconds, MaxMemoryMB: h.MaxMemoryMB, AgentID: h.AgentID}
}
