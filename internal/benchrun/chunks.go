package benchrun

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// chunkRuns is how many chunked tasks are timed, one after the other, after one
// untimed; the figure is their median, since one 10 MiB task is over in a fraction
// of a second.
const chunkRuns = 3

// runChunks measures tasks whose handler writes cfg.ChunkBytes of output at once:
// the agent sends it as 256 KiB chunks, the orchestrator reassembles and stores it.
// The figure is MiB/s from Submit until the task has ended with its whole output
// stored, the median of chunkRuns tasks.
func runChunks(ctx context.Context, o *orchestrator.Orchestrator, cfg Config) (float64, error) {
	req := api.SubmitRequest{ToAgent: envelope.Infra, WorkType: workChunks,
		Parameters: map[string]any{"bytes": cfg.ChunkBytes}}
	rates := make([]float64, 0, chunkRuns)
	for i := range chunkRuns + 1 { // the first, untimed, warms up the handler's text
		start := time.Now()
		t, err := o.Submit(ctx, req)
		if err != nil {
			return 0, err
		}
		if t, err = o.Wait(ctx, t.ID); err != nil {
			return 0, err
		}
		elapsed := time.Since(start)
		if t.State != task.StateSucceeded || !t.OutputComplete || t.OutputBytes != int64(cfg.ChunkBytes) {
			return 0, fmt.Errorf("task %s ended %s with %d of %d output bytes (complete %v)",
				t.ID, t.State, t.OutputBytes, cfg.ChunkBytes, t.OutputComplete)
		}
		if i > 0 {
			rates = append(rates, float64(cfg.ChunkBytes)/(1<<20)/elapsed.Seconds())
		}
	}
	slices.Sort(rates)
	return rates[len(rates)/2], nil
}
