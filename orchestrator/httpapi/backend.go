package httpapi

import (
	"context"
	"io"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
)

// Backend is what the API needs of the orchestrator's core. The calls that act
// take the caller, the name of the API token that asked, which the tasks'
// history records. Errors the API answers with a status of their own are
// api.FieldError, task.ErrNotFound and the api.Err* sentinels (errors.Is).
type Backend interface {
	// Submit stores a new task and routes it; the task returned is a snapshot.
	Submit(ctx context.Context, req api.SubmitRequest, caller string) (*task.Task, error)
	// Cancel cancels task id, reason saying why ("" for no reason). For a task
	// already ended it returns the task and api.ErrFinished.
	Cancel(ctx context.Context, id, reason, caller string) (*task.Task, error)
	// Decide approves or rejects task id, with a note. For a task that does not
	// wait for it it returns the task and api.ErrNotAwaitingApproval.
	Decide(ctx context.Context, id string, approve bool, note, caller string) (*task.Task, error)
	// Task returns a snapshot of one task.
	Task(id string) (*task.Task, error)
	// Tasks lists tasks, newest first.
	Tasks(opts api.ListOptions) ([]*task.Task, error)
	// History returns task id's audit trail, oldest first.
	History(id string) ([]*task.Event, error)
	// Agents lists the agents the core knows.
	Agents() []api.AgentInfo
	// WorkTypes lists the work types the agents offer, as their catalogues
	// describe them, by agent type and name.
	WorkTypes() []api.WorkType
	// Deliveries returns the recorded webhook deliveries, newest first.
	Deliveries() []webhook.Delivery
	// Ready reports whether the orchestrator is open and connected to NATS.
	Ready() bool
	// Role says what the orchestrator is in its group.
	Role() api.Role
	// WaitWritten waits until every write of live task id so far is stored.
	WaitWritten(id string)
	// Watch registers a live stream of task id's events, of up to buffer events
	// behind. events is closed at the task's end, when the stream falls behind
	// or when the orchestrator closes; stop ends it early. events is nil when
	// the task does not run here (ended, or run by another orchestrator).
	Watch(id string, buffer int) (events <-chan *task.Event, stop func())
}

// Fleet is what the API needs of the batches and the schedules.
type Fleet interface {
	// CreateBatch makes a batch of req and starts it. With no agent to run it,
	// it returns api.ErrBatchNoTargets.
	CreateBatch(ctx context.Context, req api.BatchRequest, caller string) (*api.Batch, error)
	// Batches lists up to limit batches (0: the default), newest first.
	Batches(limit int) ([]*api.Batch, error)
	// BatchIDs returns the ids of the batches that part, a short id or a prefix
	// (task.ParseIDRef), names, in order, at most limit (0: all).
	BatchIDs(part string, limit int) ([]string, error)
	// GetBatch returns batch id, or task.ErrNotFound.
	GetBatch(id string) (*api.Batch, error)
	// DecideBatch approves or rejects batch id, with a note; for a batch that
	// does not wait for it, api.ErrNotAwaitingApproval.
	DecideBatch(ctx context.Context, id string, approve bool, note, caller string) (*api.Batch, error)
	// BatchChanges returns a channel closed at the next change of a batch.
	BatchChanges() <-chan struct{}
	// AddSchedule stores a new schedule; api.ErrScheduleExists when one has its name.
	AddSchedule(spec api.ScheduleSpec) (*api.Schedule, error)
	// Schedules lists the schedules.
	Schedules() ([]*api.Schedule, error)
	// GetSchedule returns schedule name, or task.ErrNotFound.
	GetSchedule(name string) (*api.Schedule, error)
	// PauseSchedule pauses or resumes schedule name.
	PauseSchedule(name string, pause bool) (*api.Schedule, error)
	// RemoveSchedule deletes schedule name.
	RemoveSchedule(name string) error
	Workflows
}

// Workflows is what the API needs of the workflows and their runs.
type Workflows interface {
	// Workflows lists the workflows, by name.
	Workflows() ([]*api.Workflow, error)
	// GetWorkflow returns workflow name, or task.ErrNotFound.
	GetWorkflow(name string) (*api.Workflow, error)
	// PutWorkflow stores spec, new or in place of the workflow of its name: an
	// *api.FieldError for a spec its check refuses, api.ErrWorkflowFromConfig
	// for a workflow of the config.
	PutWorkflow(spec api.WorkflowSpec) (*api.Workflow, error)
	// DeleteWorkflow deletes workflow name: task.ErrNotFound,
	// api.ErrWorkflowFromConfig.
	DeleteWorkflow(name string) error
	// StartRun starts a run of workflow name: task.ErrNotFound, an
	// *api.FieldError on "params.NAME", api.ErrTooManyRuns.
	StartRun(ctx context.Context, name string, req api.WorkflowRunRequest, caller string) (*api.WorkflowRun, error)
	// GetRun returns run id, or task.ErrNotFound.
	GetRun(id string) (*api.WorkflowRun, error)
	// Runs lists up to limit runs (0: the default) of workflow name (all with
	// ""), newest first.
	Runs(name string, limit int) ([]*api.WorkflowRun, error)
	// CancelRun asks run id to stop; for a run that ended, the run and
	// api.ErrRunFinished.
	CancelRun(ctx context.Context, id, caller string) (*api.WorkflowRun, error)
	// DecideStep approves or rejects the gate step of run id, with a note: an
	// *api.FieldError on "step" for a step the run does not have, the run and
	// api.ErrNotAwaitingApproval for a step that does not wait.
	DecideStep(ctx context.Context, id, step string, approve bool, note, caller string) (*api.WorkflowRun, error)
	// RunChanges returns a channel closed at the next change of a run.
	RunChanges() <-chan struct{}
}

// Store is what the API reads of the task store itself, as the leader wrote it:
// a standby, or a stream of a task that runs elsewhere, follows the store.
type Store interface {
	// Task returns the stored task id.
	Task(id string) (*task.Task, error)
	// Events calls fn with each stored event of task id after seq after, in order.
	Events(id string, after int64, fn func(*task.Event) error) error
	// TaskIDs returns the ids of the stored tasks that part, a short id or a
	// prefix, names (task.Store.TaskIDs).
	TaskIDs(part string, limit int) ([]string, error)
	// WriteOutput writes task id's stored output to w.
	WriteOutput(id string, w io.Writer) (int64, error)
}
