package taskview

import (
	"context"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
)

// WatchRun hands fn workflow run id each time it changes, from its event
// stream, until the run has ended, and returns it; a stream that breaks is
// opened again, and the run read meanwhile, as WatchBatch does.
func WatchRun(ctx context.Context, c *client.Client, id string, fn func(*api.WorkflowRun)) (*api.WorkflowRun, error) {
	return watch(ctx, followed[*api.WorkflowRun]{
		stream: func(ctx context.Context, see func(*api.WorkflowRun) error) error { return c.RunEvents(ctx, id, see) },
		get:    func(ctx context.Context) (*api.WorkflowRun, error) { return c.Run(ctx, id) },
		ended:  func(r *api.WorkflowRun) bool { return r.State.Final() },
	}, fn)
}
