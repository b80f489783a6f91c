package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/chiffon-dev/chiffon/api"
)

// Workflows lists every workflow, by name.
func (c *Client) Workflows(ctx context.Context) ([]*api.Workflow, error) {
	var ws []*api.Workflow
	return ws, c.getJSON(ctx, http.MethodGet, "/api/v1/workflows", nil, &ws)
}

// Workflow returns workflow name.
func (c *Client) Workflow(ctx context.Context, name string) (*api.Workflow, error) {
	var w api.Workflow
	return &w, c.getJSON(ctx, http.MethodGet, "/api/v1/workflows/"+url.PathEscape(name), nil, &w)
}

// PutWorkflow stores spec, new or in place of the workflow of its name.
func (c *Client) PutWorkflow(ctx context.Context, spec api.WorkflowSpec) (*api.Workflow, error) {
	var w api.Workflow
	return &w, c.getJSON(ctx, http.MethodPut, "/api/v1/workflows/"+url.PathEscape(spec.Name), spec, &w)
}

// DeleteWorkflow deletes workflow name; its runs stay.
func (c *Client) DeleteWorkflow(ctx context.Context, name string) error {
	resp, err := c.do(ctx, http.MethodDelete, "/api/v1/workflows/"+url.PathEscape(name), nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// StartRun starts a run of workflow name.
func (c *Client) StartRun(ctx context.Context, name string, req api.WorkflowRunRequest) (*api.WorkflowRun, error) {
	var r api.WorkflowRun
	return &r, c.getJSON(ctx, http.MethodPost, "/api/v1/workflows/"+url.PathEscape(name)+"/runs", req, &r)
}

// Run returns workflow run id.
func (c *Client) Run(ctx context.Context, id string) (*api.WorkflowRun, error) {
	var r api.WorkflowRun
	return &r, c.getJSON(ctx, http.MethodGet, "/api/v1/workflow-runs/"+url.PathEscape(id), nil, &r)
}

// Runs lists the runs of workflow name (every workflow's with ""), newest
// first, at most limit (0: the server's default).
func (c *Client) Runs(ctx context.Context, name string, limit int) ([]*api.WorkflowRun, error) {
	q := url.Values{}
	if name != "" {
		q.Set("workflow", name)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/api/v1/workflow-runs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var rs []*api.WorkflowRun
	return rs, c.getJSON(ctx, http.MethodGet, path, nil, &rs)
}

// CancelRun asks run id to stop: its running steps are cancelled, the others
// skipped.
func (c *Client) CancelRun(ctx context.Context, id string) (*api.WorkflowRun, error) {
	var r api.WorkflowRun
	return &r, c.getJSON(ctx, http.MethodPost, "/api/v1/workflow-runs/"+url.PathEscape(id)+"/cancel", nil, &r)
}

// DecideStep approves (approve) or rejects the gate step of run id, with an
// optional note.
func (c *Client) DecideStep(ctx context.Context, id, step string, approve bool, note string) (*api.WorkflowRun, error) {
	op := "/reject"
	if approve {
		op = "/approve"
	}
	var r api.WorkflowRun
	path := "/api/v1/workflow-runs/" + url.PathEscape(id) + "/steps/" + url.PathEscape(step) + op
	return &r, c.getJSON(ctx, http.MethodPost, path, api.DecisionRequest{Note: note}, &r)
}

// RunEvents reads run id's event stream once, handing fn the run each time it
// changes, until the server ends the stream (nil: after the run's end), the
// stream breaks, ctx ends, or fn returns an error.
func (c *Client) RunEvents(ctx context.Context, id string, fn func(*api.WorkflowRun) error) error {
	return c.followEvents(ctx, "/api/v1/workflow-runs/"+url.PathEscape(id)+"/events", "run", func(data string) error {
		var r api.WorkflowRun
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			return fmt.Errorf("run events: %w: %w", ErrBadEvent, err)
		}
		return fn(&r)
	})
}
