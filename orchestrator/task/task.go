// Package task holds the records an orchestrator keeps of each task (Task, its
// Events) and Store, the interface of the storage that keeps them. The orchestrator
// re-exports these types under its own name; a storage backend (badgerstore,
// memstore) imports this package alone, so that the orchestrator can open one without
// an import cycle.
package task

import (
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

// State is where a task is in its life.
type State string

// Task states. AwaitingApproval, Pending, Dispatched and Running are unfinished;
// the rest are final.
const (
	// StateAwaitingApproval: stored, waiting for an operator's yes before any
	// dispatch (see Approval).
	StateAwaitingApproval State = "awaiting_approval"
	// StatePending: stored, waiting for an agent (queued, or between retries).
	StatePending State = "pending"
	// StateDispatched: sent to an agent, not acknowledged yet.
	StateDispatched State = "dispatched"
	// StateRunning: the agent acknowledged it and reports progress.
	StateRunning State = "running"
	// StateSucceeded: the work_result said success.
	StateSucceeded State = "succeeded"
	// StateFailed: the work ran and its work_result said failed.
	StateFailed State = "failed"
	// StateCancelled: cancelled by an operator.
	StateCancelled State = "cancelled"
	// StateError: no result could be obtained (a protocol error, or retries spent);
	// Task.Error says why.
	StateError State = "error"
	// StateRejected: an operator said no to it, or nobody answered in time; it
	// never reached an agent.
	StateRejected State = "rejected"
)

// States lists every task state.
var States = []State{StateAwaitingApproval, StatePending, StateDispatched, StateRunning, StateSucceeded, StateFailed,
	StateCancelled, StateError, StateRejected}

// Final reports whether s ends a task.
func (s State) Final() bool {
	switch s {
	case StateSucceeded, StateFailed, StateCancelled, StateError, StateRejected:
		return true
	}
	return false
}

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	for _, v := range States {
		if v == s {
			return true
		}
	}
	return false
}

// Hints are a task's scheduling hints, as in the work_request.
type Hints struct {
	// MaxDurationSeconds bounds the whole task, from its first dispatch; the ack and
	// inactivity timeouts still apply to each attempt.
	MaxDurationSeconds int64 `json:"max_duration_seconds,omitempty"`
	// MaxMemoryMB is the memory the task needs.
	MaxMemoryMB int64 `json:"max_memory_mb,omitempty"`
	// AgentID pins the task to one agent instance.
	AgentID string `json:"agent_id,omitempty"`
	// GPUVRAMMB is the GPU memory the task needs on one GPU, in MiB: it goes
	// only to an agent with a GPU that has that much free. nil for a task that
	// needs no GPU; when set, a positive integer (see GPUNeed).
	GPUVRAMMB *int64 `json:"gpu_vram_mb,omitempty"`
}

// GPUNeed is the GPU memory the task needs on one GPU, in MiB; 0 for none.
func (h *Hints) GPUNeed() int64 {
	if h == nil || h.GPUVRAMMB == nil {
		return 0
	}
	return *h.GPUVRAMMB
}

// Task is one piece of work and everything known about it.
type Task struct {
	ID         string             `json:"id"`
	State      State              `json:"state"`
	ToAgent    envelope.AgentType `json:"to_agent"`
	WorkType   string             `json:"work_type"`
	Parameters map[string]any     `json:"parameters,omitempty"`
	Hints      *Hints             `json:"hints,omitempty"`
	// AgentID is the agent instance the task was last sent to.
	AgentID   string `json:"agent_id"`
	RequestID string `json:"request_id"`
	TraceID   string `json:"trace_id"`
	// BatchID is the batch the task is one of, if any.
	BatchID string `json:"batch_id,omitempty"`
	// WorkflowRun is the workflow run whose step made the task, if any.
	WorkflowRun string `json:"workflow_run,omitempty"`
	// Schedule is the schedule whose firing made the task (or its batch), and
	// FireTime that firing's time.
	Schedule string     `json:"schedule,omitempty"`
	FireTime *time.Time `json:"fire_time,omitempty"`
	// Attempts counts dispatches, the first included.
	Attempts int `json:"attempts"`
	// Retries lists each retry with the error that caused it and the wait before it.
	Retries         []Retry    `json:"retries,omitempty"`
	ProgressPercent int        `json:"progress_percent"`
	Steps           []StepInfo `json:"steps"`
	Result          *Result    `json:"result,omitempty"`
	// Error is why the task ended in StateError, and is set only then; the errors
	// of earlier attempts are in Retries.
	Error *TaskError `json:"error,omitempty"`
	// OutputBytes is the length of the output held so far.
	OutputBytes int64 `json:"output_bytes"`
	// OutputComplete is true once the whole output is held, with no gap.
	OutputComplete bool `json:"output_complete"`
	// OutputCapped is true when the output went past the orchestrator's
	// max_output_bytes: the bytes past it were dropped, and OutputComplete is
	// false.
	OutputCapped bool `json:"output_capped,omitempty"`
	// Approval is set for a task that needed an operator's yes.
	Approval        *Approval  `json:"approval,omitempty"`
	CancelRequested bool       `json:"cancel_requested,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	FirstDispatchAt *time.Time `json:"first_dispatch_at,omitempty"`
	LastAttemptAt   *time.Time `json:"last_attempt_at,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
}

