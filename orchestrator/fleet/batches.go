package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
)

// A batch runs one task on each agent of a type that matches (a fan-out): its
// record, kept in the task store, names the agents it was made for and the task
// each one gets. A task's id and request_id are derived from the batch and the
// agent, so the batch's runner (batchrun.go) may make them again after a
// restart, or on a new leader, and find them instead of running them twice.

// ErrBatchNoTargets is returned for a batch request that no agent matches.
var ErrBatchNoTargets = api.ErrBatchNoTargets

// CreateBatch makes a batch of req over the agents that match it now, on behalf
// of by, and starts it. Agents that match and are offline are listed, and get
// no task.
func (f *Fleet) CreateBatch(req api.BatchRequest, by string) (*api.Batch, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	sr := req.TaskFor("")
	if err := f.core.CheckWorkType(&sr); err != nil {
		return nil, err
	}
	if err := f.core.CheckSize(&sr); err != nil {
		return nil, err
	}
	return f.createBatch(req, batchOrigin{id: envelope.NewID(), by: by})
}

// batchOrigin is what made a batch: its id, the schedule's firing or the
// workflow run that made it, and who.
type batchOrigin struct {
	id, schedule string
	fireTime     *time.Time
	by           string
	workflowRun  string
}

// createBatch makes the batch org.id of req, or returns the one stored under
// that id.
func (f *Fleet) createBatch(req api.BatchRequest, org batchOrigin) (*api.Batch, error) {
	id := org.id
	if old, err := f.storedBatch(id); err == nil || !errors.Is(err, task.ErrNotFound) {
		return old, err
	}
	b := &api.Batch{ID: id, State: api.BatchRunning, BatchRequest: req, Schedule: org.schedule, FireTime: org.fireTime,
		WorkflowRun: org.workflowRun, CreatedBy: org.by, CreatedAt: time.Now().UTC()}
	var err error
	if b.Targets, err = f.core.BatchTargets(&req); err != nil {
		return nil, err
	}
	if len(b.Targets) == 0 {
		return nil, ErrBatchNoTargets
	}
	for i := range b.Targets {
		t := &b.Targets[i]
		if t.State == api.TargetRegistering {
			f.awaitRegistration(b, t)
		}
		if t.State != "" {
			continue
		}
		// Each task as it will be sent: over an agent's max_request_bytes, or
		// refused by its schema, it is refused now, as a task pinned to that
		// agent would be.
		tr := req.TaskFor(t.AgentID)
		if err := f.core.CheckWorkType(&tr); err != nil {
			return nil, err
		}
		if err := f.core.CheckSize(&tr); err != nil {
			return nil, err
		}
		t.TaskID, t.State = derivedID("batch-task", id, t.AgentID), api.TargetWaiting
	}
	b.Approval = f.batchApproval(b)
	if err := f.putBatch(b); err != nil {
		return nil, err
	}
	if b.Approval != nil {
		f.hooks.Send(webhook.ApprovalRequested, b)
	}
	view := *b // the runner owns b from now on
	view.Targets = slices.Clone(b.Targets)
	f.batchMade(b)
	return &view, f.refresh(&view)
}

// awaitRegistration has b wait for t's agent, configured and not registered
// yet, for the fleet's grace; without one, t is unknown at once.
func (f *Fleet) awaitRegistration(b *api.Batch, t *api.BatchTarget) {
	if f.grace <= 0 {
		t.State = api.TargetUnknown
		return
	}
	until := b.CreatedAt.Add(f.grace)
	b.RegisterUntil = &until
}

// batchApproval is the waiting approval batch b needs, or nil: its work type
// needs one, or one of the agents it makes a task for does.
func (f *Fleet) batchApproval(b *api.Batch) *task.Approval {
	req := b.TaskFor("")
	if a := f.core.Approval(&req, b.CreatedAt); a != nil {
		return a
	}
	for _, t := range b.Targets {
		if t.State != api.TargetWaiting {
			continue
		}
		req := b.TaskFor(t.AgentID)
		if a := f.core.Approval(&req, b.CreatedAt); a != nil {
			return a
		}
	}
	return nil
}

// putBatch stores b.
func (f *Fleet) putBatch(b *api.Batch) error {
	return putRecord(f.st, BatchRecord, b.ID, "batch "+b.ID, b)
}

