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
	"github.com/chiffon-dev/chiffon/workflow"
)

// A workflow is steps that wait on steps (api.WorkflowSpec); a run is one
// execution of it, kept as a record in the task store with its steps' states.
// Each step's task or batch has an id derived from the run and the step, so
// a run's runner (workflowrun.go), after a restart or on a new leader, finds
// what an earlier runner made and makes nothing twice. Workflows come from
// the orchestrator's config (read-only here) or through the API (records).

// Errors of the workflow calls.
var (
	// ErrTooManyRuns refuses a run of a workflow that runs max_runs runs.
	ErrTooManyRuns = api.ErrTooManyRuns
	// ErrWorkflowFromConfig refuses a change of a workflow of the config.
	ErrWorkflowFromConfig = api.ErrWorkflowFromConfig
	// ErrRunFinished refuses a cancel of a run that ended.
	ErrRunFinished = api.ErrRunFinished
)

// Workflows returns every workflow, by name.
func (f *Fleet) Workflows() ([]*api.Workflow, error) {
	recs, err := f.st.Records(WorkflowRecord)
	if err != nil {
		return nil, err
	}
	byName := map[string]*api.Workflow{}
	for name, data := range recs {
		var w api.Workflow
		if err := json.Unmarshal(data, &w); err != nil {
			return nil, fmt.Errorf("decode workflow %s: %w", name, err)
		}
		byName[name] = &w
	}
	for _, w := range f.configured {
		byName[w.Name] = w
	}
	out := make([]*api.Workflow, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, byName[name])
	}
	return out, nil
}

// GetWorkflow returns workflow name, or task.ErrNotFound.
func (f *Fleet) GetWorkflow(name string) (*api.Workflow, error) {
	if w := f.configured[name]; w != nil {
		return w, nil
	}
	return getRecord[api.Workflow](f.st, WorkflowRecord, name, "workflow "+name)
}

// PutWorkflow checks spec whole (workflow.Check) and stores it, new or in
// place of the workflow of its name; a workflow of the config cannot be
// replaced. Runs already running keep the spec they began with.
func (f *Fleet) PutWorkflow(spec api.WorkflowSpec) (*api.Workflow, error) {
	if err := workflow.Check(&spec); err != nil {
		return nil, err
	}
	if f.configured[spec.Name] != nil {
		return nil, ErrWorkflowFromConfig
	}
	w := &api.Workflow{WorkflowSpec: spec, Source: api.WorkflowFromAPI, UpdatedAt: time.Now().UTC()}
	if err := putRecord(f.st, WorkflowRecord, w.Name, "workflow "+w.Name, w); err != nil {
		return nil, err
	}
	return w, nil
}

// DeleteWorkflow deletes workflow name; its runs stay, and running ones go
// on.
func (f *Fleet) DeleteWorkflow(name string) error {
	if f.configured[name] != nil {
		return ErrWorkflowFromConfig
	}
	if _, err := f.GetWorkflow(name); err != nil {
		return err
	}
	return f.st.PutRecord(WorkflowRecord, name, nil)
}

// StartRun starts a run of workflow name with req's parameters, on behalf of
// by. It is refused with ErrTooManyRuns when the workflow runs max_runs runs,
// and with an *api.FieldError for parameters its spec refuses.
func (f *Fleet) StartRun(name string, req api.WorkflowRunRequest, by string) (*api.WorkflowRun, error) {
	return f.startRun(name, req.Params, envelope.NewID(), "", nil, by)
}

// startRun makes run id of workflow name, or returns the one stored under id
// (a schedule's firing made again).
func (f *Fleet) startRun(name string, given map[string]any, id, schedule string, fireTime *time.Time, by string) (*api.WorkflowRun, error) {
	w, err := f.GetWorkflow(name)
	if err != nil {
		return nil, err
	}
	params, err := workflow.RunParams(&w.WorkflowSpec, given)
	if err != nil {
		return nil, err
	}
	f.runMu.Lock()
	defer f.runMu.Unlock()
	if old, err := f.storedRun(id); err == nil || !errors.Is(err, task.ErrNotFound) {
		return old, err
	}
	running, err := f.runningRuns()
	if err != nil {
		return nil, err
	}
	n := 0
	for _, r := range running {
		if r.Workflow == name {
			n++
		}
	}
	if n >= max(w.MaxRuns, 1) {
		return nil, fmt.Errorf("%w (%d)", ErrTooManyRuns, max(w.MaxRuns, 1))
	}
	now := time.Now().UTC()
	run := &api.WorkflowRun{ID: id, Workflow: name, State: api.RunRunning, Params: params, Spec: w.WorkflowSpec,
		Schedule: schedule, FireTime: fireTime, CreatedBy: by, CreatedAt: now}
	if d, err := time.ParseDuration(w.Timeout); err == nil && d > 0 {
		deadline := now.Add(d)
		run.Deadline = &deadline
	}
	for _, s := range w.Steps {
		run.Steps = append(run.Steps, api.StepRun{Name: s.Name, State: api.StepPending})
	}
	if err := f.putRun(run); err != nil {
		return nil, err
	}
	f.runMade(run.ID)
	return run, nil
}

