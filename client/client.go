// Package client is the Go client of the orchestrator's HTTP API: tasks, their
// events and output, agents, batches, schedules and webhook deliveries. It speaks
// HTTP only; nothing here talks to NATS or opens a store.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
)

// Client talks to an orchestrator's HTTP API, or to any orchestrator of a group
// (see servers.go). Do not copy a Client once used.
type Client struct {
	// BaseURL is the API's root, such as "http://127.0.0.1:8080".
	BaseURL string
	// Servers are the API roots of the other orchestrators of BaseURL's group:
	// a request that one cannot take goes to the next.
	Servers []string
	// Patience is how long a write goes on trying while the orchestrators that
	// answer say 503 (no leader yet, as during a takeover); 0 tries each once.
	// Reads try each once, and so does a write none answers.
	Patience time.Duration
	// Token is the API bearer token.
	Token string
	// HTTP is the HTTP client to use; nil means http.DefaultClient.
	HTTP *http.Client

	// last is the index in servers() of the one that answered last.
	last atomic.Int32
}

// APIError is an error answer of the API.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	api.APIErrorDetail
}

func (e *APIError) Error() string {
	if e.Pointer != "" {
		return fmt.Sprintf("%s %s: %s (HTTP %d)", e.Field, e.Pointer, e.Message, e.Status)
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (HTTP %d)", e.Field, e.Message, e.Status)
	}
	return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
}

// do sends a request to the group's orchestrators (send) and turns an error
// answer into an *APIError.
func (c *Client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	resp, err := c.send(ctx, method, func(server string) (*http.Request, error) {
		var rd io.Reader
		if b != nil {
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequestWithContext(ctx, method, server+path, rd)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+c.Token)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, nil
	})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	return resp, nil
}

// readAPIError reads the error answer resp: the API's error body, or else the
// text of the answer (such as a proxy's, or Go's to plain HTTP on an HTTPS port).
func readAPIError(resp *http.Response) *APIError {
	var eb api.ErrorBody
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if json.Unmarshal(b, &eb) != nil || eb.Error.Message == "" {
		eb.Error.Message = strings.TrimSpace(string(b))
	}
	return &APIError{Status: resp.StatusCode, APIErrorDetail: eb.Error}
}

func (c *Client) getJSON(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	return dec.Decode(out)
}

// WorkTypes lists the work types the agents offer, by agent type and name, as
// their registrations describe them.
func (c *Client) WorkTypes(ctx context.Context) ([]api.WorkType, error) {
	var out []api.WorkType
	return out, c.getJSON(ctx, http.MethodGet, "/api/v1/work-types", nil, &out)
}

// Submit creates a task.
func (c *Client) Submit(ctx context.Context, req api.SubmitRequest) (*task.Task, error) {
	var t task.Task
	return &t, c.getJSON(ctx, http.MethodPost, "/api/v1/tasks", req, &t)
}

// Get returns one task.
func (c *Client) Get(ctx context.Context, id string) (*task.Task, error) {
	var t task.Task
	return &t, c.getJSON(ctx, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id), nil, &t)
}

// List returns tasks, newest first.
func (c *Client) List(ctx context.Context, opts api.ListOptions) ([]*task.Task, error) {
	q := url.Values{}
	if opts.State != "" {
		q.Set("state", string(opts.State))
	}
	if opts.AgentType != "" {
		q.Set("agent_type", string(opts.AgentType))
	}
	if opts.AgentID != "" {
		q.Set("agent_id", opts.AgentID)
	}
	if opts.WorkType != "" {
		q.Set("work_type", opts.WorkType)
	}
	if opts.Offset > 0 {
		q.Set("offset", strconv.Itoa(opts.Offset))
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	var ts []*task.Task
	return ts, c.getJSON(ctx, http.MethodGet, "/api/v1/tasks?"+q.Encode(), nil, &ts)
}

// Output writes a task's whole output to w. complete reports whether the
// orchestrator holds all of it.
func (c *Client) Output(ctx context.Context, id string, w io.Writer) (complete bool, err error) {
	resp, err := c.do(ctx, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id)+"/output", nil)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return resp.Header.Get("X-Chiffon-Output-Complete") == "true", err
}

// Cancel cancels a task and returns it; reason, when not "", says why (see
// CancelRequest).
func (c *Client) Cancel(ctx context.Context, id, reason string) (*task.Task, error) {
	var t task.Task
	return &t, c.getJSON(ctx, http.MethodPost, "/api/v1/tasks/"+url.PathEscape(id)+"/cancel", api.CancelRequest{Reason: reason}, &t)
}

// Decide approves (approve) or rejects a task waiting for approval, with an
// optional note, and returns it.
func (c *Client) Decide(ctx context.Context, id string, approve bool, note string) (*task.Task, error) {
	op := "/reject"
	if approve {
		op = "/approve"
	}
	var t task.Task
	return &t, c.getJSON(ctx, http.MethodPost, "/api/v1/tasks/"+url.PathEscape(id)+op, api.DecisionRequest{Note: note}, &t)
}

// History returns a task's audit trail: its events but its progress reports,
// oldest first.
func (c *Client) History(ctx context.Context, id string) ([]*task.Event, error) {
	var evs []*task.Event
	return evs, c.getJSON(ctx, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id)+"/history", nil, &evs)
}

// Agents lists the agents the orchestrator knows.
func (c *Client) Agents(ctx context.Context) ([]api.AgentInfo, error) {
	var as []api.AgentInfo
	return as, c.getJSON(ctx, http.MethodGet, "/api/v1/agents", nil, &as)
}

