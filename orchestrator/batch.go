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

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
)

// A batch runs one task on each agent of a type that matches (a fan-out): its
// record, kept in the task store, names the agents it was made for and the task
// each one gets. A task's id and request_id are derived from the batch and the
// agent, so the batch's runner (batchrun.go) may make them again after a
// restart, or on a new leader, and find them instead of running them twice.

// BatchRequest asks for a batch: one task like the one it describes on every
// agent of type to_agent that carries all of labels and, when agents is given,
// is one of them.
type BatchRequest struct {
	ToAgent    envelope.AgentType `json:"to_agent"`
	WorkType   string             `json:"work_type"`
	Parameters map[string]any     `json:"parameters,omitempty"`
	// Hints apply to every task; agent_id is not one (each task is pinned to its
	// agent).
	Hints *Hints `json:"hints,omitempty"`
	// Labels keeps the agents that carry every one of them.
	Labels map[string]string `json:"labels,omitempty"`
	// Agents keeps these agents only.
	Agents []string `json:"agents,omitempty"`
	// MaxParallel bounds the tasks of the batch that run at once; 0 runs all at
	// once.
	MaxParallel int `json:"max_parallel,omitempty"`
	// StopOnFailure starts no more tasks once one did not succeed; those running
	// finish.
	StopOnFailure bool `json:"stop_on_failure,omitempty"`
}

// maxBatchAgents bounds the agents a request names.
const maxBatchAgents = 1000

// task is the request of one of the batch's tasks, for agent id.
func (req *BatchRequest) task(agentID string) SubmitRequest {
	h := Hints{AgentID: agentID}
	if req.Hints != nil {
		h.MaxDurationSeconds, h.MaxMemoryMB = req.Hints.MaxDurationSeconds, req.Hints.MaxMemoryMB
	}
	return SubmitRequest{ToAgent: req.ToAgent, WorkType: req.WorkType, Parameters: req.Parameters, Hints: &h}
}

// Validate checks a batch request and names the offending field.
func (req *BatchRequest) Validate() error {
	if req.Hints != nil && req.Hints.AgentID != "" {
		return &FieldError{"hints.agent_id", "is not for a batch: each task is pinned to its agent; name agents in agents"}
	}
	if err := (&SubmitRequest{ToAgent: req.ToAgent, WorkType: req.WorkType, Hints: req.Hints}).Validate(); err != nil {
		return err
	}
	for k, v := range req.Labels {
		if msg := envelope.CheckLabel(k, v); msg != "" {
			return &FieldError{"labels", msg}
		}
	}
	if len(req.Agents) > maxBatchAgents {
		return &FieldError{"agents", fmt.Sprintf("at most %d agents", maxBatchAgents)}
	}
	for i, id := range req.Agents {
		if msg := envelope.CheckAgentID(id); msg != "" {
			return &FieldError{fmt.Sprintf("agents[%d]", i), msg}
		}
	}
	if req.MaxParallel < 0 {
		return &FieldError{"max_parallel", "must be 0 (all at once) or more"}
	}
	return nil
}

// BatchState is where a batch is: running until each of its agents' tasks ended
// or will not start, then succeeded when every one succeeded, or failed.
type BatchState string

// Batch states.
const (
	BatchRunning   BatchState = "running"
	BatchSucceeded BatchState = "succeeded"
	BatchFailed    BatchState = "failed"
	// BatchAwaitingApproval: no task is made until an operator approves the
	// batch (once for all of them); BatchRejected: one said no, or nobody
	// answered in time.
	BatchAwaitingApproval BatchState = "awaiting_approval"
	BatchRejected         BatchState = "rejected"
)

// final reports whether s ends a batch.
func (s BatchState) final() bool {
	return s == BatchSucceeded || s == BatchFailed || s == BatchRejected
}