// GetRun returns run id as stored, or task.ErrNotFound.
func (f *Fleet) GetRun(id string) (*api.WorkflowRun, error) { return f.storedRun(id) }

// Runs returns the runs of workflow (all with ""), newest first, at most limit
// of them (0: 100).
func (f *Fleet) Runs(workflowName string, limit int) ([]*api.WorkflowRun, error) {
	if limit <= 0 {
		limit = 100
	}
	all, err := f.allRuns()
	if err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(all, func(r *api.WorkflowRun) bool { return workflowName != "" && r.Workflow != workflowName })
	slices.SortStableFunc(out, func(a, b *api.WorkflowRun) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out[:min(limit, len(out))], nil
}

// CancelRun asks run id to stop: its runner cancels the running steps and
// skips the others, and the run ends cancelled. A run that ended is returned
// with ErrRunFinished.
func (f *Fleet) CancelRun(id, by string) (*api.WorkflowRun, error) {
	f.runMu.Lock()
	run, err := f.storedRun(id)
	if err == nil && run.State.Final() {
		err = ErrRunFinished
	}
	if err == nil && run.CancelAsked == nil {
		now := time.Now().UTC()
		run.CancelAsked = &now
		err = f.putRun(run)
		f.log.Info("workflow run cancel asked", "run_id", id, "by", by)
	}
	f.runMu.Unlock()
	if err != nil {
		return run, err
	}
	f.RunChanged(id)
	return run, nil
}

// DecideStep answers the gate step of run id, waiting for approval, on behalf
// of by: approved, the step succeeds; rejected, it fails. A step that does not
// wait is refused with task.ErrNotAwaitingApproval.
func (f *Fleet) DecideStep(id, step string, approve bool, by, note string) (*api.WorkflowRun, error) {
	f.runMu.Lock()
	run, err := f.storedRun(id)
	if err != nil {
		f.runMu.Unlock()
		return nil, err
	}
	s := run.Step(step)
	if s == nil {
		f.runMu.Unlock()
		return nil, &api.FieldError{Field: "step", Message: fmt.Sprintf("run %s has no step %q", id, step)}
	}
	if run.State.Final() || s.State != api.StepRunning || s.Approval == nil || s.Approval.State != task.ApprovalWaiting {
		f.runMu.Unlock()
		return run, task.ErrNotAwaitingApproval
	}
	now := time.Now().UTC()
	a := *s.Approval
	a.By, a.Note, a.DecidedAt, a.State = by, note, &now, task.ApprovalApproved
	if !approve {
		a.State = task.ApprovalRejected
	}
	s.Approval = &a
	err = f.putRun(run)
	f.runMu.Unlock()
	if err != nil {
		return nil, err
	}
	f.RunChanged(id)
	return run, nil
}

// putRun stores run.
func (f *Fleet) putRun(run *api.WorkflowRun) error {
	if err := putRecord(f.st, RunRecord, run.ID, "workflow run "+run.ID, run); err != nil {
		return err
	}
	f.changed.bump()
	return nil
}

// storedRun reads run id's record.
func (f *Fleet) storedRun(id string) (*api.WorkflowRun, error) {
	return getRecord[api.WorkflowRun](f.st, RunRecord, id, "workflow run "+id)
}

// allRuns reads every run's record.
func (f *Fleet) allRuns() ([]*api.WorkflowRun, error) {
	recs, err := f.st.Records(RunRecord)
	if err != nil {
		return nil, fmt.Errorf("read workflow runs: %w", err)
	}
	out := make([]*api.WorkflowRun, 0, len(recs))
	for id, data := range recs {
		var r api.WorkflowRun
		if err := json.Unmarshal(data, &r); err != nil {
			f.log.Error("workflow run record unreadable; it is left as it is", "run_id", id, "err", err)
			continue
		}
		out = append(out, &r)
	}
	return out, nil
}

// runningRuns reads the runs whose record says they run.
func (f *Fleet) runningRuns() ([]*api.WorkflowRun, error) {
	all, err := f.allRuns()
	return slices.DeleteFunc(all, func(r *api.WorkflowRun) bool { return r.State.Final() }), err
}
