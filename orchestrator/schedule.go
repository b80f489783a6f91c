package orchestrator

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/fleet"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// A schedule makes a task, or a batch, at each time its cron expression names.
// Its definition is one record of the task store and what it last fired is
// another (schedrun.go writes it, the API the definition, so neither overwrites
// the other). The task or batch of a firing has an id and a request_id derived
// from the schedule's name and the fire time: a firing made again (retried, after
// a restart, by a new leader) finds what the first made, so it runs once.

// Record kinds of schedules in the task store.
const (
	scheduleRecord = "schedule"
	firingRecord   = "firing"
)

// Errors of the schedule calls.
var (
	ErrScheduleExists = api.ErrScheduleExists
)

// AddSchedule stores a new schedule; it fires from now on.
func (o *Orchestrator) AddSchedule(spec api.ScheduleSpec) (*api.Schedule, error) {
	if spec.CatchUp == "" {
		spec.CatchUp = api.CatchUpNone
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	sr := spec.Task
	if spec.Batch != nil {
		t := spec.Batch.TaskFor("")
		sr = &t
	}
	if err := o.checkSize(sr); err != nil {
		return nil, err
	}
	o.schedMu.Lock()
	defer o.schedMu.Unlock()
	if _, err := o.st.Record(scheduleRecord, spec.Name); !errors.Is(err, task.ErrNotFound) {
		if err == nil {
			err = ErrScheduleExists
		}
		return nil, err
	}
	s := &api.Schedule{ScheduleSpec: spec, CreatedAt: time.Now().UTC()}
	if err := o.putSchedule(s); err != nil {
		return nil, err
	}
	// What an earlier schedule of the name fired is not this one's.
	if err := o.st.PutRecord(firingRecord, s.Name, nil); err != nil {
		return nil, err
	}
	o.fleet.schedulesChanged()
	return o.scheduleView(s, nil), nil
}

// PauseSchedule pauses schedule name, or resumes it (its firings from now on).
func (o *Orchestrator) PauseSchedule(name string, pause bool) (*api.Schedule, error) {
	o.schedMu.Lock()
	defer o.schedMu.Unlock()
	s, err := o.storedSchedule(name)
	if err != nil {
		return nil, err
	}
	if s.Paused != pause {
		s.Paused = pause
		if !pause {
			now := time.Now().UTC()
			s.ResumedAt = &now
		}
		if err := o.putSchedule(s); err != nil {
			return nil, err
		}
		o.fleet.schedulesChanged()
	}
	return o.GetSchedule(name)
}

// RemoveSchedule deletes schedule name; what it made stays.
func (o *Orchestrator) RemoveSchedule(name string) error {
	o.schedMu.Lock()
	defer o.schedMu.Unlock()
	if _, err := o.storedSchedule(name); err != nil {
		return err
	}
	if err := o.st.PutRecord(scheduleRecord, name, nil); err != nil {
		return err
	}
	o.fleet.schedulesChanged()
	return o.st.PutRecord(firingRecord, name, nil)
}

// GetSchedule returns schedule name with its last and next firings, or
// ErrNotFound.
func (o *Orchestrator) GetSchedule(name string) (*api.Schedule, error) {
	if !api.ValidScheduleName(name) {
		return nil, task.ErrNotFound
	}
	s, err := o.storedSchedule(name)
	if err != nil {
		return nil, err
	}
	last, err := o.lastFiring(name)
	if err != nil {
		return nil, err
	}
	return o.scheduleView(s, last), nil
}

// Schedules returns every schedule, by name.
func (o *Orchestrator) Schedules() ([]*api.Schedule, error) {
	defs, fired, err := o.readSchedules()
	if err != nil {
		return nil, err
	}
	out := make([]*api.Schedule, 0, len(defs))
	for _, s := range defs {
		out = append(out, o.scheduleView(s, fired[s.Name]))
	}
	return out, nil
}

// scheduleView is s with its last firing and its next.
func (o *Orchestrator) scheduleView(s *api.Schedule, last *api.Firing) *api.Schedule {
	v := *s
	v.Last = last
	if next, ok := fleet.NextFiring(s, last, time.Now()); ok {
		v.Next = &next
	}
	return &v
}

func (o *Orchestrator) putSchedule(s *api.Schedule) error {
	s.Last, s.Next = nil, nil // views, not stored
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode schedule %s: %w", s.Name, err)
	}
	return o.st.PutRecord(scheduleRecord, s.Name, data)
}

func (o *Orchestrator) storedSchedule(name string) (*api.Schedule, error) {
	data, err := o.st.Record(scheduleRecord, name)
	if err != nil {
		return nil, err
	}
	var s api.Schedule
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("decode schedule %s: %w", name, err)
	}
	return &s, nil
}

func (o *Orchestrator) lastFiring(name string) (*api.Firing, error) {
	data, err := o.st.Record(firingRecord, name)
	if errors.Is(err, task.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f api.Firing
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("decode the last firing of schedule %s: %w", name, err)
	}
	return &f, nil
}

// readSchedules reads every schedule, by name, and their last firings.
func (o *Orchestrator) readSchedules() ([]*api.Schedule, map[string]*api.Firing, error) {
	defs, err := o.st.Records(scheduleRecord)
	if err != nil {
		return nil, nil, fmt.Errorf("read schedules: %w", err)
	}
	fired, err := o.st.Records(firingRecord)
	if err != nil {
		return nil, nil, fmt.Errorf("read schedules: %w", err)
	}
	out := make([]*api.Schedule, 0, len(defs))
	last := map[string]*api.Firing{}
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		var s api.Schedule
		if err := json.Unmarshal(defs[name], &s); err != nil {
			o.log.Error("schedule record unreadable; it does not fire", "schedule", name, "err", err)
			continue
		}
		out = append(out, &s)
		if data, ok := fired[name]; ok {
			var f api.Firing
			if err := json.Unmarshal(data, &f); err == nil {
				last[name] = &f
			}
		}
	}
	return out, last, nil
}