// Target states that are not a task's: the agent gets no task.
const (
	// TargetOffline: the agent was offline when the batch was made.
	TargetOffline = "offline"
	// TargetUnknown: the agent was named and never heard from.
	TargetUnknown = "unknown"
	// TargetUnsupported: the agent is online and does not offer the work type.
	TargetUnsupported = "unsupported"
	// TargetWaiting: its task waits for room under max_parallel.
	TargetWaiting = "waiting"
	// TargetSkipped: its task was not started, for stop_on_failure.
	TargetSkipped = "skipped"
)

// Batch is a batch as stored and shown.
type Batch struct {
	ID    string     `json:"id"`
	State BatchState `json:"state"`
	BatchRequest
	// Schedule is the schedule whose firing made the batch, and FireTime the
	// firing's time.
	Schedule string     `json:"schedule,omitempty"`
	FireTime *time.Time `json:"fire_time,omitempty"`
	// Targets are the agents the batch was made for, by id.
	Targets []BatchTarget `json:"targets"`
	// Approval is set for a batch that needed an operator's yes: asked once,
	// for all its tasks.
	Approval *Approval `json:"approval,omitempty"`
	// CreatedBy names the API token that made it, or the schedule.
	CreatedBy string `json:"created_by,omitempty"`
	// Counts counts the targets by state.
	Counts     map[string]int `json:"counts"`
	CreatedAt  time.Time      `json:"created_at"`
	FinishedAt *time.Time     `json:"finished_at,omitempty"`
}

// BatchTarget is one agent of a batch and its task.
type BatchTarget struct {
	AgentID string `json:"agent_id"`
	// TaskID is the task it gets (made when there is room); none for an agent
	// that gets none.
	TaskID string `json:"task_id,omitempty"`
	// State is its task's state, or offline, unknown, unsupported, waiting or
	// skipped.
	State           string `json:"state"`
	ProgressPercent int    `json:"progress_percent"`
}

// started reports whether the target's task exists.
func (t *BatchTarget) started() bool {
	return t.TaskID != "" && t.State != TargetWaiting && t.State != TargetSkipped
}

// final reports whether the target is done with: its task ended, or it will
// get none.
func (t *BatchTarget) final() bool {
	return t.TaskID == "" || t.State == TargetSkipped || State(t.State).Final()
}

// ErrBatchNoTargets is returned for a batch request that no agent matches.
var ErrBatchNoTargets = errors.New("no agent matches the batch")

// batchRecord is the kind of a batch's record in the task store.
const batchRecord = "batch"

// CreateBatch makes a batch of req over the agents that match it now and starts
// it. Agents that match and are offline are listed, and get no task.
func (o *Orchestrator) CreateBatch(ctx context.Context, req BatchRequest) (*Batch, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	sr := req.task("")
	if err := o.checkSize(&sr); err != nil {
		return nil, err
	}
	return o.createBatch(req, envelope.NewID(), "", nil, CallerOf(ctx))
}

