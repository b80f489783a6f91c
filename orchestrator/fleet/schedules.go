package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/workflow"
)

// A schedule makes a task, a batch or a workflow run at each time its cron
// expression names.
// Its definition is one record of the task store and what it last fired is
// another (schedrun.go writes it, the API the definition, so neither overwrites
// the other). The task or batch of a firing has an id and a request_id derived
// from the schedule's name and the fire time (a workflow run, an id): a firing
// made again (retried, after a restart, by a new leader) finds what the first
// made, so it runs once.

// ErrScheduleExists is returned for a new schedule whose name a schedule has.
var ErrScheduleExists = api.ErrScheduleExists

// AddSchedule stores a new schedule; it fires from now on.
func (f *Fleet) AddSchedule(spec api.ScheduleSpec) (*api.Schedule, error) {
	if spec.CatchUp == "" {
		spec.CatchUp = api.CatchUpNone
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := f.checkTarget(&spec); err != nil {
		return nil, err
	}
	f.schedMu.Lock()
	defer f.schedMu.Unlock()
	if _, err := f.st.Record(ScheduleRecord, spec.Name); !errors.Is(err, task.ErrNotFound) {
		if err == nil {
			err = ErrScheduleExists
		}
		return nil, err
	}
	s := &api.Schedule{ScheduleSpec: spec, CreatedAt: time.Now().UTC()}
	if err := f.putSchedule(s); err != nil {
		return nil, err
	}
	// What an earlier schedule of the name fired is not this one's.
	if err := f.st.PutRecord(FiringRecord, s.Name, nil); err != nil {
		return nil, err
	}
	f.schedulesChanged()
	return scheduleView(s, nil), nil
}

// checkTarget refuses what spec would make, as the catalogue and the size
// limits would refuse its task (a batch's, as one of its agents gets it), or
// as its workflow would refuse a run: a workflow that is not there, or its
// parameters (a *api.FieldError on workflow.name, workflow.params.NAME).
func (f *Fleet) checkTarget(spec *api.ScheduleSpec) error {
	if w := spec.Workflow; w != nil {
		wf, err := f.GetWorkflow(w.Name)
		if errors.Is(err, task.ErrNotFound) {
			return &api.FieldError{Field: "workflow.name", Message: fmt.Sprintf("no workflow is named %q", w.Name)}
		}
		if err != nil {
			return err
		}
		if _, err := workflow.RunParams(&wf.WorkflowSpec, w.Params); err != nil {
			var fe *api.FieldError
			if errors.As(err, &fe) {
				return &api.FieldError{Field: "workflow." + fe.Field, Message: fe.Message}
			}
			return err
		}
		return nil
	}
	sr := spec.Task
	if spec.Batch != nil {
		t := spec.Batch.TaskFor("")
		sr = &t
	}
	if err := f.core.CheckWorkType(sr); err != nil {
		return err
	}
	return f.core.CheckSize(sr)
}

// PauseSchedule pauses schedule name, or resumes it (its firings from now on).
func (f *Fleet) PauseSchedule(name string, pause bool) (*api.Schedule, error) {
	f.schedMu.Lock()
	defer f.schedMu.Unlock()
	s, err := f.storedSchedule(name)
	if err != nil {
		return nil, err
	}
	if s.Paused != pause {
		s.Paused = pause
		if !pause {
			now := time.Now().UTC()
			s.ResumedAt = &now
		}
		if err := f.putSchedule(s); err != nil {
			return nil, err
		}
		f.schedulesChanged()
	}
	return f.GetSchedule(name)
}

// RemoveSchedule deletes schedule name; what it made stays.
func (f *Fleet) RemoveSchedule(name string) error {
	f.schedMu.Lock()
	defer f.schedMu.Unlock()
	if _, err := f.storedSchedule(name); err != nil {
		return err
	}
	if err := f.st.PutRecord(ScheduleRecord, name, nil); err != nil {
		return err
	}
	f.schedulesChanged()
	return f.st.PutRecord(FiringRecord, name, nil)
}

// GetSchedule returns schedule name with its last and next firings, or
// task.ErrNotFound.
func (f *Fleet) GetSchedule(name string) (*api.Schedule, error) {
	if !api.ValidScheduleName(name) {
		return nil, task.ErrNotFound
	}
	s, err := f.storedSchedule(name)
	if err != nil {
		return nil, err
	}
	last, err := f.lastFiring(name)
	if err != nil {
		return nil, err
	}
	return scheduleView(s, last), nil
}

// Schedules returns every schedule, by name.
func (f *Fleet) Schedules() ([]*api.Schedule, error) {
	defs, fired, err := f.readSchedules()
	if err != nil {
		return nil, err
	}
	out := make([]*api.Schedule, 0, len(defs))
	for _, s := range defs {
		out = append(out, scheduleView(s, fired[s.Name]))
	}
	return out, nil
}

// scheduleView is s with its last firing and its next.
func scheduleView(s *api.Schedule, last *api.Firing) *api.Schedule {
	v := *s
	v.Last = last
	if next, ok := NextFiring(s, last, time.Now()); ok {
		v.Next = &next
	}
	return &v
}

// putSchedule stores s's definition.
func (f *Fleet) putSchedule(s *api.Schedule) error {
	s.Last, s.Next = nil, nil // views, not stored
	return putRecord(f.st, ScheduleRecord, s.Name, "schedule "+s.Name, s)
}

// storedSchedule reads schedule name's definition.
func (f *Fleet) storedSchedule(name string) (*api.Schedule, error) {
	return getRecord[api.Schedule](f.st, ScheduleRecord, name, "schedule "+name)
}

// lastFiring reads what schedule name fired last, or nil when it fired nothing.
func (f *Fleet) lastFiring(name string) (*api.Firing, error) {
	last, err := getRecord[api.Firing](f.st, FiringRecord, name, "the last firing of schedule "+name)
	if errors.Is(err, task.ErrNotFound) {
		return nil, nil
	}
	return last, err
}

// readSchedules reads every schedule, by name, and their last firings.
func (f *Fleet) readSchedules() ([]*api.Schedule, map[string]*api.Firing, error) {
	defs, err := f.st.Records(ScheduleRecord)
	if err != nil {
		return nil, nil, fmt.Errorf("read schedules: %w", err)
	}
	fired, err := f.st.Records(FiringRecord)
	if err != nil {
		return nil, nil, fmt.Errorf("read schedules: %w", err)
	}
	out := make([]*api.Schedule, 0, len(defs))
	last := map[string]*api.Firing{}
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		var s api.Schedule
		if err := json.Unmarshal(defs[name], &s); err != nil {
			f.log.Error("schedule record unreadable; it does not fire", "schedule", name, "err", err)
			continue
		}
		out = append(out, &s)
		if data, ok := fired[name]; ok {
			var lf api.Firing
			if err := json.Unmarshal(data, &lf); err == nil {
				last[name] = &lf
			}
		}
	}
	return out, last, nil
}
