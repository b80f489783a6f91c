package envelope

import (
	"encoding/json"
	"maps"

	"github.com/chiffon-dev/chiffon/errcodes"
)

// WorkRequest asks an agent to perform one task.
type WorkRequest struct {
	TaskID   string `json:"task_id"`
	WorkType string `json:"work_type"`
	// Parameters are the work type's arguments; numbers decode as json.Number.
	Parameters map[string]any `json:"parameters,omitempty"`
	Hints      *Hints         `json:"hints,omitempty"`
}

// MessageType returns TypeWorkRequest.
func (*WorkRequest) MessageType() Type { return TypeWorkRequest }

// Hints are scheduling hints of a work request. Keys other than the named ones are kept
// in Extra.
type Hints struct {
	// MaxDurationSeconds bounds the whole task; 0 when absent.
	MaxDurationSeconds int64
	// MaxMemoryMB is the memory the task needs; 0 when absent.
	MaxMemoryMB int64
	// AgentID pins the task to one agent instance; "" when absent.
	AgentID string
	// Extra holds any other hint, as raw JSON.
	Extra map[string]json.RawMessage
}

// MarshalJSON writes the named hints that are set, then Extra.
func (h Hints) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(h.Extra)+3)
	for k, v := range h.Extra {
		m[k] = v
	}
	if h.MaxDurationSeconds != 0 {
		m["max_duration_seconds"] = h.MaxDurationSeconds
	}
	if h.MaxMemoryMB != 0 {
		m["max_memory_mb"] = h.MaxMemoryMB
	}
	if h.AgentID != "" {
		m["agent_id"] = h.AgentID
	}
	return marshalNoEscape(m)
}

// Status values of a work_status.
const (
	StatusRunning       = "running"
	StatusStepCompleted = "step_completed"
	StatusPaused        = "paused"
)

// WorkStatus reports progress of a running task.
type WorkStatus struct {
	TaskID          string `json:"task_id"`
	Status          string `json:"status"`
	ProgressPercent int    `json:"progress_percent"`
	Step            Step   `json:"step"`
}

// MessageType returns TypeWorkStatus.
func (*WorkStatus) MessageType() Type { return TypeWorkStatus }

// Step is the step a work_status reports on, with the output produced since the last
// status.
type Step struct {
	Number int64  `json:"number"`
	Name   string `json:"name"`
	Output string `json:"output"`
	// OutputChunk is "bytes A-B of N" when Output is one piece of a chunked output.
	OutputChunk string `json:"output_chunk,omitempty"`
}

// Status values of a work_result.
const (
	ResultSuccess   = "success"
	ResultFailed    = "failed"
	ResultCancelled = "cancelled"
)

// WorkResult ends a task. Exactly one is sent per task.
type WorkResult struct {
	TaskID        string         `json:"task_id"`
	Status        string         `json:"status"`
	ExitCode      int64          `json:"exit_code"`
	Output        string         `json:"output"`
	ResourcesUsed *ResourcesUsed `json:"resources_used,omitempty"`
}

// MessageType returns TypeWorkResult.
func (*WorkResult) MessageType() Type { return TypeWorkResult }

// ResourcesUsed is what a task consumed.
type ResourcesUsed struct {
	DurationSeconds int64 `json:"duration_seconds"`
	GPUVRAMMB       int64 `json:"gpu_vram_mb"`
	CPUTimeMS       int64 `json:"cpu_time_ms"`
}

// ErrorPayload is the payload of an error message.
type ErrorPayload struct {
	ErrorCode    int    `json:"error_code"`
	ErrorMessage string `json:"error_message"`
	// ErrorContext holds the code's context fields; numbers decode as json.Number.
	ErrorContext map[string]any `json:"error_context,omitempty"`
}

// MessageType returns TypeError.
func (*ErrorPayload) MessageType() Type { return TypeError }

// NewErrorPayload converts a protocol error into an error payload.
func NewErrorPayload(e *errcodes.Error) *ErrorPayload {
	return &ErrorPayload{ErrorCode: int(e.Code), ErrorMessage: e.Message, ErrorContext: maps.Clone(e.Context)}
}

// Err converts the payload back into a protocol error.
func (p *ErrorPayload) Err() *errcodes.Error {
	return &errcodes.Error{Code: errcodes.Code(p.ErrorCode), Message: p.ErrorMessage, Context: maps.Clone(p.ErrorContext)}
}
