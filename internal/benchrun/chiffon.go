package benchrun

import (
	"context"
	"fmt"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// noopRequest is the task of the chiffon and api phases: a no-op work type whose
// parameters carry size bytes.
func noopRequest(size int) api.SubmitRequest {
	return api.SubmitRequest{ToAgent: envelope.Infra, WorkType: workNoop,
		Parameters: map[string]any{"data": strings.Repeat("x", size)}}
}

// runChiffon measures no-op tasks end to end through the real code path:
// orchestrator.Submit stores the task, routes it, passes the agent's breaker and
// publishes the work_request; the agent checks the token, decodes, writes its dedupe
// entry, acknowledges, runs nothing and sends the result; the orchestrator records
// the result. A task counts when orchestrator.Wait sees it succeeded. One at a time
// for latency, cfg.InFlight at once for throughput.
func runChiffon(ctx context.Context, o *orchestrator.Orchestrator, cfg Config) (stats, error) {
	req := noopRequest(cfg.Size)
	one := func(int) error {
		t, err := o.Submit(ctx, req)
		if err != nil {
			return err
		}
		t, err = o.Wait(ctx, t.ID)
		if err != nil {
			return err
		}
		if t.State != task.StateSucceeded {
			return fmt.Errorf("task %s ended %s: %+v", t.ID, t.State, t.Error)
		}
		return nil
	}
	// A short warm-up so that the first figures are not Badger's and the Go
	// runtime's start-up.
	if _, err := measure(ctx, min(cfg.Tasks, 50), 1, one); err != nil {
		return stats{}, err
	}
	return latencyAndRate(ctx, cfg.Tasks, cfg.Tasks, cfg.InFlight, one)
}
