package orchestrator

import (
	"time"

	"github.com/chiffon-dev/chiffon/api"
)

// The schedule machine. The schedules' clock (schedrun.go) reads each schedule
// and its last firing; decideSchedule says, from them and the clock alone, which
// firings to make, which firing to record and when to look again, as effects
// the clock carries out. schedmachine_test.go holds a row for every state a
// schedule can be in and every event the clock can see.

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

// scheduleEffectKind is what a schedule effect asks of the clock.
type scheduleEffectKind int

const (
	// scheduleFire makes the task or batch of the firing at `at`.
	scheduleFire scheduleEffectKind = iota
	// scheduleSaveFiring records the firing at `at` as the schedule's last: the
	// one made then, or, when that one was skipped, a firing that made
	// nothing.
	scheduleSaveFiring
	// scheduleWake asks the clock to look again at `at` at the latest.
	scheduleWake
	// scheduleUnreadable says the schedule's cron or time zone does not read:
	// the clock logs it.
	scheduleUnreadable
)

// scheduleEffect is one thing the clock does for a schedule, in order.
type scheduleEffect struct {
	kind scheduleEffectKind
	at   time.Time
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
type scheduleRow func(seen *scheduleSeen) []scheduleEffect

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

// decideSchedule returns what the clock, started at started, does at now for s
// whose last firing is last (nil: none yet).
func decideSchedule(s *api.Schedule, last *api.Firing, started, now time.Time) []scheduleEffect {
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
func wakeAtNext(seen *scheduleSeen) []scheduleEffect {
	return []scheduleEffect{{kind: scheduleWake, at: seen.when.Next(latest(seen.from, seen.now))}}
}

// fireDueTimes makes every firing due since the clock started and, of those
// missed before, what catch_up says; records the latest due firing, made or
// not, so none is made twice; and looks again at the next time after it.
func fireDueTimes(seen *scheduleSeen) []scheduleEffect {
	var out []scheduleEffect
	for _, at := range pickFirings(seen.due, seen.started, seen.s.CatchUp) {
		out = append(out, scheduleEffect{kind: scheduleFire, at: at})
	}
	lastDue := seen.due[len(seen.due)-1]
	return append(out, scheduleEffect{kind: scheduleSaveFiring, at: lastDue},
		scheduleEffect{kind: scheduleWake, at: seen.when.Next(latest(lastDue, seen.now))})
}

// idleSchedule does nothing: the schedule does not fire, and a change to it
// wakes the clock.
func idleSchedule(*scheduleSeen) []scheduleEffect { return nil }

// brokenSchedule does not fire and says why.
func brokenSchedule(*scheduleSeen) []scheduleEffect {
	return []scheduleEffect{{kind: scheduleUnreadable}}
}
