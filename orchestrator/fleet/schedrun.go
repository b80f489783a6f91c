package fleet

import (
	"context"
	"errors"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// scheduleIdle is the longest the schedules' clock sleeps: it reads the
// schedules again at least this often.
const scheduleIdle = time.Minute

// runSchedules fires the schedules while the core runs: at each schedule's next
// time it makes its task, batch or workflow run, then records the firing. A firing due before
// the clock started was missed (no orchestrator ran it): the schedule's catch_up
// says which of those it makes.
func (f *Fleet) runSchedules(ctx context.Context, wake <-chan struct{}) {
	started := time.Now()
	// Tests across processes read when the clock started: what was due before
	// it was missed.
	f.log.Info("schedules: clock started", "at", started.UTC().Format(time.RFC3339Nano))
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
		next := f.FireDue(started, time.Now())
		timer.Reset(max(time.Until(next), 0))
	}
}

// FireDue makes each schedule's firings due at now for a clock started at
// started, as the schedule machine (DecideSchedule) says, and returns when to
// look again: the earliest next firing, or sooner after a failure. The clock
// calls it; a test calls it itself, with the fleet stopped, at the times it
// chooses.
func (f *Fleet) FireDue(started, now time.Time) time.Time {
	next := now.Add(scheduleIdle)
	defs, fired, err := f.readSchedules()
	if err != nil {
		f.log.Warn("schedules: read", "err", err)
		return now.Add(Retry)
	}
	for _, s := range defs {
		if at, ok := f.runSchedule(s, DecideSchedule(s, fired[s.Name], started, now)); ok {
			next = earliest(next, at)
		} else {
			next = earliest(next, now.Add(Retry))
		}
	}
	return next
}

// runSchedule carries out s's effects, in order: it returns when s wants the
// clock back (the zero time and true when it does not), or false after a
// failure, which the clock tries again soon.
func (f *Fleet) runSchedule(s *api.Schedule, effects []ScheduleEffect) (time.Time, bool) {
	var made *api.Firing
	wake := time.Time{}
	for _, e := range effects {
		switch e.Kind {
		case ScheduleFire:
			fired, err := f.fire(s, e.At)
			if err != nil {
				f.log.Warn("schedule: fire", "schedule", s.Name, "err", err)
				return time.Time{}, false
			}
			made = fired
		case ScheduleSaveFiring:
			last := made
			if last == nil || !last.At.Equal(e.At) {
				last = &api.Firing{At: e.At} // skipped, not made
			}
			if err := f.putFiring(s.Name, last); err != nil {
				f.log.Warn("schedule: record a firing", "schedule", s.Name, "err", err)
				return time.Time{}, false
			}
		case ScheduleWake:
			wake = e.At
		case ScheduleUnreadable:
			f.log.Error("schedule unreadable; it does not fire", "schedule", s.Name)
		}
	}
	if wake.IsZero() {
		return time.Now().Add(scheduleIdle), true
	}
	return wake, true
}

// fire makes the task, batch or workflow run of s's firing at at: with the
// ids derived from the schedule and the time, a firing made twice makes it
// once.
func (f *Fleet) fire(s *api.Schedule, at time.Time) (*api.Firing, error) {
	key := at.UTC().Format(time.RFC3339Nano)
	fired := &api.Firing{At: at}
	if s.Workflow != nil {
		return f.fireRun(s, fired, key)
	}
	if s.Task != nil {
		org := task.Origin{ID: derivedID("schedule-task", s.Name, key), RequestID: derivedID("schedule-request", s.Name, key),
			Schedule: s.Name, FireTime: &fired.At, By: "schedule " + s.Name}
		t, made, err := f.core.SubmitAs(*s.Task, org)
		if err != nil {
			return nil, err
		}
		fired.TaskID = t.ID
		if made {
			f.log.Info("schedule fired", "schedule", s.Name, "fire_time", key, "task_id", t.ID)
		}
		return fired, nil
	}
	b, err := f.createBatch(*s.Batch, batchOrigin{id: derivedID("schedule-batch", s.Name, key), schedule: s.Name,
		fireTime: &fired.At, by: "schedule " + s.Name})
	switch {
	case errors.Is(err, ErrBatchNoTargets):
		f.log.Warn("schedule fired: no agent matches its batch; nothing made", "schedule", s.Name, "fire_time", key)
		return fired, nil
	case f.large != nil && errors.Is(err, f.large):
		f.log.Warn("schedule fired: its batch's work_request is too large for an agent; nothing made",
			"schedule", s.Name, "fire_time", key, "err", err)
		return fired, nil
	}
	if err != nil {
		return nil, err
	}
	fired.BatchID = b.ID
	f.log.Info("schedule fired", "schedule", s.Name, "fire_time", key, "batch_id", b.ID)
	return fired, nil
}

// putFiring stores fired as what schedule name fired last.
func (f *Fleet) putFiring(name string, fired *api.Firing) error {
	return putRecord(f.st, FiringRecord, name, "a firing of schedule "+name, fired)
}

// earliest is the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// fireRun starts the workflow run of s's firing, fired, whose time is key. A
// run its workflow refuses (it runs max_runs runs, it is gone, its
// parameters no longer do) is not made: the firing is skipped, logged, and
// not tried again.
func (f *Fleet) fireRun(s *api.Schedule, fired *api.Firing, key string) (*api.Firing, error) {
	w := s.Workflow
	run, err := f.startRun(w.Name, w.Params, derivedID("schedule-run", s.Name, key), s.Name, &fired.At, "schedule "+s.Name)
	var fe *api.FieldError
	switch {
	case errors.Is(err, ErrTooManyRuns):
		f.log.Warn("schedule fired: its workflow runs as many runs as its max_runs allows; this firing is skipped",
			"schedule", s.Name, "fire_time", key, "workflow", w.Name)
		return fired, nil
	case errors.Is(err, task.ErrNotFound), errors.As(err, &fe):
		f.log.Warn("schedule fired: its workflow refuses the run; nothing made",
			"schedule", s.Name, "fire_time", key, "workflow", w.Name, "err", err)
		return fired, nil
	case err != nil:
		return nil, err
	}
	fired.RunID = run.ID
	f.log.Info("schedule fired", "schedule", s.Name, "fire_time", key, "run_id", run.ID)
	return fired, nil
}
