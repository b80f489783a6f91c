package core

import (
	"fmt"
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// Approvals: a task whose work type the config marks `approval: required`, or
// pinned to an agent whose approval_required lists its work type, waits in
// StateAwaitingApproval, stored and sent nowhere, until an operator approves it
// (it is then routed as a new task is), rejects it, or approval.expires_after
// passes (it ends rejected). An unpinned task is never sent to an agent that
// requires approval for its work type unless it was approved.

// ErrNotAwaitingApproval is returned when approving or rejecting a task, or a
// batch, that does not wait for it.
var ErrNotAwaitingApproval = task.ErrNotAwaitingApproval

// maxApprovalNote bounds an approval's note, in bytes.
const maxApprovalNote = 1024

// CheckNote refuses an approval's note over maxApprovalNote.
func CheckNote(note string) error {
	if len(note) > maxApprovalNote {
		return &api.FieldError{Field: "note", Message: fmt.Sprintf("must be at most %d bytes", maxApprovalNote)}
	}
	return nil
}

// approvalNeeded says why req needs an approval, or "" when it does not.
func (o *Core) approvalNeeded(req *api.SubmitRequest) string {
	if wt, ok := o.cfg.WorkTypes[req.WorkType]; ok && wt.Approval == policy.ApprovalRequired {
		return fmt.Sprintf("work type %s requires approval (work_types.%s.approval)", req.WorkType, req.WorkType)
	}
	if req.Hints != nil && req.Hints.AgentID != "" && o.agentRequiresApproval(req.Hints.AgentID, req.WorkType) {
		return fmt.Sprintf("agent %s requires approval for %s (approval_required, or the agent's approval: required)", req.Hints.AgentID, req.WorkType)
	}
	return ""
}

// agentRequiresApproval reports whether agent id's config asks for approval of
// workType, or the agent itself does in its catalogue.
func (o *Core) agentRequiresApproval(id, workType string) bool {
	ac := o.known().Config(id)
	return ac != nil && slices.Contains(ac.ApprovalRequired, workType) || o.catalog.Load().AgentAsks(id, workType)
}

// approved reports whether t may go to an agent that requires approval for it.
func approved(t *task.Task) bool {
	return t.Approval != nil && t.Approval.State == task.ApprovalApproved
}

// Approval is the waiting approval req needs, asked at now, or nil when it
// needs none (approvalNeeded).
func (o *Core) Approval(req *api.SubmitRequest, now time.Time) *task.Approval {
	why := o.approvalNeeded(req)
	if why == "" {
		return nil
	}
	return &task.Approval{State: task.ApprovalWaiting, Why: why, RequestedAt: now, ExpiresAt: now.Add(o.cfg.Approval.Expiry())}
}

// Decide approves (approve) or rejects the task id waiting for approval, on
// behalf of ctx's caller, and returns it once the decision is stored. A task
// that does not wait for approval is returned with ErrNotAwaitingApproval.
func (o *Core) Decide(id string, approve bool, note, caller string) (*task.Task, error) {
	if err := CheckNote(note); err != nil {
		return nil, err
	}
	var (
		r    *run
		snap *task.Task
		c    *commit
		not  bool
	)
	err := o.call(func() {
		if r = o.runs[id]; r == nil || o.closed {
			return
		}
		snap = r.t.Clone()
		if r.finished || r.t.State != task.StateAwaitingApproval {
			not = true
			return
		}
		o.deliver(r, approvalDecided{approve: approve, by: caller, note: note})
		snap, c = r.t.Clone(), r.written
	})
	switch {
	case err != nil:
		return nil, err
	case r == nil:
		t, err := o.st.Task(id)
		if err != nil {
			return nil, err
		}
		return t, ErrNotAwaitingApproval
	case snap == nil:
		return nil, ErrClosed
	case not:
		return snap, ErrNotAwaitingApproval
	}
	if err := c.wait(); err != nil {
		return nil, err
	}
	return snap, nil
}

// awaitApproval holds a new task for its approval: stored, sent nowhere, with
// the timer that rejects it when nobody answers.
func (m *machine) awaitApproval(r *run) {
	t := r.t
	t.State = task.StateAwaitingApproval
	m.save(r, &task.Event{Type: task.EventState, Message: "awaiting approval: " + t.Approval.Why})
	m.emit(arm{timerApproval, max(t.Approval.ExpiresAt.Sub(m.now()), 0), approvalExpired{}}, asked{})
	r.log.Info("task awaits approval", "why", t.Approval.Why, "expires_at", t.Approval.ExpiresAt)
}

// decide applies an operator's approval or rejection.
func (m *machine) decide(r *run, e approvalDecided) {
	t := r.t
	if t.State != task.StateAwaitingApproval {
		return
	}
	now := m.now()
	a := t.Approval
	a.By, a.Note, a.DecidedAt = e.by, e.note, &now
	m.emit(stop{timerApproval})
	if !e.approve {
		a.State = task.ApprovalRejected
		r.log.Info("task rejected", "by", e.by)
		m.finish(r, task.StateRejected, &task.Event{Type: task.EventState, Message: because(e.note, "rejected"), By: e.by}, "", nil)
		return
	}
	a.State = task.ApprovalApproved
	t.State = task.StatePending
	r.log.Info("task approved", "by", e.by)
	m.record(r, &task.Event{Type: task.EventState, Message: because(e.note, "approved"), By: e.by})
	m.emit(route{})
}

// expire rejects a task whose approval nobody gave in time.
func (m *machine) expire(r *run) {
	t := r.t
	if t.State != task.StateAwaitingApproval {
		return
	}
	now := m.now()
	t.Approval.State, t.Approval.DecidedAt = task.ApprovalExpired, &now
	r.log.Info("task rejected: its approval expired")
	m.finish(r, task.StateRejected, nil, "rejected: nobody approved it by "+t.Approval.ExpiresAt.Format(time.RFC3339), nil)
}