// createBatch makes the batch id of req, or returns the one stored under id.
func (o *Orchestrator) createBatch(req BatchRequest, id, schedule string, fireTime *time.Time, by string) (*Batch, error) {
	if old, err := o.storedBatch(id); err == nil || !errors.Is(err, ErrNotFound) {
		return old, err
	}
	b := &Batch{ID: id, State: BatchRunning, BatchRequest: req, Schedule: schedule, FireTime: fireTime,
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
		tr := req.task(t.AgentID)
		if err := o.checkSize(&tr); err != nil {
			return nil, err
		}
		t.TaskID, t.State = derivedID("batch-task", id, t.AgentID), TargetWaiting
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
func (o *Orchestrator) batchTargets(req *BatchRequest) []BatchTarget {
	var out []BatchTarget
	named := map[string]bool{}
	for _, id := range req.Agents {
		named[id] = true
	}
	for _, a := range o.agents {
		if a.typ != req.ToAgent || len(named) > 0 && !named[a.id] || !hasLabels(a.labels, req.Labels) {
			continue
		}
		delete(named, a.id)
		t := BatchTarget{AgentID: a.id}
		switch {
		case !a.online:
			t.State = TargetOffline
		case !a.offers(req.WorkType):
			t.State = TargetUnsupported
		}
		out = append(out, t)
	}
	for _, c := range o.cfg.Agents { // configured, never heard from
		if named[c.ID] || len(req.Agents) == 0 && len(req.Labels) == 0 && c.Type == req.ToAgent && o.agents[c.ID] == nil {
			delete(named, c.ID)
			out = append(out, BatchTarget{AgentID: c.ID, State: TargetUnknown})
		}
	}
	for id := range named {
		out = append(out, BatchTarget{AgentID: id, State: TargetUnknown})
	}
	slices.SortFunc(out, func(a, b BatchTarget) int { return strings.Compare(a.AgentID, b.AgentID) })
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

// count sets b.Counts from its targets.
func (b *Batch) count() {
	b.Counts = map[string]int{}
	for _, t := range b.Targets {
		b.Counts[t.State]++
	}
}

// putBatch stores b.
func (o *Orchestrator) putBatch(b *Batch) error {
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encode batch %s: %w", b.ID, err)
	}
	return o.st.PutRecord(batchRecord, b.ID, data)
}

// storedBatch reads batch id's record as stored.
func (o *Orchestrator) storedBatch(id string) (*Batch, error) {
	data, err := o.st.Record(batchRecord, id)
	if err != nil {
		return nil, err
	}
	var b Batch
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("decode batch %s: %w", id, err)
	}
	return &b, nil
}

// GetBatch returns batch id as it is now, or ErrNotFound.
func (o *Orchestrator) GetBatch(id string) (*Batch, error) {
	b, err := o.storedBatch(id)
	if err != nil {
		return nil, err
	}
	return b, o.refresh(b)
}

// Batches returns the batches, newest first, at most limit of them (0: 100).
func (o *Orchestrator) Batches(limit int) ([]*Batch, error) {
	if limit <= 0 {
		limit = 100
	}
	recs, err := o.st.Records(batchRecord)
	if err != nil {
		return nil, err
	}
	out := make([]*Batch, 0, len(recs))
	for _, id := range slices.Sorted(maps.Keys(recs)) {
		var b Batch
		if err := json.Unmarshal(recs[id], &b); err != nil {
			return nil, fmt.Errorf("decode batch %s: %w", id, err)
		}
		out = append(out, &b)
	}
	slices.SortStableFunc(out, func(a, b *Batch) int { return b.CreatedAt.Compare(a.CreatedAt) })
	out = out[:min(limit, len(out))]
	for _, b := range out {
		if err := o.refresh(b); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// refresh brings a running batch's targets to their tasks' states, and sets
// its state: a stored finished batch holds its final view already.
func (o *Orchestrator) refresh(b *Batch) error {
	if b.State != BatchRunning {
		return nil
	}
	if a := b.Approval; a != nil && a.State == ApprovalWaiting {
		b.State = BatchAwaitingApproval
		b.count()
		return nil
	}
	ids := make([]string, 0, len(b.Targets))
	for _, t := range b.Targets {
		if t.TaskID != "" {
			ids = append(ids, t.TaskID)
		}
	}
	tasks, err := o.tasksByID(ids)
	if err != nil {
		return err
	}
	failed := false
	for i := range b.Targets {
		t := &b.Targets[i]
		if t.TaskID == "" {
			continue
		}
		tk := tasks[t.TaskID]
		if tk == nil { // not made yet
			t.State, t.ProgressPercent = TargetWaiting, 0
			continue
		}
		t.State, t.ProgressPercent = string(tk.State), tk.ProgressPercent
		failed = failed || tk.State.Final() && tk.State != StateSucceeded
	}
	if failed && b.StopOnFailure {
		for i := range b.Targets {
			if t := &b.Targets[i]; t.State == TargetWaiting {
				t.State = TargetSkipped
			}
		}
	}
	b.count()
	done, ok := true, true
	for i := range b.Targets {
		t := &b.Targets[i]
		done = done && t.final()
		ok = ok && t.State == string(StateSucceeded)
	}
	if done {
		b.State = BatchFailed
		if ok {
			b.State = BatchSucceeded
		}
	}
	return nil
}
