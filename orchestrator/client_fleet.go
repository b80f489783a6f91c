package orchestrator

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// CreateBatch makes a batch and returns it.
func (c *Client) CreateBatch(ctx context.Context, req BatchRequest) (*Batch, error) {
	var b Batch
	return &b, c.getJSON(ctx, http.MethodPost, "/api/v1/batches", req, &b)
}

// Batch returns one batch.
func (c *Client) Batch(ctx context.Context, id string) (*Batch, error) {
	var b Batch
	return &b, c.getJSON(ctx, http.MethodGet, "/api/v1/batches/"+url.PathEscape(id), nil, &b)
}

// Batches lists batches, newest first, at most limit (0: the server's default).
func (c *Client) Batches(ctx context.Context, limit int) ([]*Batch, error) {
	path := "/api/v1/batches"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	var bs []*Batch
	return bs, c.getJSON(ctx, http.MethodGet, path, nil, &bs)
}

// BatchEvents streams batch id to fn each time it changes, until its end is
// stored (BatchEvents then returns nil), ctx ends, the server cannot be reached
// or refuses, or fn returns an error. A stream that ends early is opened again,
// with a growing wait while it brings nothing.
func (c *Client) BatchEvents(ctx context.Context, id string, fn func(*Batch) error) error {
	wait := time.Duration(0)
	for {
		final, got, err := c.batchEvents(ctx, id, fn)
		if err != nil || final {
			return err
		}
		if got {
			wait = 0
		} else {
			wait = min(max(2*wait, 50*time.Millisecond), 5*time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (c *Client) batchEvents(ctx context.Context, id string, fn func(*Batch) error) (final, got bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.BaseURL, "/")+"/api/v1/batches/"+url.PathEscape(id)+"/events", nil)
	if err != nil {
		return false, false, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "text/event-stream")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var eb ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		return false, false, &APIError{Status: resp.StatusCode, APIErrorDetail: eb.Error}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var b Batch
		if err := json.Unmarshal([]byte(data), &b); err != nil {
			return false, got, fmt.Errorf("bad batch event: %w", err)
		}
		got = true
		if err := fn(&b); err != nil {
			return false, got, err
		}
		if b.FinishedAt != nil {
			return true, got, nil
		}
	}
	return false, got, nil
}

// AddSchedule stores a new schedule.
func (c *Client) AddSchedule(ctx context.Context, spec ScheduleSpec) (*Schedule, error) {
	var s Schedule
	return &s, c.getJSON(ctx, http.MethodPost, "/api/v1/schedules", spec, &s)
}

// Schedules lists the schedules, by name.
func (c *Client) Schedules(ctx context.Context) ([]*Schedule, error) {
	var ss []*Schedule
	return ss, c.getJSON(ctx, http.MethodGet, "/api/v1/schedules", nil, &ss)
}

// Schedule returns one schedule.
func (c *Client) Schedule(ctx context.Context, name string) (*Schedule, error) {
	var s Schedule
	return &s, c.getJSON(ctx, http.MethodGet, "/api/v1/schedules/"+url.PathEscape(name), nil, &s)
}

// PauseSchedule pauses schedule name, or resumes it.
func (c *Client) PauseSchedule(ctx context.Context, name string, pause bool) (*Schedule, error) {
	op := "/resume"
	if pause {
		op = "/pause"
	}
	var s Schedule
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
