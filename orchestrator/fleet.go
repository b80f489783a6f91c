package orchestrator

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/api"
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
	p := fleet.Params{Core: fleetCore{o}, Store: o.st, Log: o.log, TooLarge: ErrTooLarge}
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
func (o *Orchestrator) CreateBatch(ctx context.Context, req api.BatchRequest) (*api.Batch, error) {
	return o.fleet.CreateBatch(req, CallerOf(ctx))
}

// GetBatch returns batch id as it is now, or ErrNotFound.
func (o *Orchestrator) GetBatch(id string) (*api.Batch, error) { return o.fleet.GetBatch(id) }

// Batches returns the batches, newest first, at most limit of them (0: 100).
func (o *Orchestrator) Batches(limit int) ([]*api.Batch, error) { return o.fleet.Batches(limit) }

// DecideBatch approves or rejects batch id, waiting for approval, on behalf of
// ctx's caller: approved, its runner makes its tasks (approved with it);
// rejected, it ends rejected and makes none.
func (o *Orchestrator) DecideBatch(ctx context.Context, id string, approve bool, note string) (*api.Batch, error) {
	if err := checkNote(note); err != nil {
		return nil, err
	}
	return o.fleet.DecideBatch(id, approve, CallerOf(ctx), note)
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

// fleetCore is the core as package fleet sees it (fleet.Core).
type fleetCore struct{ o *Orchestrator }

// SubmitAs stores and routes a task for req as org says (submit).
func (c fleetCore) SubmitAs(req api.SubmitRequest, org task.Origin) (*task.Task, bool, error) {
	return c.o.submit(req, org)
}

// TasksByID returns the tasks ids name, by id (tasksByID).
func (c fleetCore) TasksByID(ids []string) (map[string]*task.Task, error) { return c.o.tasksByID(ids) }

// CheckSize refuses req when its work_request is too large (checkSize).
func (c fleetCore) CheckSize(req *api.SubmitRequest) error { return c.o.checkSize(req) }

// Approval is the waiting approval req needs, asked at now, or nil (approvalFor).
func (c fleetCore) Approval(req *api.SubmitRequest, now time.Time) *task.Approval {
	return c.o.approvalFor(req, now)
}

// BatchTargets lists the agents req matches, by id: the online ones offering
// its work type with no state yet (they get a task), the others with theirs.
func (c fleetCore) BatchTargets(req *api.BatchRequest) ([]api.BatchTarget, error) {
	var out []api.BatchTarget
	if err := c.o.call(func() { out = c.o.batchTargets(req) }); err != nil {
		return nil, ErrClosed
	}
	return out, nil
}

// batchTargets is BatchTargets on the loop.
func (o *Orchestrator) batchTargets(req *api.BatchRequest) []api.BatchTarget {
	var out []api.BatchTarget
	named := map[string]bool{}
	for _, id := range req.Agents {
		named[id] = true
	}
	for _, a := range o.agents {
		if a.typ != req.ToAgent || len(named) > 0 && !named[a.id] || !hasLabels(a.labels, req.Labels) {
			continue
		}
		delete(named, a.id)
		t := api.BatchTarget{AgentID: a.id}
		switch {
		case !a.online:
			t.State = api.TargetOffline
		case !a.offers(req.WorkType):
			t.State = api.TargetUnsupported
		}
		out = append(out, t)
	}
	for _, c := range o.cfg.Agents { // configured, never heard from
		if named[c.ID] || len(req.Agents) == 0 && len(req.Labels) == 0 && c.Type == req.ToAgent && o.agents[c.ID] == nil {
			delete(named, c.ID)
			out = append(out, api.BatchTarget{AgentID: c.ID, State: api.TargetUnknown})
		}
	}
	for id := range named {
		out = append(out, api.BatchTarget{AgentID: id, State: api.TargetUnknown})
	}
	slices.SortFunc(out, func(a, b api.BatchTarget) int { return strings.Compare(a.AgentID, b.AgentID) })
	return out
}

// hasLabels reports whether have holds every label of want.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
