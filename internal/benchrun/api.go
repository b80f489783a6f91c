package benchrun

import (
	"context"
	"fmt"
	"net/http"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/internal/stack"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// runAPI measures the front door: POST /api/v1/tasks, then the task's event stream
// until it ends, through client.Client over loopback HTTP. The rate is with
// cfg.InFlight clients at once, the latency one at a time.
func runAPI(ctx context.Context, st *stack.Stack, cfg Config) (stats, error) {
	c, done := apiClient(st.APIURL(), st.APIToken(), cfg.InFlight)
	defer done()
	req := noopRequest(cfg.Size)
	one := func(int) error { return apiTask(ctx, c, req) }
	return latencyAndRate(ctx, max(cfg.Tasks/4, 1), cfg.Tasks, cfg.InFlight, one)
}

// apiClient is a client of the API at url that keeps a connection for each of
// inFlight callers; done closes them.
func apiClient(url, token string, inFlight int) (c *client.Client, done func()) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2 * inFlight
	return &client.Client{BaseURL: url, Token: token, HTTP: &http.Client{Transport: tr}}, tr.CloseIdleConnections
}

// apiTask submits req through c and follows the task's event stream until it
// ends: an error unless it succeeded.
func apiTask(ctx context.Context, c *client.Client, req api.SubmitRequest) error {
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
