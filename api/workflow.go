package api

import (
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// WorkflowSpec is a workflow as an operator writes it (in the orchestrator's
// config, or through the API): named steps, each a task, a batch or an
// approval gate, with the steps it needs. The workflow package checks one
// whole (Check) and expands its templates.
type WorkflowSpec struct {
	// Name names the workflow: 1 to 63 of a-z, 0-9, '_' and '-', starting with
	// a letter or digit.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Params are the run's own parameters, by name; a run gives them as
	// --param k=v, typed by these.
	Params map[string]WorkflowParam `json:"params,omitempty"`
	// Steps run in the order their needs allow; at least one.
	Steps []WorkflowStep `json:"steps"`
	// Timeout bounds a run ("2h"): past it the running steps are cancelled,
	// the others skipped, and the run fails. "" means none.
	Timeout string `json:"timeout,omitempty"`
	// MaxRuns bounds the runs of this workflow at once; 0 means 1. A run asked
	// for beyond it is refused (ErrTooManyRuns).
	MaxRuns int `json:"max_runs,omitempty"`
}

// WorkflowParam is one parameter of a workflow's runs.
type WorkflowParam struct {
	// Type is string, integer, number, boolean or object; "" is string.
	Type        string `json:"type,omitempty"`
	Description string `json:"description,omitempty"`
	// Required params must be given; the others take Default, or are absent.
	Required bool `json:"required,omitempty"`
	Default  any  `json:"default,omitempty"`
}

// WorkflowStep is one step: exactly one of Task, Batch and Approval.
type WorkflowStep struct {
	// Name names the step within its workflow, as a workflow's name is named.
	Name string `json:"name"`
	// Needs are the steps it waits for, each with its condition; it starts
	// once every one of them ended and every condition holds, and is skipped
	// once one cannot hold.
	Needs []WorkflowNeed `json:"needs,omitempty"`
	// Task is the task the step makes; its parameters may hold templates.
	Task *SubmitRequest `json:"task,omitempty"`
	// Batch is the batch the step makes; its parameters may hold templates.
	Batch *BatchRequest `json:"batch,omitempty"`
	// Approval makes the step a gate: it waits for an operator's decision.
	Approval *WorkflowGate `json:"approval,omitempty"`
}

// WorkflowGate is an approval step.
type WorkflowGate struct {
	// Note tells the operator what they approve.
	Note string `json:"note,omitempty"`
	// Expires bounds the wait ("24h"): unanswered past it, the gate fails.
	// "" means the run's timeout alone bounds it.
	Expires string `json:"expires,omitempty"`
}

// Conditions of a need.
const (
	// NeedSuccess holds when the needed step succeeded (the default).
	NeedSuccess = "success"
	// NeedFailure holds when the needed step failed, or was skipped because a
	// step before it failed: the branch through it failed.
	NeedFailure = "failure"
	// NeedAlways holds once the needed step ended, however.
	NeedAlways = "always"
)

// WorkflowNeed is one edge: the step waits for Step, and runs only if When
// holds of how it ended.
type WorkflowNeed struct {
	Step string `json:"step"`
	// When is success (""), failure or always.
	When string `json:"when,omitempty"`
}

// Condition is n's When, with its default.
func (n WorkflowNeed) Condition() string {
	if n.When == "" {
		return NeedSuccess
	}
	return n.When
}

// Workflow is a workflow as stored and shown.
type Workflow struct {
	WorkflowSpec
	// Source is "config" for a workflow of the orchestrator's config (the API
	// cannot change it) or "api".
	Source    string    `json:"source"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Workflow sources.
const (
	WorkflowFromConfig = "config"
	WorkflowFromAPI    = "api"
)

// WorkflowRunRequest asks for a run of a workflow.
type WorkflowRunRequest struct {
	// Params are the run's parameters, checked against the workflow's.
	Params map[string]any `json:"params,omitempty"`
}

// RunState is where a workflow run is.
type RunState string

// Run states.
const (
	RunRunning   RunState = "running"
	RunSucceeded RunState = "succeeded"
	RunFailed    RunState = "failed"
	RunCancelled RunState = "cancelled"
)

// Final reports whether s ends a run.
func (s RunState) Final() bool { return s != RunRunning }

// StepState is where a step of a run is.
type StepState string

// Step states.
const (
	// StepPending: it waits for its needs.
	StepPending StepState = "pending"
	// StepRunning: its task or batch runs, or its gate waits.
	StepRunning   StepState = "running"
	StepSucceeded StepState = "succeeded"
	StepFailed    StepState = "failed"
	// StepSkipped: it will not run (SkipReason says why).
	StepSkipped StepState = "skipped"
)

// Final reports whether s ends a step.
func (s StepState) Final() bool {
	return s == StepSucceeded || s == StepFailed || s == StepSkipped
}

// WorkflowRun is one run of a workflow, as stored and shown.
type WorkflowRun struct {
	ID       string   `json:"id"`
	Workflow string   `json:"workflow"`
	State    RunState `json:"state"`
	// Params are the run's parameters, defaults filled in.
	Params map[string]any `json:"params,omitempty"`
	// Spec is the workflow as it was when the run began: a later change does
	// not move a running run.
	Spec WorkflowSpec `json:"spec"`
	// Steps are the spec's steps, in its order.
	Steps []StepRun `json:"steps"`
	// Error says why a run failed or was cancelled, when not a step's failure
	// alone: its timeout, a cancel.
	Error string `json:"error,omitempty"`
	// Schedule is the schedule whose firing made the run, at FireTime.
	Schedule   string     `json:"schedule,omitempty"`
	FireTime   *time.Time `json:"fire_time,omitempty"`
	CreatedBy  string     `json:"created_by,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	Deadline   *time.Time `json:"deadline,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// CancelAsked is set once a cancel was asked; the runner carries it out.
	CancelAsked *time.Time `json:"cancel_asked,omitempty"`
}

// StepRun is one step of a run.
type StepRun struct {
	Name  string    `json:"name"`
	State StepState `json:"state"`
	// TaskID or BatchID is what the step made (derived from the run and the
	// step: making it again finds it).
	TaskID  string `json:"task_id,omitempty"`
	BatchID string `json:"batch_id,omitempty"`
	// Output is the step's structured output, once it ended: a task's
	// structured_output, a batch's by agent id.
	Output any `json:"output,omitempty"`
	// SkipReason says why a skipped step will not run; UpstreamFailed is set
	// when it is skipped because a step it needs failed (or was skipped so).
	SkipReason     string `json:"skip_reason,omitempty"`
	UpstreamFailed bool   `json:"upstream_failed,omitempty"`
	// Error says why it failed.
	Error string `json:"error,omitempty"`
	// Approval is a gate's approval.
	Approval   *task.Approval `json:"approval,omitempty"`
	StartedAt  *time.Time     `json:"started_at,omitempty"`
	FinishedAt *time.Time     `json:"finished_at,omitempty"`
}

// Step returns the run's step name, or nil.
func (r *WorkflowRun) Step(name string) *StepRun {
	for i := range r.Steps {
		if r.Steps[i].Name == name {
			return &r.Steps[i]
		}
	}
	return nil
}

// WorkflowStepEvent is the data of a step's webhook events
// (workflow.step.started, workflow.step.finished).
type WorkflowStepEvent struct {
	RunID    string  `json:"run_id"`
	Workflow string  `json:"workflow"`
	Step     StepRun `json:"step"`
}
