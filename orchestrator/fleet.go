package orchestrator

import (
	"context"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/core"
	"github.com/chiffon-dev/chiffon/orchestrator/fleet"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// The batches and the schedules are package fleet's: a client of the core's Go
// API (fleetCore), started with the core (startFleet) and stopped with it. The
// orchestrator's batch and schedule methods hand the calls to it.

// Errors of the batch and schedule calls (package fleet's).
var (
	// ErrBatchNoTargets is returned for a batch request that no agent matches.
	ErrBatchNoTargets = fleet.ErrBatchNoTargets
	// ErrScheduleExists is returned for a new schedule whose name a schedule has.
	ErrScheduleExists = fleet.ErrScheduleExists
)

// newFleet makes o's fleet, stopped.
func (o *Orchestrator) newFleet() *fleet.Fleet {
	p := fleet.Params{Core: fleetCore{o}, Store: o.st, Log: o.log, TooLarge: core.ErrTooLarge,
		RegisterGrace: o.cfg.Batches.RegisterGrace, Workflows: o.cfg.Workflows, ConfiguredAt: time.Now().UTC()}
	if o.hooks != nil { // a nil *webhook.Dispatcher is not a nil fleet.Hooks
		p.Hooks = o.hooks
	}
	return fleet.New(p)
}

// startFleet sends the webhook deliveries kept from before and starts the
// batch runners of the running batches and the schedules' clock.
func (o *Orchestrator) startFleet() error {
	o.restoreDeliveries()
	return o.fleet.Start()
}

// CreateBatch makes a batch of req over the agents that match it now and starts
// it. Agents that match and are offline are listed, and get no task.
func (o *Orchestrator) CreateBatch(_ context.Context, req api.BatchRequest) (*api.Batch, error) {
	return o.fleet.CreateBatch(req, "")
}

// GetBatch returns batch id as it is now, or ErrNotFound.
func (o *Orchestrator) GetBatch(id string) (*api.Batch, error) { return o.fleet.GetBatch(id) }

// Batches returns the batches, newest first, at most limit of them (0: 100).
func (o *Orchestrator) Batches(limit int) ([]*api.Batch, error) { return o.fleet.Batches(limit) }

// DecideBatch approves or rejects batch id, waiting for approval, on behalf of
// ctx's caller: approved, its runner makes its tasks (approved with it);
// rejected, it ends rejected and makes none.
func (o *Orchestrator) DecideBatch(_ context.Context, id string, approve bool, note string) (*api.Batch, error) {
	if err := core.CheckNote(note); err != nil {
		return nil, err
	}
	return o.fleet.DecideBatch(id, approve, "", note)
}

// AddSchedule stores a new schedule; it fires from now on.
func (o *Orchestrator) AddSchedule(spec api.ScheduleSpec) (*api.Schedule, error) {
	return o.fleet.AddSchedule(spec)
}

// PauseSchedule pauses schedule name, or resumes it (its firings from now on).
func (o *Orchestrator) PauseSchedule(name string, pause bool) (*api.Schedule, error) {
	return o.fleet.PauseSchedule(name, pause)
}

// RemoveSchedule deletes schedule name; what it made stays.
func (o *Orchestrator) RemoveSchedule(name string) error { return o.fleet.RemoveSchedule(name) }

// GetSchedule returns schedule name with its last and next firings, or
// ErrNotFound.
func (o *Orchestrator) GetSchedule(name string) (*api.Schedule, error) {
	return o.fleet.GetSchedule(name)
}

// Schedules returns every schedule, by name.
func (o *Orchestrator) Schedules() ([]*api.Schedule, error) { return o.fleet.Schedules() }

// fleetCore is the running core as package fleet sees it (fleet.Core): none
// runs on a standby, or once the orchestrator closed.
type fleetCore struct{ *Orchestrator }

// SubmitAs stores and routes a task for req as org says.
func (c fleetCore) SubmitAs(req api.SubmitRequest, org task.Origin) (*task.Task, bool, error) {
	r, err := c.core()
	if err != nil {
		return nil, false, err
	}
	return r.SubmitAs(req, org)
}

// TasksByID returns the tasks ids name, by id: from the store on a standby.
func (c fleetCore) TasksByID(ids []string) (map[string]*task.Task, error) {
	if r, err := c.core(); err == nil {
		return r.TasksByID(ids)
	}
	out := make(map[string]*task.Task, len(ids))
	if err := core.StoredTasks(c.st, ids, out); err != nil {
		return nil, err
	}
	return out, nil
}

// CheckSize refuses req when its work_request is too large.
func (c fleetCore) CheckSize(req *api.SubmitRequest) error {
	r, err := c.core()
	if err != nil {
		return err
	}
	return r.CheckSize(req)
}

// CheckWorkType refuses req when the agents' catalogue does.
func (c fleetCore) CheckWorkType(req *api.SubmitRequest) error {
	r, err := c.core()
	if err != nil {
		return err
	}
	return r.CheckWorkType(req)
}

// Approval is the waiting approval req needs, asked at now, or nil.
func (c fleetCore) Approval(req *api.SubmitRequest, now time.Time) *task.Approval {
	r, err := c.core()
	if err != nil {
		return nil
	}
	return r.Approval(req, now)
}

// BatchTargets lists the agents req matches, by id.
func (c fleetCore) BatchTargets(req *api.BatchRequest) ([]api.BatchTarget, error) {
	r, err := c.core()
	if err != nil {
		return nil, err
	}
	return r.BatchTargets(req)
}

// Cancel cancels task id, saying why.
func (c fleetCore) Cancel(id, reason string) (*task.Task, error) {
	r, err := c.core()
	if err != nil {
		return nil, err
	}
	return r.Cancel(id, reason, "")
}

// fleetReader wakes the runner of a batch one of whose tasks ended, and the
// runners when an agent comes online (one may wait for it to register).
func (o *Orchestrator) fleetReader(ev core.Event) {
	switch {
	case ev.Kind == core.TaskEnded && ev.Task.BatchID != "":
		o.fleet.TaskEnded(ev.Task.BatchID)
	case ev.Kind == core.TaskEnded && ev.Task.WorkflowRun != "":
		o.fleet.RunChanged(ev.Task.WorkflowRun)
	case ev.Kind == core.AgentOnline:
		o.fleet.AgentOnline(ev.AgentID)
	}
}
