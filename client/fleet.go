package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
)

// CreateBatch makes a batch and returns it.
func (c *Client) CreateBatch(ctx context.Context, req api.BatchRequest) (*api.Batch, error) {
	var b api.Batch
	return &b, c.getJSON(ctx, http.MethodPost, "/api/v1/batches", req, &b)
}

// Batch returns one batch.
func (c *Client) Batch(ctx context.Context, id string) (*api.Batch, error) {
	var b api.Batch
	return &b, c.getJSON(ctx, http.MethodGet, "/api/v1/batches/"+url.PathEscape(id), nil, &b)
}

// DecideBatch approves (approve) or rejects a batch waiting for approval, with
// an optional note, and returns it.
func (c *Client) DecideBatch(ctx context.Context, id string, approve bool, note string) (*api.Batch, error) {
	op := "/reject"
	if approve {
		op = "/approve"
	}
	var b api.Batch
	return &b, c.getJSON(ctx, http.MethodPost, "/api/v1/batches/"+url.PathEscape(id)+op, api.DecisionRequest{Note: note}, &b)
}

// Batches lists batches, newest first, at most limit (0: the server's default).
func (c *Client) Batches(ctx context.Context, limit int) ([]*api.Batch, error) {
	path := "/api/v1/batches"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	var bs []*api.Batch
	return bs, c.getJSON(ctx, http.MethodGet, path, nil, &bs)
}

// ErrBadEvent is the error of an event stream whose data cannot be read:
// following it again would not help.
var ErrBadEvent = errors.New("bad event")

// BatchEvents reads batch id's event stream once, handing fn each batch it
// sends, until the server ends the stream (nil: it ends it after the batch's
// end, or when it stops), the stream breaks, ctx ends, or fn returns an error.
// An event cut short is never handed on.
func (c *Client) BatchEvents(ctx context.Context, id string, fn func(*api.Batch) error) error {
	return c.followEvents(ctx, "/api/v1/batches/"+url.PathEscape(id)+"/events", "batch", func(data string) error {
		var b api.Batch
		dec := json.NewDecoder(strings.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&b); err != nil {
			return fmt.Errorf("batch events: %w: %w", ErrBadEvent, err)
		}
		return fn(&b)
	})
}

// followEvents reads the event stream at path once, handing take the data of
// each event named event (or unnamed), until the server ends the stream, the
// stream breaks, ctx ends, or take returns an error. An event cut short is
// never handed on.
func (c *Client) followEvents(ctx context.Context, path, event string, take func(data string) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.BaseURL, "/")+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "text/event-stream")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var eb api.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		return &APIError{Status: resp.StatusCode, APIErrorDetail: eb.Error}
	}
	err = readSSE(resp.Body, 16<<20, func(name, data string) error {
		if name != "" && name != event {
			return nil
		}
		return take(data)
	})
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return err
}

// AddSchedule stores a new schedule.
func (c *Client) AddSchedule(ctx context.Context, spec api.ScheduleSpec) (*api.Schedule, error) {
	var s api.Schedule
	return &s, c.getJSON(ctx, http.MethodPost, "/api/v1/schedules", spec, &s)
}

// Schedules lists the schedules, by name.
func (c *Client) Schedules(ctx context.Context) ([]*api.Schedule, error) {
	var ss []*api.Schedule
	return ss, c.getJSON(ctx, http.MethodGet, "/api/v1/schedules", nil, &ss)
}

// Schedule returns one schedule.
func (c *Client) Schedule(ctx context.Context, name string) (*api.Schedule, error) {
	var s api.Schedule
	return &s, c.getJSON(ctx, http.MethodGet, "/api/v1/schedules/"+url.PathEscape(name), nil, &s)
}

// PauseSchedule pauses schedule name, or resumes it.
func (c *Client) PauseSchedule(ctx context.Context, name string, pause bool) (*api.Schedule, error) {
	op := "/resume"
	if pause {
		op = "/pause"
	}
	var s api.Schedule
	return &s, c.getJSON(ctx, http.MethodPost, "/api/v1/schedules/"+url.PathEscape(name)+op, nil, &s)
}

// RemoveSchedule deletes schedule name.
func (c *Client) RemoveSchedule(ctx context.Context, name string) error {
	resp, err := c.do(ctx, http.MethodDelete, "/api/v1/schedules/"+url.PathEscape(name), nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
