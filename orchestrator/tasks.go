package orchestrator

import (
	"context"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/core"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// The tasks, through the running core; a standby, which runs none, reads them
// from the store and refuses the rest with ErrClosed (its API forwards those
// to the leader).

// core is the running core, or api.ErrClosed when none runs.
func (o *Orchestrator) core() (*core.Core, error) {
	if c := o.running.Load(); c != nil {
		return c, nil
	}
	return nil, api.ErrClosed
}

// Submit stores a new task and routes it (see core.Core.Submit).
func (o *Orchestrator) Submit(ctx context.Context, req api.SubmitRequest) (*task.Task, error) {
	return apiBackend{o}.Submit(ctx, req, "")
}

// Cancel cancels task id (see core.Core.Cancel).
func (o *Orchestrator) Cancel(ctx context.Context, id, reason string) (*task.Task, error) {
	return apiBackend{o}.Cancel(ctx, id, reason, "")
}

// Decide approves or rejects task id (see core.Core.Decide).
func (o *Orchestrator) Decide(ctx context.Context, id string, approve bool, note string) (*task.Task, error) {
	return apiBackend{o}.Decide(ctx, id, approve, note, "")
}

// Task returns a snapshot of one task.
func (o *Orchestrator) Task(id string) (*task.Task, error) {
	if c := o.running.Load(); c != nil {
		return c.Task(id)
	}
	return o.st.Task(id)
}

// Tasks lists tasks, newest first.
func (o *Orchestrator) Tasks(opts api.ListOptions) ([]*task.Task, error) {
	if c := o.running.Load(); c != nil {
		return c.Tasks(opts)
	}
	return core.ListTasks(o.st, opts, nil)
}

// History returns task id's audit trail (see core.Core.History).
func (o *Orchestrator) History(id string) ([]*task.Event, error) {
	if c := o.running.Load(); c != nil {
		return c.History(id)
	}
	return core.StoredHistory(o.st, id)
}

// Wait blocks until task id has finished, ctx ends or no core runs it, and
// returns a snapshot of the task. It lets an embedding program (and the bench)
// wait for a result without polling.
func (o *Orchestrator) Wait(ctx context.Context, id string) (*task.Task, error) {
	if c := o.running.Load(); c != nil {
		return c.Wait(ctx, id)
	}
	return o.st.Task(id)
}

// Agents lists the agents of the config and every registered one; none on a
// standby.
func (o *Orchestrator) Agents() []api.AgentInfo {
	if c := o.running.Load(); c != nil {
		return c.Agents()
	}
	return []api.AgentInfo{}
}

// WorkTypes lists the work types the registered agents offer, as their
// catalogues describe them; none on a standby (the API forwards it).
func (o *Orchestrator) WorkTypes() []api.WorkType {
	if c := o.running.Load(); c != nil {
		return c.WorkTypes()
	}
	return []api.WorkType{}
}
