package api

import (
	"fmt"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// SubmitRequest is a task to run.
type SubmitRequest struct {
	ToAgent    envelope.AgentType `json:"to_agent"`
	WorkType   string             `json:"work_type"`
	Parameters map[string]any     `json:"parameters,omitempty"`
	Hints      *task.Hints        `json:"hints,omitempty"`
}

// FieldError is a bad value in a request, naming its field.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Validate checks a submission and names the offending field.
func (req *SubmitRequest) Validate() error {
	if !req.ToAgent.Valid() || req.ToAgent == envelope.Orchestrator {
		return &FieldError{"to_agent", fmt.Sprintf("must be one of infra, desktop, code, research, got %q", req.ToAgent)}
	}
	if msg := envelope.CheckWorkType(req.WorkType); msg != "" {
		return &FieldError{"work_type", msg}
	}
	if h := req.Hints; h != nil {
		switch {
		case h.MaxDurationSeconds < 0:
			return &FieldError{"hints.max_duration_seconds", "must be a positive integer"}
		case h.MaxMemoryMB < 0:
			return &FieldError{"hints.max_memory_mb", "must be a positive integer"}
		}
		if g := h.GPUVRAMMB; g != nil {
			// The wire's own check of the value the work_request will carry.
			if _, e := envelope.GPUNeed(map[string]any{envelope.KeyGPUVRAMMB: *g}); e != nil {
				return &FieldError{"hints.gpu_vram_mb", e.Message + "; leave it out for a task that needs no GPU"}
			}
		}
		if h.AgentID != "" {
			if msg := envelope.CheckAgentID(h.AgentID); msg != "" {
				return &FieldError{"hints.agent_id", msg}
			}
		}
	}
	return nil
}

// ListOptions filters a task list.
type ListOptions struct {
	// State keeps tasks in this state; "" keeps all.
	State task.State
	// AgentType keeps tasks for this agent type; "" keeps all.
	AgentType envelope.AgentType
	// AgentID keeps tasks last sent to this agent; "" keeps all.
	AgentID string
	// WorkType keeps tasks of this work type; "" keeps all.
	WorkType string
	// Offset skips this many of the tasks kept, newest first: a page.
	Offset int
	// Limit bounds the number of tasks; 0 means 100.
	Limit int
}
