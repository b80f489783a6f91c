package agent

import (
	"context"
	"io"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

// Request is one task handed to a Handler.
type Request struct {
	// TaskID, RequestID and TraceID identify the task, its dedupe key and its trace.
	TaskID, RequestID, TraceID string
	// WorkType is the work type asked for.
	WorkType string
	// Parameters are the work type's arguments; numbers are json.Number.
	Parameters map[string]any
	// Hints are the request's scheduling hints; never nil.
	Hints *envelope.Hints
	// GPU is the GPU the agent gave the task because it needs GPU memory (the
	// request's x_custom_fields.gpu_vram_mb, or its work type's gpu_vram_mb);
	// nil when it needs none. A subprocess gets it as CUDA_VISIBLE_DEVICES; a
	// Go handler should use this GPU only.
	GPU *envelope.GPU
}

// Progress is how a Handler reports on its task. Output written to it streams to the
// orchestrator in batches; it is safe for concurrent use.
type Progress interface {
	io.Writer
	// SetPercent reports overall progress, 0 to 100.
	SetPercent(percent int)
	// Step starts a new named step; the step number goes up by one.
	Step(name string)
}

// Result is what a Handler returns.
type Result struct {
	// ExitCode is 0 for success; anything else makes the task failed.
	ExitCode int
	// Output, when not empty, is appended to what the handler wrote to Progress.
	Output string
	// Structured is optional structured output, sent in the result's
	// x_custom_fields.structured_output.
	Structured any
	// CPUTime is the CPU time of the child processes, when known.
	CPUTime time.Duration
	// GPUVRAMMB is the most GPU memory the task held at once, in MiB, when
	// known (resources_used.gpu_vram_mb). The agent measures it for subprocess
	// work types; a Go handler may set it.
	GPUVRAMMB int64
	// GPUs are the GPUs the task held memory on, each with the most it held
	// there (x_custom_fields.gpus); the agent adds Request.GPU when it is not
	// listed. Measured for subprocess work types, as GPUVRAMMB.
	GPUs []envelope.GPUUse
}

// Handler performs one work type. It must return when ctx is done (a cancel, the
// deadline or a drain timeout). A non-nil error fails the task: its text is appended
// to the output and the exit code is Result.ExitCode, or 1 when that is 0.
type Handler func(ctx context.Context, req *Request, p Progress) (Result, error)
