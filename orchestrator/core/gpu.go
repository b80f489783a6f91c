// GPU work: a task with hints.gpu_vram_mb goes only to an agent with a GPU
// that has that much room now (pick, routing.go), and otherwise waits in its
// type's queue, which heartbeats and ended attempts drain. The room is
// orchestrator/gpuroom's: each agent entry's holds are charged at claim,
// ended at release and brought up to date by each heartbeat.

package core

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/gpuroom"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// gpus are a's GPUs as it last reported them; nil for none or no agent.
func (a *agentEntry) gpus() []envelope.GPU {
	if a == nil {
		return nil
	}
	return a.machineGPUs
}

// gpuFit is how a task needing need MiB fits a, and the most room of a GPU of a.
func (a *agentEntry) gpuFit(need int64) (gpuroom.Fit, int64) {
	_, room, fit := a.gpu.Fit(a.gpus(), need)
	return fit, room
}

// releaseGPU ends the hold of r's attempt on a. An outcome that is a's 5005 for
// gpu_vram_mb caps a's room below r's need until its next heartbeat: the retry
// goes to another agent, or waits for room.
func (a *agentEntry) releaseGPU(r *run, outcome error) {
	a.gpu.Release(r.t.ID)
	var e *errcodes.Error
	if errors.As(outcome, &e) && e.Code == errcodes.ResourceLimitExceeded && e.Context[errcodes.KeyLimitName] == envelope.LimitGPUVRAM {
		said, _ := e.Context[errcodes.KeyAvailable].(json.Number) // as decoded
		n, _ := said.Int64()                                      // 0 when it said nothing readable
		a.gpu.Refused(min(n, r.t.Hints.GPUNeed()-1))
	}
}

// gpuWait says why a task needing need MiB waits for agents whose GPUs are
// large enough (later): none has the room now, and which has the most.
func gpuWait(need int64, later []*agentEntry) string {
	best, on := int64(0), ""
	for _, a := range later {
		if _, room := a.gpuFit(need); on == "" || room > best {
			best, on = room, a.id
		}
	}
	return fmt.Sprintf("no GPU has the %d MiB of gpu_vram_mb free now (the most: %d MiB, on %s)", need, max(best, 0), on)
}

// gpuTooLarge is the error of task t, whose need no GPU of the agents that could
// take it (never) is large enough for: 5005 for gpu_vram_mb, the largest GPU
// being what is available. Not retried: waiting makes no GPU larger.
func gpuTooLarge(t *task.Task, never []*agentEntry) *errcodes.Error {
	largest, on := int64(0), " (none has a GPU)"
	for _, a := range never {
		for _, g := range a.gpus() {
			if g.TotalMB > largest {
				largest, on = g.TotalMB, fmt.Sprintf(" (the largest: %d MiB, on %s)", g.TotalMB, a.id)
			}
		}
	}
	e := errcodes.NewResourceLimitExceeded(envelope.LimitGPUVRAM, largest, t.Hints.GPUNeed())
	e.Message = fmt.Sprintf("gpu_vram_mb: %d MiB on one GPU required, and no online %s agent offering %q has a GPU that large%s",
		t.Hints.GPUNeed(), t.ToAgent, t.WorkType, on)
	return e
}

// gpuFields are the x_custom_fields of a work_request for a task with hints h:
// its GPU need, or nil.
func gpuFields(h *task.Hints) map[string]any {
	if n := h.GPUNeed(); n > 0 {
		return map[string]any{envelope.KeyGPUVRAMMB: n}
	}
	return nil
}
