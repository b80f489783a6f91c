package fleet

import (
	"time"

	"github.com/chiffon-dev/chiffon/api"
)

// The schedule machine. The schedules' clock (schedrun.go) reads
// each schedule and its last firing; DecideSchedule says, from them and the
// clock alone, which firings to make, which firing to record and when to look
// again, as effects the clock carries out. schedule_test.go holds a row for
// every state a schedule can be in and every event the clock can see.

// maxCatchUp bounds the missed firings catch_up all makes: the most recent ones.
const maxCatchUp = 100

// scheduleState is what a schedule is to its clock.
type scheduleState string

// Schedule states.
const (
	// scheduleActive fires at its cron's times.
	scheduleActive scheduleState = "active"
	// schedulePaused does not fire.
	schedulePaused scheduleState = "paused"
	// scheduleBroken has a cron or time zone that no longer reads (a record
	// from another release): it does not fire.
	scheduleBroken scheduleState = "broken"
)

// scheduleStates lists every schedule state.
var scheduleStates = []scheduleState{scheduleActive, schedulePaused, scheduleBroken}

// scheduleEvent is what the clock sees of a schedule when it looks.
type scheduleEvent string

// Schedule events.
const (
	// scheduleNothingDue: no firing is due since the last one.
	scheduleNothingDue scheduleEvent = "nothing due"
	// scheduleDue: firings are due, each since the clock started.
	scheduleDue scheduleEvent = "due"
	// scheduleMissed: firings were due before the clock started (no
	// orchestrator ran it then), and maybe since.
	scheduleMissed scheduleEvent = "missed"
)

// scheduleEvents lists every schedule event.
var scheduleEvents = []scheduleEvent{scheduleNothingDue, scheduleDue, scheduleMissed}

// ScheduleEffectKind is what a schedule effect asks of the clock.
type ScheduleEffectKind int

// Schedule effect kinds.
const (
	// ScheduleFire makes the task or batch of the firing at At.
	ScheduleFire ScheduleEffectKind = iota
	// ScheduleSaveFiring records the firing at At as the schedule's last: the
	// one made then, or, when that one was skipped, a firing that made
	// nothing.
	ScheduleSaveFiring
	// ScheduleWake asks the clock to look again at At at the latest.
	ScheduleWake
	// ScheduleUnreadable says the schedule's cron or time zone does not read:
	// the clock logs it.
	ScheduleUnreadable
)

// ScheduleEffect is one thing the clock does for a schedule, in order.
type ScheduleEffect struct {
	Kind ScheduleEffectKind
	At   time.Time // the firing's time (fire, save), or when to look again (wake)
}

// scheduleSeen is a schedule as the clock sees it at now.
type scheduleSeen struct {
	s       *api.Schedule
	when    api.When
	from    time.Time   // the time after which it fires
	due     []time.Time // its times after from up to now
	started time.Time   // when the clock started
	now     time.Time
}

// scheduleRow is one row of the machine.
type scheduleRow func(seen *scheduleSeen) []ScheduleEffect

// scheduleKey names a row.
type scheduleKey struct {
	state scheduleState
	event scheduleEvent
}

// scheduleRows is the machine: one row for each state and event. A paused or
// broken schedule does nothing whatever is due; its firings are not made, and
// a resumed one fires only after its resumption.
var scheduleRows = map[scheduleKey]scheduleRow{
	{scheduleActive, scheduleNothingDue}: wakeAtNext,
	{scheduleActive, scheduleDue}:        fireDueTimes,
	{scheduleActive, scheduleMissed}:     fireDueTimes,

	{schedulePaused, scheduleNothingDue}: idleSchedule,
	{schedulePaused, scheduleDue}:        idleSchedule,
	{schedulePaused, scheduleMissed}:     idleSchedule,

	{scheduleBroken, scheduleNothingDue}: brokenSchedule,
	{scheduleBroken, scheduleDue}:        brokenSchedule,
	{scheduleBroken, scheduleMissed}:     brokenSchedule,
}

