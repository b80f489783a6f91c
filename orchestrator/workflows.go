package orchestrator

import (
	"context"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/core"
	"github.com/chiffon-dev/chiffon/orchestrator/fleet"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/workflow"
)

// The workflows are package fleet's too: their definitions (the config's and
// the API's records) and their runs, each run by a runner of the fleet. The
// orchestrator's workflow methods hand the calls to it; a name no workflow
// may have is not found, without a look at the store.

// Errors of the workflow calls (package fleet's).
var (
	// ErrTooManyRuns is returned for a run of a workflow that runs max_runs
	// runs already.
	ErrTooManyRuns = fleet.ErrTooManyRuns
	// ErrWorkflowFromConfig is returned for a change to a workflow of the
	// config.
	ErrWorkflowFromConfig = fleet.ErrWorkflowFromConfig
	// ErrRunFinished is returned for a cancel of a run that ended.
	ErrRunFinished = fleet.ErrRunFinished
)

// Workflows returns every workflow, the config's and the API's, by name.
func (o *Orchestrator) Workflows() ([]*api.Workflow, error) { return o.fleet.Workflows() }

// GetWorkflow returns workflow name, or task.ErrNotFound.
func (o *Orchestrator) GetWorkflow(name string) (*api.Workflow, error) {
	if !workflow.ValidName(name) {
		return nil, task.ErrNotFound
	}
	return o.fleet.GetWorkflow(name)
}

// PutWorkflow checks spec whole and stores it, new or in place of the workflow
// of its name; one of the config is refused with ErrWorkflowFromConfig, a spec
// the check refuses with an *api.FieldError naming its field.
func (o *Orchestrator) PutWorkflow(spec api.WorkflowSpec) (*api.Workflow, error) {
	return o.fleet.PutWorkflow(spec)
}

// DeleteWorkflow deletes workflow name; its runs stay, and running ones go on.
func (o *Orchestrator) DeleteWorkflow(name string) error {
	if !workflow.ValidName(name) {
		return task.ErrNotFound
	}
	return o.fleet.DeleteWorkflow(name)
}

// StartRun starts a run of workflow name with req's parameters. It is refused
// with ErrTooManyRuns when the workflow runs max_runs runs, and with an
// *api.FieldError on "params.NAME" for parameters its spec refuses.
func (o *Orchestrator) StartRun(ctx context.Context, name string, req api.WorkflowRunRequest) (*api.WorkflowRun, error) {
	return apiBackend{o}.StartRun(ctx, name, req, "")
}

// GetRun returns workflow run id, or task.ErrNotFound.
func (o *Orchestrator) GetRun(id string) (*api.WorkflowRun, error) { return o.fleet.GetRun(id) }

// Runs returns the runs of workflow name (every workflow's with ""), newest
// first, at most limit of them (0: 100).
func (o *Orchestrator) Runs(name string, limit int) ([]*api.WorkflowRun, error) {
	return o.fleet.Runs(name, limit)
}

// CancelRun asks run id to stop: its running steps are cancelled, the others
// skipped, and it ends cancelled. A run that ended is returned with
// ErrRunFinished.
func (o *Orchestrator) CancelRun(ctx context.Context, id string) (*api.WorkflowRun, error) {
	return apiBackend{o}.CancelRun(ctx, id, "")
}

// DecideStep approves or rejects the gate step of run id, with a note: approved,
// the step succeeds; rejected, it fails. A step that does not wait is refused
// with api.ErrNotAwaitingApproval, a step the run does not have with an
// *api.FieldError on "step".
func (o *Orchestrator) DecideStep(ctx context.Context, id, step string, approve bool, note string) (*api.WorkflowRun, error) {
	return apiBackend{o}.DecideStep(ctx, id, step, approve, note, "")
}

// StartRun is Orchestrator.StartRun on behalf of caller.
func (b apiBackend) StartRun(_ context.Context, name string, req api.WorkflowRunRequest, caller string) (*api.WorkflowRun, error) {
	if !workflow.ValidName(name) {
		return nil, task.ErrNotFound
	}
	if _, err := b.core(); err != nil {
		return nil, err // a run needs the fleet that runs beside a core
	}
	return b.fleet.StartRun(name, req, caller)
}

// CancelRun is Orchestrator.CancelRun on behalf of caller.
func (b apiBackend) CancelRun(_ context.Context, id, caller string) (*api.WorkflowRun, error) {
	if _, err := b.core(); err != nil {
		return nil, err
	}
	return b.fleet.CancelRun(id, caller)
}

// DecideStep is Orchestrator.DecideStep on behalf of caller.
func (b apiBackend) DecideStep(_ context.Context, id, step string, approve bool, note, caller string) (*api.WorkflowRun, error) {
	if err := core.CheckNote(note); err != nil {
		return nil, err
	}
	if _, err := b.core(); err != nil {
		return nil, err
	}
	return b.fleet.DecideStep(id, step, approve, caller, note)
}

// RunChanges returns a channel closed at the next change of a workflow run
// (or of a batch: the fleet tells of both at once).
func (b apiBackend) RunChanges() <-chan struct{} { return b.fleet.Changes() }
