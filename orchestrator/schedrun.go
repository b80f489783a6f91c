package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/core"
	"github.com/chiffon-dev/chiffon/orchestrator/fleet"
)

// scheduleIdle is the longest the schedules' clock sleeps: it reads the
// schedules again at least this often.
const scheduleIdle = time.Minute

// runSchedules fires the schedules while the core runs: at each schedule's next
// time it makes its task or batch, then records the firing. A firing due before
// the clock started was missed (no orchestrator ran it): the schedule's catch_up
// says which of those it makes.
func (o *Orchestrator) runSchedules(ctx context.Context, wake <-chan struct{}) {
	started := time.Now()
	// Tests across processes read when the clock started: what was due before
	// it was missed.
	o.log.Info("schedules: clock started", "at", started.UTC().Format(time.RFC3339Nano))
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-wake:
			timer.Stop()
		}
		next := o.fireDue(started, time.Now())
		timer.Reset(max(time.Until(next), 0))
	}
}

// fireDue makes each schedule's firings due at now, as the schedule machine
// (fleet.DecideSchedule) says, and returns when to look again: the earliest
// next firing, or sooner after a failure.
func (o *Orchestrator) fireDue(started, now time.Time) time.Time {
	next := now.Add(scheduleIdle)
	defs, fired, err := o.readSchedules()
	if err != nil {
		o.log.Warn("schedules: read", "err", err)
		return now.Add(fleet.Retry)
	}
	for _, s := range defs {
		if at, ok := o.runSchedule(s, fleet.DecideSchedule(s, fired[s.Name], started, now)); ok {
			next = earliest(next, at)
		} else {
			next = earliest(next, now.Add(fleet.Retry))
		}
	}
	return next
}

// runSchedule carries out s's effects, in order: it returns when s wants the
// clock back (the zero time and true when it does not), or false after a
// failure, which the clock tries again soon.
func (o *Orchestrator) runSchedule(s *api.Schedule, effects []fleet.ScheduleEffect) (time.Time, bool) {
	var made *api.Firing
	wake := time.Time{}
	for _, e := range effects {
		switch e.Kind {
		case fleet.ScheduleFire:
			f, err := o.fire(s, e.At)
			if err != nil {
				o.log.Warn("schedule: fire", "schedule", s.Name, "err", err)
				return time.Time{}, false
			}
			made = f
		case fleet.ScheduleSaveFiring:
			last := made
			if last == nil || !last.At.Equal(e.At) {
				last = &api.Firing{At: e.At} // skipped, not made
			}
			if err := o.putFiring(s.Name, last); err != nil {
				o.log.Warn("schedule: record a firing", "schedule", s.Name, "err", err)
				return time.Time{}, false
			}
		case fleet.ScheduleWake:
			wake = e.At
		case fleet.ScheduleUnreadable:
			o.log.Error("schedule unreadable; it does not fire", "schedule", s.Name)
		}
	}
	if wake.IsZero() {
		return time.Now().Add(scheduleIdle), true
	}
	return wake, true
}

// fire makes the task or batch of s's firing at at: with the ids derived from
// the schedule and the time, a firing made twice makes it once.
func (o *Orchestrator) fire(s *api.Schedule, at time.Time) (*api.Firing, error) {
	key := at.UTC().Format(time.RFC3339Nano)
	f := &api.Firing{At: at}
	if s.Task != nil {
		org := origin{id: derivedID("schedule-task", s.Name, key), requestID: derivedID("schedule-request", s.Name, key),
			schedule: s.Name, fireTime: &f.At, by: "schedule " + s.Name}
		t, made, err := o.submit(*s.Task, org)
		if err != nil {
			return nil, err
		}
		f.TaskID = t.ID
		if made {
			o.log.Info("schedule fired", "schedule", s.Name, "fire_time", key, "task_id", t.ID)
		}
		return f, nil
	}
	b, err := o.createBatch(*s.Batch, derivedID("schedule-batch", s.Name, key), s.Name, &f.At, "schedule "+s.Name)
	var tle *core.TooLargeError
	switch {
	case errors.Is(err, ErrBatchNoTargets):
		o.log.Warn("schedule fired: no agent matches its batch; nothing made", "schedule", s.Name, "fire_time", key)
		return f, nil
	case errors.As(err, &tle):
		o.log.Warn("schedule fired: its batch's work_request is too large for an agent; nothing made",
			"schedule", s.Name, "fire_time", key, "err", err)
		return f, nil
	}
	if err != nil {
		return nil, err
	}
	f.BatchID = b.ID
	o.log.Info("schedule fired", "schedule", s.Name, "fire_time", key, "batch_id", b.ID)
	return f, nil
}

func (o *Orchestrator) putFiring(name string, f *api.Firing) error {
	data, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode a firing of schedule %s: %w", name, err)
	}
	return o.st.PutRecord(firingRecord, name, data)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