// DecideSchedule returns what the clock, started at started, does at now for s
// whose last firing is last (nil: none yet).
func DecideSchedule(s *api.Schedule, last *api.Firing, started, now time.Time) []ScheduleEffect {
	seen := &scheduleSeen{s: s, from: fromTime(s, last), started: started, now: now}
	state := schedulePaused
	if !s.Paused {
		state = scheduleActive
		w, err := api.ParseWhen(s.Cron, s.TZ)
		if err != nil {
			state = scheduleBroken
		}
		seen.when = w
	}
	event := scheduleNothingDue
	if state == scheduleActive {
		seen.due = dueTimes(seen.when, seen.from, now)
		switch {
		case len(seen.due) > 0 && seen.due[0].Before(started):
			event = scheduleMissed
		case len(seen.due) > 0:
			event = scheduleDue
		}
	}
	return scheduleRows[scheduleKey{state, event}](seen)
}

// wakeAtNext looks again at the schedule's next time.
func wakeAtNext(seen *scheduleSeen) []ScheduleEffect {
	return []ScheduleEffect{{Kind: ScheduleWake, At: seen.when.Next(latest(seen.from, seen.now))}}
}

// fireDueTimes makes every firing due since the clock started and, of those
// missed before, what catch_up says; records the latest due firing, made or
// not, so none is made twice; and looks again at the next time after it.
func fireDueTimes(seen *scheduleSeen) []ScheduleEffect {
	var out []ScheduleEffect
	for _, at := range pickFirings(seen.due, seen.started, seen.s.CatchUp) {
		out = append(out, ScheduleEffect{Kind: ScheduleFire, At: at})
	}
	lastDue := seen.due[len(seen.due)-1]
	return append(out, ScheduleEffect{Kind: ScheduleSaveFiring, At: lastDue},
		ScheduleEffect{Kind: ScheduleWake, At: seen.when.Next(latest(lastDue, seen.now))})
}

// idleSchedule does nothing: the schedule does not fire, and a change to it
// wakes the clock.
func idleSchedule(*scheduleSeen) []ScheduleEffect { return nil }

// brokenSchedule does not fire and says why.
func brokenSchedule(*scheduleSeen) []ScheduleEffect {
	return []ScheduleEffect{{Kind: ScheduleUnreadable}}
}

// NextFiring is when s fires next after now, given its last firing (nil: none
// yet); false when s is paused or its cron or time zone does not read.
func NextFiring(s *api.Schedule, last *api.Firing, now time.Time) (time.Time, bool) {
	w, err := api.ParseWhen(s.Cron, s.TZ)
	if err != nil || s.Paused {
		return time.Time{}, false
	}
	return w.Next(latest(fromTime(s, last), now)), true
}

// fromTime is the time after which s fires: its creation, its resumption, its
// last firing, whichever is latest.
func fromTime(s *api.Schedule, last *api.Firing) time.Time {
	t := s.CreatedAt
	if s.ResumedAt != nil && s.ResumedAt.After(t) {
		t = *s.ResumedAt
	}
	if last != nil && last.At.After(t) {
		t = last.At
	}
	return t
}

// dueTimes lists w's times after from up to now, oldest first; of very many, the
// last maxDue.
func dueTimes(w api.When, from, now time.Time) []time.Time {
	const maxDue = 100_000
	var out []time.Time
	for t := w.Next(from); !t.After(now); t = w.Next(t) {
		if t.IsZero() { // no time matches
			break
		}
		out = append(out, t)
		if len(out) == 2*maxDue {
			out = append(out[:0], out[maxDue:]...)
		}
	}
	return out
}

// pickFirings keeps of the due times those to make: every one due since the
// clock started, and of the missed ones before, what catch_up says.
func pickFirings(due []time.Time, started time.Time, mode api.CatchUp) []time.Time {
	missed := 0
	for missed < len(due) && due[missed].Before(started) {
		missed++
	}
	switch mode {
	case api.CatchUpAll:
		return due[max(0, missed-maxCatchUp):]
	case api.CatchUpLatest:
		return due[max(0, missed-1):]
	}
	return due[missed:]
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