// storedBatch reads batch id's record as stored.
func (f *Fleet) storedBatch(id string) (*api.Batch, error) {
	return getRecord[api.Batch](f.st, BatchRecord, id, "batch "+id)
}

// GetBatch returns batch id as it is now, or task.ErrNotFound.
func (f *Fleet) GetBatch(id string) (*api.Batch, error) {
	b, err := f.storedBatch(id)
	if err != nil {
		return nil, err
	}
	return b, f.refresh(b)
}

// Batches returns the batches, newest first, at most limit of them (0: 100).
func (f *Fleet) Batches(limit int) ([]*api.Batch, error) {
	if limit <= 0 {
		limit = 100
	}
	recs, err := f.st.Records(BatchRecord)
	if err != nil {
		return nil, err
	}
	out := make([]*api.Batch, 0, len(recs))
	for _, id := range slices.Sorted(maps.Keys(recs)) {
		var b api.Batch
		if err := json.Unmarshal(recs[id], &b); err != nil {
			return nil, fmt.Errorf("decode batch %s: %w", id, err)
		}
		out = append(out, &b)
	}
	slices.SortStableFunc(out, func(a, b *api.Batch) int { return b.CreatedAt.Compare(a.CreatedAt) })
	out = out[:min(limit, len(out))]
	for _, b := range out {
		if err := f.refresh(b); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DecideBatch approves or rejects batch id, waiting for approval, on behalf of
// by: approved, its runner makes its tasks (approved with it); rejected, it
// ends rejected and makes none. A batch that does not wait is returned with
// task.ErrNotAwaitingApproval.
func (f *Fleet) DecideBatch(id string, approve bool, by, note string) (*api.Batch, error) {
	f.batchMu.Lock()
	defer f.batchMu.Unlock()
	b, err := f.storedBatch(id)
	if err != nil {
		return nil, err
	}
	if b.State != api.BatchRunning || b.Approval == nil || b.Approval.State != task.ApprovalWaiting {
		return b, task.ErrNotAwaitingApproval
	}
	now := time.Now().UTC()
	a := b.Approval
	a.By, a.Note, a.DecidedAt = by, note, &now
	a.State = task.ApprovalApproved
	if !approve {
		a.State = task.ApprovalRejected
		RejectBatch(b, now)
	}
	if err := f.putBatch(b); err != nil {
		return nil, err
	}
	if !approve {
		f.batchFinished(b)
	}
	f.TaskEnded(id) // wakes its runner
	return f.GetBatch(id)
}

// refresh brings a running batch's targets to their tasks' states, and sets
// its state (ViewBatch): a stored finished batch holds its final view already.
func (f *Fleet) refresh(b *api.Batch) error {
	if b.State != api.BatchRunning {
		return nil
	}
	tasks, err := f.batchTasks(b)
	if err != nil {
		return err
	}
	ViewBatch(b, tasks)
	return nil
}

// batchTasks reads the tasks of b's targets that have a task id, by id; a task
// not made yet is absent.
func (f *Fleet) batchTasks(b *api.Batch) (map[string]*task.Task, error) {
	ids := make([]string, 0, len(b.Targets))
	for _, t := range b.Targets {
		if t.TaskID != "" {
			ids = append(ids, t.TaskID)
		}
	}
	return f.core.TasksByID(ids)
}

// stopBatch stops batch id for reason: its waiting targets are skipped and
// its running tasks cancelled; it ends once they have. A batch that ended is
// left as it is.
func (f *Fleet) stopBatch(id, reason string) error {
	f.batchMu.Lock()
	b, err := f.storedBatch(id)
	if err == nil && b.State == api.BatchRunning && b.StopAsked == nil {
		now := time.Now().UTC()
		b.StopAsked = &now
		err = f.putBatch(b)
	}
	f.batchMu.Unlock()
	if err != nil || b.State.Final() {
		return err
	}
	f.TaskEnded(id) // wakes its runner
	tasks, err := f.batchTasks(b)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if t.State.Final() {
			continue
		}
		if _, err := f.core.Cancel(t.ID, reason); err != nil && !errors.Is(err, api.ErrFinished) {
			return err
		}
	}
	return nil
}
