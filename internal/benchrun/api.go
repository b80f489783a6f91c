package benchrun

import (
	"context"
	"fmt"
	"net/http"

	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/internal/stack"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// runAPI measures the front door: POST /api/v1/tasks, then the task's event stream
// until it ends, through client.Client over loopback HTTP. The rate is with
// cfg.InFlight clients at once, the latency one at a time.
func runAPI(ctx context.Context, st *stack.Stack, cfg Config) (stats, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2 * cfg.InFlight
	defer tr.CloseIdleConnections()
	c := &client.Client{BaseURL: st.APIURL(), Token: st.APIToken(), HTTP: &http.Client{Transport: tr}}
	req := noopRequest(cfg.Size)
	one := func(int) error {
		t, err := c.Submit(ctx, req)
		if err != nil {
			return err
		}
		var last task.State
		err = c.Events(ctx, t.ID, func(ev *task.Event) error {
			last = ev.State
			return nil
		})
		if err != nil {
			return err
		}
		if last != task.StateSucceeded {
			return fmt.Errorf("task %s ended %s", t.ID, last)
		}
		return nil
	}
	return latencyAndRate(ctx, max(cfg.Tasks/4, 1), cfg.Tasks, cfg.InFlight, one)
}
