package fleet

// The schedule's life as a table: a schedule, its last firing, when the clock
// started and the time it looks, and the effects DecideSchedule returns.

import (
	"reflect"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
)

// stNow is a whole hour: an hourly schedule is due at it.
var stNow = time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)

// stHourly is a schedule firing every hour on the hour, made at created.
func stHourly(created time.Time, catchUp api.CatchUp) *api.Schedule {
	return &api.Schedule{ScheduleSpec: api.ScheduleSpec{Name: "hourly", Cron: "0 * * * *", CatchUp: catchUp,
		Task: &api.SubmitRequest{ToAgent: "code", WorkType: "echo"}}, CreatedAt: created}
}

func fireAt(t time.Time) ScheduleEffect   { return ScheduleEffect{Kind: ScheduleFire, At: t} }
func recordAt(t time.Time) ScheduleEffect { return ScheduleEffect{Kind: ScheduleSaveFiring, At: t} }
func wakeAt(t time.Time) ScheduleEffect   { return ScheduleEffect{Kind: ScheduleWake, At: t} }

func stPaused() *api.Schedule {
	s := stHourly(stNow.Add(-3*time.Hour), api.CatchUpAll)
	s.Paused = true
	return s
}

func stBroken() *api.Schedule {
	s := stHourly(stNow.Add(-3*time.Hour), api.CatchUpAll)
	s.TZ = "Mars/Olympus_Mons"
	return s
}

type scheduleMachineRow struct {
	name    string
	s       *api.Schedule
	last    *api.Firing
	started time.Time
	now     time.Time
	effects []ScheduleEffect
}

var (
	hour = time.Hour
	// the clock started 90 minutes ago: 9:00 and 10:00 were due since, 8:00 and
	// before missed.
	stStarted = stNow.Add(-90 * time.Minute)
)

var scheduleMachineRows = []scheduleMachineRow{
	{"active, nothing due: wake at the next time", stHourly(stNow.Add(-10*time.Minute), api.CatchUpNone), nil,
		stStarted, stNow.Add(-time.Minute), []ScheduleEffect{wakeAt(stNow)}},
	{"active, due since the start: fire each, record the last, wake after it",
		stHourly(stNow.Add(-time.Hour-time.Minute), api.CatchUpNone), nil, stStarted, stNow,
		[]ScheduleEffect{fireAt(stNow.Add(-hour)), fireAt(stNow), recordAt(stNow), wakeAt(stNow.Add(hour))}},
	{"active, its last firing recorded: only what is due after it",
		stHourly(stNow.Add(-3*hour), api.CatchUpNone), &api.Firing{At: stNow.Add(-hour)}, stStarted, stNow,
		[]ScheduleEffect{fireAt(stNow), recordAt(stNow), wakeAt(stNow.Add(hour))}},
	{"missed, catch_up none: only those since the start fire; the last due is recorded",
		stHourly(stNow.Add(-3*hour-time.Minute), api.CatchUpNone), nil, stStarted, stNow,
		[]ScheduleEffect{fireAt(stNow.Add(-hour)), fireAt(stNow), recordAt(stNow), wakeAt(stNow.Add(hour))}},
	{"missed, catch_up latest: the latest missed one too",
		stHourly(stNow.Add(-3*hour-time.Minute), api.CatchUpLatest), nil, stStarted, stNow,
		[]ScheduleEffect{fireAt(stNow.Add(-2 * hour)), fireAt(stNow.Add(-hour)), fireAt(stNow), recordAt(stNow), wakeAt(stNow.Add(hour))}},
	{"missed, catch_up all: every missed one, oldest first",
		stHourly(stNow.Add(-3*hour-time.Minute), api.CatchUpAll), nil, stStarted, stNow,
		[]ScheduleEffect{fireAt(stNow.Add(-3 * hour)), fireAt(stNow.Add(-2 * hour)), fireAt(stNow.Add(-hour)), fireAt(stNow),
			recordAt(stNow), wakeAt(stNow.Add(hour))}},
	{"missed only, catch_up none: nothing made, the missed one recorded so it is not made later",
		stHourly(stNow.Add(-2*hour-time.Minute), api.CatchUpNone), nil, stNow.Add(time.Minute), stNow.Add(2 * time.Minute),
		[]ScheduleEffect{recordAt(stNow), wakeAt(stNow.Add(hour))}},
	{"paused, with firings due: nothing", stPaused(), nil, stStarted, stNow, nil},
	{"paused, missed firings: nothing", stPaused(), nil, stNow.Add(time.Minute), stNow.Add(2 * time.Minute), nil},
	{"paused, nothing due: nothing", stPaused(), &api.Firing{At: stNow}, stStarted, stNow.Add(time.Minute), nil},
	{"unreadable: says so, fires nothing", stBroken(), nil, stStarted, stNow, []ScheduleEffect{{Kind: ScheduleUnreadable}}},
}

// TestScheduleMachineDecidesWhatTheClockDoes runs the table.
func TestScheduleMachineDecidesWhatTheClockDoes(t *testing.T) {
	for _, row := range scheduleMachineRows {
		t.Run(row.name, func(t *testing.T) {
			got := DecideSchedule(row.s, row.last, row.started, row.now)
			if !reflect.DeepEqual(got, row.effects) {
				t.Errorf("effects %+v, want %+v", got, row.effects)
			}
		})
	}
}

// TestScheduleMachineHasARowForEveryStateAndEvent fails when a state or an
// event of a schedule has no row.
func TestScheduleMachineHasARowForEveryStateAndEvent(t *testing.T) {
	for _, s := range scheduleStates {
		for _, e := range scheduleEvents {
			if scheduleRows[scheduleKey{s, e}] == nil {
				t.Errorf("no row for a %s schedule that sees %q", s, e)
			}
		}
	}
	if len(scheduleRows) != len(scheduleStates)*len(scheduleEvents) {
		t.Errorf("%d rows for %d states and %d events: a row for a state or event the lists lack",
			len(scheduleRows), len(scheduleStates), len(scheduleEvents))
	}
}