// Deliveries lists the webhook deliveries the orchestrator recorded, newest
// first.
func (c *Client) Deliveries(ctx context.Context) ([]webhook.Delivery, error) {
	var ds []webhook.Delivery
	return ds, c.getJSON(ctx, http.MethodGet, "/api/v1/webhooks/deliveries", nil, &ds)
}

// Readiness returns the orchestrator's /readyz answer: whether it is ready, and
// in a group of orchestrators which one leads. A 503 (not ready) is returned as
// the answer, not as an error.
func (c *Client) Readiness(ctx context.Context) (*api.Readiness, error) {
	var r api.Readiness
	err := c.getJSON(ctx, http.MethodGet, "/readyz", nil, &r)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable {
		return &api.Readiness{Status: "not ready"}, nil
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// FollowGiveUp is how long Events goes on trying to reach an orchestrator that
// went away (a restart, a failover) before it returns the error. One it never
// reached is an error at once.
var FollowGiveUp = 2 * time.Minute

// Events streams a task's events to fn: its history first, then live events until
// the task ends (Events then returns nil), ctx ends, or fn returns an error. A
// dropped stream is resumed from the last event seen; while the orchestrator
// cannot be reached, or answers 5xx, it tries again with a growing wait, for at
// most FollowGiveUp.
func (c *Client) Events(ctx context.Context, id string, fn func(*task.Event) error) error {
	var last int64
	wait := time.Duration(0)
	var answered time.Time // the last answer; zero: never reached
	// away reports whether err says an orchestrator reached before is away for
	// now (try again) rather than that the request is wrong.
	away := func(err error) bool {
		var se *streamError
		var ae *APIError
		if errors.As(err, &se) && se.open {
			answered = time.Now() // it answered, then the stream broke
		}
		return ctx.Err() == nil && !answered.IsZero() && time.Since(answered) < FollowGiveUp &&
			(errors.As(err, &se) || errors.As(err, &ae) && ae.Status >= 500)
	}
	for {
		before := last
		final, err := c.events(ctx, id, &last, fn)
		switch {
		case final:
			return err
		case err == nil:
			answered = time.Now()
		case !away(err):
			var se *streamError
			if errors.As(err, &se) {
				return se.err
			}
			return err
		}
		// A stream that keeps ending with nothing new (a proxy cutting it, a server
		// that is shutting down or away) is tried again with a growing wait, not in a
		// tight loop.
		if last > before {
			wait = 0
		} else {
			wait = min(max(2*wait, 50*time.Millisecond), 5*time.Second)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		t, err := c.Get(ctx, id)
		if err != nil {
			var ae *APIError
			if errors.As(err, &ae) && ae.Status < 500 || ctx.Err() != nil || time.Since(answered) >= FollowGiveUp {
				return err
			}
			continue // away: try the stream again
		}
		answered = time.Now()
		if t.State.Final() {
			// The stream ended at the task's end; fetch anything not seen.
			if _, err := c.events(ctx, id, &last, fn); err != nil {
				return err
			}
			return nil
		}
	}
}

// streamError is a failure to reach the orchestrator or to read its stream
// (open): it may pass.
type streamError struct {
	err  error
	open bool
}

func (e *streamError) Error() string { return e.err.Error() }
func (e *streamError) Unwrap() error { return e.err }

func (c *Client) events(ctx context.Context, id string, last *int64, fn func(*task.Event) error) (bool, error) {
	server := c.order()[0]
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/api/v1/tasks/"+url.PathEscape(id)+"/events", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "text/event-stream")
	if *last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(*last, 10))
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		c.moveOn(server)
		return false, &streamError{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 500 {
		c.moveOn(server)
	}
	if resp.StatusCode != http.StatusOK {
		return false, readAPIError(resp)
	}
	final := false
	err = readSSE(resp.Body, 4<<20, func(_, data string) error {
		var ev task.Event
		dec := json.NewDecoder(strings.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&ev); err != nil {
			return &badEventError{fmt.Errorf("bad event: %w", err)}
		}
		if ev.Seq <= *last {
			return nil
		}
		*last = ev.Seq
		final = ev.State.Final()
		return fn(&ev)
	})
	var bad *badEventError
	switch {
	case errors.As(err, &bad):
		return false, bad.err
	case err != nil && ctx.Err() == nil && errors.Is(err, errStreamRead):
		return false, &streamError{err: err, open: true}
	case err != nil && ctx.Err() == nil:
		return false, err // fn's
	}
	return final, ctx.Err()
}

// badEventError is an event whose data could not be read.
type badEventError struct{ err error }

func (e *badEventError) Error() string { return e.err.Error() }

// errStreamRead marks a failure to read an event stream (readSSE).
var errStreamRead = errors.New("read the event stream")

// readSSE reads Server-Sent Events from r, lines of at most maxLine bytes, and
// calls fn with each whole event's type and data (its data lines joined) until
// r ends (nil), fn returns an error (returned), or reading fails (an error
// wrapping errStreamRead). An event cut short by the end of r is not handed on.
func readSSE(r io.Reader, maxLine int, fn func(event, data string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var event string
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "": // an event ends at a blank line
			if len(data) > 0 {
				if err := fn(event, strings.Join(data, "\n")); err != nil {
					return err
				}
			}
			event, data = "", nil
		case strings.HasPrefix(line, ":"): // a comment, such as a keep-alive
		default:
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "event":
				event = v
			case "data":
				data = append(data, v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %w", errStreamRead, err)
	}
	return nil
}
