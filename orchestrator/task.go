package orchestrator

import (
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// The task records live in package task, which the storage backends import; these
// names keep them the orchestrator's.
type (
	// State is where a task is in its life.
	State = task.State
	// Hints are a task's scheduling hints, as in the work_request.
	Hints = task.Hints
	// Task is one piece of work and everything known about it.
	Task = task.Task
	// Retry records one retry of a task.
	Retry = task.Retry
	// StepInfo is the latest known state of one step.
	StepInfo = task.StepInfo
	// Result is the task's work_result, without its output.
	Result = task.Result
	// TaskError is why a task ended in StateError (or the last retryable error).
	TaskError = task.TaskError
	// Approval is where a task's approval stands.
	Approval = task.Approval
	// Event is one entry of a task's history, as stored and as streamed over SSE.
	Event = task.Event
	// TaskStore keeps tasks, their events and their output (see task.Store).
	TaskStore = task.Store
)

// Task states (see package task).
const (
	StatePending    = task.StatePending
	StateDispatched = task.StateDispatched
	StateRunning    = task.StateRunning
	StateSucceeded  = task.StateSucceeded
	StateFailed     = task.StateFailed
	StateCancelled  = task.StateCancelled
	StateError      = task.StateError
	// StateAwaitingApproval and StateRejected: see approval.go.
	StateAwaitingApproval = task.StateAwaitingApproval
	StateRejected         = task.StateRejected
)

// Approval states.
const (
	ApprovalWaiting  = task.ApprovalWaiting
	ApprovalApproved = task.ApprovalApproved
	ApprovalRejected = task.ApprovalRejected
	ApprovalExpired  = task.ApprovalExpired
)

// States lists every task state.
var States = task.States

// Event types.
const (
	EventState  = task.EventState
	EventStatus = task.EventStatus
	EventResult = task.EventResult
	EventError  = task.EventError
	EventRetry  = task.EventRetry
)

// ErrNotFound is returned for a task the store does not hold.
var ErrNotFound = task.ErrNotFound

// hintsEnvelope returns h as a work_request carries it: nil when no hint is set.
func hintsEnvelope(h *Hints) *envelope.Hints {
	if h == nil || *h == (Hints{}) {
		return nil
	}
	return &envelope.Hints{MaxDurationSeconds: h.MaxDurationSeconds, MaxMemoryMB: h.MaxMemoryMB, AgentID: h.AgentID}
}
