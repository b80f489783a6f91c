package api

import (
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// BatchRequest asks for a batch: one task like the one it describes on every
// agent of type to_agent that carries all of labels and, when agents is given,
// is one of them.
type BatchRequest struct {
	ToAgent    envelope.AgentType `json:"to_agent"`
	WorkType   string             `json:"work_type"`
	Parameters map[string]any     `json:"parameters,omitempty"`
	// Hints apply to every task; agent_id is not one (each task is pinned to its
	// agent).
	Hints *task.Hints `json:"hints,omitempty"`
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

// TaskFor is the request of the batch's task for agent agentID.
func (req *BatchRequest) TaskFor(agentID string) SubmitRequest {
	var h task.Hints
	if req.Hints != nil {
		h = *req.Hints
	}
	h.AgentID = agentID
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

// Final reports whether s ends a batch.
func (s BatchState) Final() bool {
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
	// TargetRegistering: a configured agent that has not registered yet; the
	// batch waits for it until RegisterUntil, then it is unknown.
	TargetRegistering = "registering"
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
	Approval *task.Approval `json:"approval,omitempty"`
	// CreatedBy names the API token that made it, or the schedule.
	CreatedBy string `json:"created_by,omitempty"`
	// RegisterUntil is set while targets were registering when the batch was
	// made: the end of the grace it waits for their agents (register_grace).
	RegisterUntil *time.Time `json:"register_until,omitempty"`
	// WorkflowRun is the workflow run whose step made the batch, if any.
	WorkflowRun string `json:"workflow_run,omitempty"`
	// StopAsked is set once the batch was asked to stop (its workflow run was
	// cancelled): its waiting targets are skipped, its running tasks cancelled.
	StopAsked *time.Time `json:"stop_asked,omitempty"`
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
	// State is its task's state, or offline, unknown, unsupported, waiting,
	// skipped or registering.
	State           string `json:"state"`
	ProgressPercent int    `json:"progress_percent"`
}

// Started reports whether the target's task exists.
func (t *BatchTarget) Started() bool {
	return t.TaskID != "" && t.State != TargetWaiting && t.State != TargetSkipped
}

// Final reports whether the target is done with: its task ended, or it will
// get none.
func (t *BatchTarget) Final() bool {
	return t.TaskID == "" && t.State != TargetRegistering || t.State == TargetSkipped || task.State(t.State).Final()
}

// Count sets b.Counts from its targets.
func (b *Batch) Count() {
	b.Counts = map[string]int{}
	for _, t := range b.Targets {
		b.Counts[t.State]++
	}
}