// Approval is where a task's approval stands.
type Approval struct {
	// State is waiting, approved, rejected or expired.
	State string `json:"state"`
	// Why says what asked for it: the work type's config, or the agent's.
	Why         string    `json:"why"`
	RequestedAt time.Time `json:"requested_at"`
	// ExpiresAt is when the task is rejected if nobody answered.
	ExpiresAt time.Time `json:"expires_at"`
	// By names the API token that answered, Note is what it said.
	By        string     `json:"by,omitempty"`
	Note      string     `json:"note,omitempty"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
}

// Approval states.
const (
	ApprovalWaiting  = "waiting"
	ApprovalApproved = "approved"
	ApprovalRejected = "rejected"
	ApprovalExpired  = "expired"
)

// ErrNotAwaitingApproval is returned when approving or rejecting a task, or a
// batch, that does not wait for it.
var ErrNotAwaitingApproval = errors.New("task does not await approval")

// Retry records one retry of a task.
type Retry struct {
	// Attempt is the number of the attempt that failed.
	Attempt int `json:"attempt"`
	// Code is the error code that caused the retry.
	Code    int    `json:"code"`
	Message string `json:"message"`
	// AgentID is the agent the failed attempt went to.
	AgentID string `json:"agent_id,omitempty"`
	// WaitMS is how long the orchestrator waited before the retry.
	WaitMS int64     `json:"wait_ms"`
	At     time.Time `json:"at"`
}

// StepInfo is the latest known state of one step.
type StepInfo struct {
	Number    int64     `json:"number"`
	Name      string    `json:"name"`
	Status    string    `json:"status"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Result is the task's work_result, without its output (see the output endpoint).
type Result struct {
	Status        string                  `json:"status"`
	ExitCode      int64                   `json:"exit_code"`
	ResourcesUsed *envelope.ResourcesUsed `json:"resources_used,omitempty"`
	// OutputTruncated is true when the work_result carried only the output's tail.
	OutputTruncated bool `json:"output_truncated,omitempty"`
	// OutputTotalBytes is the whole output's length, as the agent reported it.
	OutputTotalBytes int64 `json:"output_total_bytes"`
	// StructuredOutput is the handler's machine-readable result, the work_result's
	// x_custom_fields.structured_output (a script's last stdout line of JSON).
	StructuredOutput json.RawMessage `json:"structured_output,omitempty"`
	// GPUs are the GPUs the task ran on, from the work_result's
	// x_custom_fields.gpus; ResourcesUsed.GPUVRAMMB is their peaks' sum.
	GPUs []GPUUse  `json:"gpus,omitempty"`
	At   time.Time `json:"at"`
}

// GPUUse is what a task held of one GPU of its agent.
type GPUUse struct {
	// Index is the GPU's index on its machine, UUID the driver's id of it.
	Index int    `json:"index"`
	UUID  string `json:"uuid,omitempty"`
	// Name is the GPU's model as its agent last reported it; "" when the
	// agent did not list that GPU.
	Name string `json:"name,omitempty"`
	// PeakMB is the most memory the task's processes held on it at once, in MiB.
	PeakMB int64 `json:"peak_vram_mb"`
}

// NamedGPUUses are uses, what a work_result says its task held of each GPU,
// named from gpus, its agent's GPUs as last reported (by uuid, else by index).
func NamedGPUUses(uses []envelope.GPUUse, gpus []envelope.GPU) []GPUUse {
	var out []GPUUse
	for _, u := range uses {
		name := ""
		for _, g := range gpus {
			if u.UUID != "" && g.UUID == u.UUID || u.UUID == "" && g.Index == u.Index {
				name = g.Name
			}
		}
		out = append(out, GPUUse{Index: u.Index, UUID: u.UUID, Name: name, PeakMB: u.PeakMB})
	}
	return out
}

// TaskError is why a task ended in StateError (or the last retryable error).
type TaskError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Context map[string]any `json:"context,omitempty"`
}

// Event is one entry of a task's history, as stored and as streamed over SSE.
type Event struct {
	// Seq numbers a task's events from 1.
	Seq  int64     `json:"seq"`
	Type string    `json:"type"`
	At   time.Time `json:"at"`
	// State is the task's state after the event.
	State State `json:"state"`
	// Status is set for a "status" event.
	Status *envelope.WorkStatus `json:"status,omitempty"`
	// OutputOffset is where Status.Step.Output starts in the whole output.
	OutputOffset *int64 `json:"output_offset,omitempty"`
	// Result is set for a "result" event (its output is the work_result's).
	Result *envelope.WorkResult `json:"result,omitempty"`
	// StructuredOutput is the structured output a "result" event's work_result
	// carried in x_custom_fields, as Result.StructuredOutput holds it.
	StructuredOutput json.RawMessage `json:"structured_output,omitempty"`
	// Error is set for an "error" or "retry" event.
	Error *TaskError `json:"error,omitempty"`
	// Message describes a "state" event.
	Message string `json:"message,omitempty"`
	// By names the API token whose request made the event (a submit, a cancel,
	// an approval); "" for the orchestrator's own.
	By string `json:"by,omitempty"`
}

// Event types.
const (
	EventState  = "state"
	EventStatus = "status"
	EventResult = "result"
	EventError  = "error"
	EventRetry  = "retry"
)

// Clone copies t deeply enough for a caller to read while t changes.
func (t *Task) Clone() *Task {
	c := *t
	c.Steps = slices.Clone(t.Steps)
	c.Retries = slices.Clone(t.Retries)
	if t.Result != nil {
		res := *t.Result
		res.GPUs = slices.Clone(t.Result.GPUs)
		c.Result = &res
	}
	if t.Error != nil {
		e := *t.Error
		c.Error = &e
	}
	if t.Approval != nil {
		a := *t.Approval
		c.Approval = &a
	}
	return &c
}
