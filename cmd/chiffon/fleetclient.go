package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
)

// fleetAPI calls the batch and schedule endpoints of the orchestrator's API
// (orchestrator/httpapi/fleet.go) with a client's address, token and HTTP client.
type fleetAPI struct{ c *client.Client }

// createBatch makes a batch: POST /api/v1/batches.
func (a fleetAPI) createBatch(ctx context.Context, req api.BatchRequest) (*api.Batch, error) {
	return a.c.CreateBatch(ctx, req)
}

// batch reads one batch, a 404 said as no batch id.
func (a fleetAPI) batch(ctx context.Context, id string) (*api.Batch, error) {
	b, err := a.c.Batch(ctx, id)
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("no batch %s", id))
	}
	return b, nil
}

// batches lists the batches, newest first, at most limit (0: the server's default).
func (a fleetAPI) batches(ctx context.Context, limit int) ([]*api.Batch, error) {
	return a.c.Batches(ctx, limit)
}

// batchEvents reads batch id's event stream once, handing fn each batch it
// sends, until the server ends the stream (nil), it breaks, or ctx ends.
func (a fleetAPI) batchEvents(ctx context.Context, id string, fn func(*api.Batch)) error {
	err := a.c.BatchEvents(ctx, id, func(b *api.Batch) error { fn(b); return nil })
	return notFound(err, fmt.Sprintf("no batch %s", id))
}

// addSchedule adds a schedule; a 409 says to remove the one of that name first.
func (a fleetAPI) addSchedule(ctx context.Context, spec api.ScheduleSpec) (*api.Schedule, error) {
	s, err := a.c.AddSchedule(ctx, spec)
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict {
		return nil, &explainedError{
			msg: fmt.Sprintf("a schedule named %q exists already (HTTP 409): remove it first (chiffon schedule rm %s) or pick another name",
				spec.Name, spec.Name),
			err: err,
		}
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// schedules lists the schedules, by name.
func (a fleetAPI) schedules(ctx context.Context) ([]*api.Schedule, error) {
	return a.c.Schedules(ctx)
}

// schedule reads one schedule, a 404 said as no schedule of that name.
func (a fleetAPI) schedule(ctx context.Context, name string) (*api.Schedule, error) {
	s, err := a.c.Schedule(ctx, name)
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("no schedule named %q", name))
	}
	return s, nil
}

// pauseSchedule pauses schedule name, or resumes it.
func (a fleetAPI) pauseSchedule(ctx context.Context, name string, pause bool) (*api.Schedule, error) {
	s, err := a.c.PauseSchedule(ctx, name, pause)
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("no schedule named %q", name))
	}
	return s, nil
}

// removeSchedule deletes a schedule.
func (a fleetAPI) removeSchedule(ctx context.Context, name string) error {
	if err := a.c.RemoveSchedule(ctx, name); err != nil {
		return notFound(err, fmt.Sprintf("no schedule named %q", name))
	}
	return nil
}

// explainedError is an API error said in the CLI's words; --json still reports
// the API's code and status (errjson.go finds the API error inside).
type explainedError struct {
	msg string
	err error
}

func (e *explainedError) Error() string { return e.msg }
func (e *explainedError) Unwrap() error { return e.err }

// notFound says a 404 as msg.
func notFound(err error, msg string) error {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return &explainedError{msg: msg + " (HTTP 404)", err: err}
	}
	return err
}
