package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/fleet"
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

// batchRecord is the kind of a batch's record in the task store.
const batchRecord = "batch"

// CreateBatch makes a batch of req over the agents that match it now and starts
// it. Agents that match and are offline are listed, and get no task.
func (o *Orchestrator) CreateBatch(_ context.Context, req api.BatchRequest) (*api.Batch, error) {
	return o.createBatchBy(req, "")
}

// createBatchBy is CreateBatch on behalf of by, the name of the API token that
// asked.
func (o *Orchestrator) createBatchBy(req api.BatchRequest, by string) (*api.Batch, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	sr := req.TaskFor("")
	if err := o.checkSize(&sr); err != nil {
		return nil, err
	}
	return o.createBatch(req, envelope.NewID(), "", nil, by)
}

// createBatch makes the batch id of req, or returns the one stored under id.
func (o *Orchestrator) createBatch(req api.BatchRequest, id, schedule string, fireTime *time.Time, by string) (*api.Batch, error) {
	if old, err := o.storedBatch(id); err == nil || !errors.Is(err, task.ErrNotFound) {
		return old, err
	}
	b := &api.Batch{ID: id, State: api.BatchRunning, BatchRequest: req, Schedule: schedule, FireTime: fireTime,
		CreatedBy: by, CreatedAt: time.Now().UTC()}
	if err := o.call(func() { b.Targets = o.batchTargets(&req) }); err != nil {
		return nil, ErrClosed
	}
	if len(b.Targets) == 0 {
		return nil, ErrBatchNoTargets
	}
	for i := range b.Targets {
		t := &b.Targets[i]
		if t.State != "" {
			continue
		}
		// Each task as it will be sent: over an agent's max_request_bytes it is
		// refused now, as a task pinned to that agent would be.
		tr := req.TaskFor(t.AgentID)
		if err := o.checkSize(&tr); err != nil {
			return nil, err
		}
		t.TaskID, t.State = derivedID("batch-task", id, t.AgentID), api.TargetWaiting
	}
	if why := o.batchApprovalNeeded(b); why != "" {
		b.Approval = o.newApproval(why, b.CreatedAt)
	}
	if err := o.putBatch(b); err != nil {
		return nil, err
	}
	if b.Approval != nil && o.hooks != nil {
		o.hooks.Send(webhook.ApprovalRequested, b)
	}
	view := *b // the runner owns b from now on
	view.Targets = slices.Clone(b.Targets)
	o.fleet.batchMade(o, b)
	return &view, o.refresh(&view)
}

// batchTargets lists the agents req matches, by id: the online ones offering
// its work type with no state yet (they get a task), the others with theirs.
// The loop runs it.
func (o *Orchestrator) batchTargets(req *api.BatchRequest) []api.BatchTarget {
	var out []api.BatchTarget
	named := map[string]bool{}
	for _, id := range req.Agents {
		named[id] = true
	}
	for _, a := range o.agents {
		if a.typ != req.ToAgent || len(named) > 0 && !named[a.id] || !hasLabels(a.labels, req.Labels) {
			continue
		}
		delete(named, a.id)
		t := api.BatchTarget{AgentID: a.id}
		switch {
		case !a.online:
			t.State = api.TargetOffline
		case !a.offers(req.WorkType):
			t.State = api.TargetUnsupported
		}
		out = append(out, t)
	}
	for _, c := range o.cfg.Agents { // configured, never heard from
		if named[c.ID] || len(req.Agents) == 0 && len(req.Labels) == 0 && c.Type == req.ToAgent && o.agents[c.ID] == nil {
			delete(named, c.ID)
			out = append(out, api.BatchTarget{AgentID: c.ID, State: api.TargetUnknown})
		}
	}
	for id := range named {
		out = append(out, api.BatchTarget{AgentID: id, State: api.TargetUnknown})
	}
	slices.SortFunc(out, func(a, b api.BatchTarget) int { return strings.Compare(a.AgentID, b.AgentID) })
	return out
}

// hasLabels reports whether have holds every label of want.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// putBatch stores b.
func (o *Orchestrator) putBatch(b *api.Batch) error {
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encode batch %s: %w", b.ID, err)
	}
	return o.st.PutRecord(batchRecord, b.ID, data)
}

// storedBatch reads batch id's record as stored.
func (o *Orchestrator) storedBatch(id string) (*api.Batch, error) {
	data, err := o.st.Record(batchRecord, id)
	if err != nil {
		return nil, err
	}
	var b api.Batch
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("decode batch %s: %w", id, err)
	}
	return &b, nil
}

// GetBatch returns batch id as it is now, or ErrNotFound.
func (o *Orchestrator) GetBatch(id string) (*api.Batch, error) {
	b, err := o.storedBatch(id)
	if err != nil {
		return nil, err
	}
	return b, o.refresh(b)
}

// Batches returns the batches, newest first, at most limit of them (0: 100).
func (o *Orchestrator) Batches(limit int) ([]*api.Batch, error) {
	if limit <= 0 {
		limit = 100
	}
	recs, err := o.st.Records(batchRecord)
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
		if err := o.refresh(b); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// refresh brings a running batch's targets to their tasks' states, and sets
// its state (fleet.ViewBatch): a stored finished batch holds its final view
// already.
func (o *Orchestrator) refresh(b *api.Batch) error {
	if b.State != api.BatchRunning {
		return nil
	}
	tasks, err := o.batchTasks(b)
	if err != nil {
		return err
	}
	fleet.ViewBatch(b, tasks)
	return nil
}

// batchTasks reads the tasks of b's targets that have a task id, by id; a task
// not made yet is absent.
func (o *Orchestrator) batchTasks(b *api.Batch) (map[string]*task.Task, error) {
	ids := make([]string, 0, len(b.Targets))
	for _, t := range b.Targets {
		if t.TaskID != "" {
			ids = append(ids, t.TaskID)
		}
	}
	return o.tasksByID(ids)
}
