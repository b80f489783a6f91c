package orchestrator

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// A schedule makes a task, or a batch, at each time its cron expression names.
// Its definition is one record of the task store and what it last fired is
// another (schedrun.go writes it, the API the definition, so neither overwrites
// the other). The task or batch of a firing has an id and a request_id derived
// from the schedule's name and the fire time: a firing made again (retried, after
// a restart, by a new leader) finds what the first made, so it runs once.

// CatchUp says what a schedule does about the firings it missed while no
// orchestrator ran it (down, or no leader).
type CatchUp string

// Catch-up modes.
const (
	// CatchUpNone skips the missed firings (the default).
	CatchUpNone CatchUp = "none"
	// CatchUpLatest makes the latest missed firing only.
	CatchUpLatest CatchUp = "latest"
	// CatchUpAll makes every missed firing, oldest first, up to maxCatchUp.
	CatchUpAll CatchUp = "all"
)

// maxCatchUp bounds the missed firings catch_up all makes: the most recent ones.
const maxCatchUp = 100

// ScheduleSpec is a schedule as an operator gives it.
type ScheduleSpec struct {
	// Name names the schedule: 1 to 63 of a-z, 0-9, '_' and '-', starting with a
	// letter or digit.
	Name string `json:"name"`
	// Cron is when it fires: five fields (minute hour day-of-month month
	// day-of-week), or six with seconds first, or a descriptor such as @daily or
	// @every 10m.
	Cron string `json:"cron"`
	// TZ is the IANA time zone Cron is read in; "" means UTC.
	TZ string `json:"tz,omitempty"`
	// CatchUp is none (the default), latest or all.
	CatchUp CatchUp `json:"catch_up,omitempty"`
	// Paused schedules do not fire.
	Paused bool `json:"paused,omitempty"`
	// Task is the task each firing makes; or Batch, the batch.
	Task  *SubmitRequest `json:"task,omitempty"`
	Batch *BatchRequest  `json:"batch,omitempty"`
}

// Schedule is a schedule as stored and shown.
type Schedule struct {
	ScheduleSpec
	CreatedAt time.Time `json:"created_at"`
	// ResumedAt is when it was last resumed: it fires at the times after it (and
	// after CreatedAt) only.
	ResumedAt *time.Time `json:"resumed_at,omitempty"`
	// Last is what it fired last; Next when it fires next (none while paused).
	Last *Firing    `json:"last,omitempty"`
	Next *time.Time `json:"next,omitempty"`
}

// Firing is one firing of a schedule and what it made.
type Firing struct {
	At      time.Time `json:"at"`
	TaskID  string    `json:"task_id,omitempty"`
	BatchID string    `json:"batch_id,omitempty"`
}

// Record kinds of schedules in the task store.
const (
	scheduleRecord = "schedule"
	firingRecord   = "firing"
)

// Errors of the schedule calls.
var (
	ErrScheduleExists = errors.New("a schedule of that name exists")
)

var scheduleName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// cronParser reads five fields, six with seconds first, or a descriptor.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// when is a schedule's parsed cron expression in its time zone.
type when struct {
	cron cron.Schedule
	loc  *time.Location
}

// next returns its first time after t.
func (w when) next(t time.Time) time.Time { return w.cron.Next(t.In(w.loc)).UTC() }

// parseWhen reads a spec's cron and tz.
func parseWhen(spec, tz string) (when, error) {
	loc := time.UTC
	if tz != "" {
		var err error
		if loc, err = time.LoadLocation(tz); err != nil || tz == "Local" {
			return when{}, &FieldError{"tz", fmt.Sprintf("unknown time zone %q: give an IANA name such as Europe/Paris", tz)}
		}
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return when{}, &FieldError{"cron", "give the time zone in tz, not in the expression"}
	}
	c, err := cronParser.Parse(spec)
	if err != nil {
		return when{}, &FieldError{"cron", err.Error()}
	}
	return when{c, loc}, nil
}

// Validate checks a schedule and names the offending field.
func (s *ScheduleSpec) Validate() error {
	if !scheduleName.MatchString(s.Name) {
		return &FieldError{"name", "must be 1 to 63 of a-z, 0-9, '_' and '-', starting with a letter or digit"}
	}
	if _, err := parseWhen(s.Cron, s.TZ); err != nil {
		return err
	}
	switch s.CatchUp {
	case "", CatchUpNone, CatchUpLatest, CatchUpAll:
	default:
		return &FieldError{"catch_up", fmt.Sprintf("must be none, latest or all, got %q", s.CatchUp)}
	}
	switch {
	case (s.Task == nil) == (s.Batch == nil):
		return &FieldError{"task", "give exactly one of task and batch"}
	case s.Task != nil:
		if err := s.Task.Validate(); err != nil {
			return prefixField("task.", err)
		}
	default:
		if err := s.Batch.Validate(); err != nil {
			return prefixField("batch.", err)
		}
	}
	return nil
}

// prefixField names a field error's field within the object at prefix.
func prefixField(prefix string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return &FieldError{prefix + fe.Field, fe.Message}
	}
	return err
}

// AddSchedule stores a new schedule; it fires from now on.
func (o *Orchestrator) AddSchedule(spec ScheduleSpec) (*Schedule, error) {
	if spec.CatchUp == "" {
		spec.CatchUp = CatchUpNone
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	sr := spec.Task
	if spec.Batch != nil {
		t := spec.Batch.task("")
		sr = &t
	}
	if err := o.checkSize(sr); err != nil {
		return nil, err
	}
	o.schedMu.Lock()
	defer o.schedMu.Unlock()
	if _, err := o.st.Record(scheduleRecord, spec.Name); !errors.Is(err, ErrNotFound) {
		if err == nil {
			err = ErrScheduleExists
		}
		return nil, err
	}
	s := &Schedule{ScheduleSpec: spec, CreatedAt: time.Now().UTC()}
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
func (o *Orchestrator) PauseSchedule(name string, pause bool) (*Schedule, error) {
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
func (o *Orchestrator) GetSchedule(name string) (*Schedule, error) {
	if !scheduleName.MatchString(name) {
		return nil, ErrNotFound
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
func (o *Orchestrator) Schedules() ([]*Schedule, error) {
	defs, fired, err := o.readSchedules()
	if err != nil {
		return nil, err
	}
	out := make([]*Schedule, 0, len(defs))
	for _, s := range defs {
		out = append(out, o.scheduleView(s, fired[s.Name]))
	}
	return out, nil
}

// scheduleView is s with its last firing and its next.
func (o *Orchestrator) scheduleView(s *Schedule, last *Firing) *Schedule {
	v := *s
	v.Last = last
	if w, err := parseWhen(s.Cron, s.TZ); err == nil && !s.Paused {
		next := w.next(latest(s.from(last), time.Now()))
		v.Next = &next
	}
	return &v
}

// from is the time after which s fires: its creation, its resumption, its last
// firing, whichever is latest.
func (s *Schedule) from(last *Firing) time.Time {
	t := s.CreatedAt
	if s.ResumedAt != nil && s.ResumedAt.After(t) {
		t = *s.ResumedAt
	}
	if last != nil && last.At.After(t) {
		t = last.At
	}
	return t
}

func (o *Orchestrator) putSchedule(s *Schedule) error {
	s.Last, s.Next = nil, nil // views, not stored
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode schedule %s: %w", s.Name, err)
	}
	return o.st.PutRecord(scheduleRecord, s.Name, data)
}

func (o *Orchestrator) storedSchedule(name string) (*Schedule, error) {
	data, err := o.st.Record(scheduleRecord, name)
	if err != nil {
		return nil, err
	}
	var s Schedule
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("decode schedule %s: %w", name, err)
	}
	return &s, nil
}

func (o *Orchestrator) lastFiring(name string) (*Firing, error) {
	data, err := o.st.Record(firingRecord, name)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f Firing
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("decode the last firing of schedule %s: %w", name, err)
	}
	return &f, nil
}

// readSchedules reads every schedule, by name, and their last firings.
func (o *Orchestrator) readSchedules() ([]*Schedule, map[string]*Firing, error) {
	defs, err := o.st.Records(scheduleRecord)
	if err != nil {
		return nil, nil, fmt.Errorf("read schedules: %w", err)
	}
	fired, err := o.st.Records(firingRecord)
	if err != nil {
		return nil, nil, fmt.Errorf("read schedules: %w", err)
	}
	out := make([]*Schedule, 0, len(defs))
	last := map[string]*Firing{}
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		var s Schedule
		if err := json.Unmarshal(defs[name], &s); err != nil {
			o.log.Error("schedule record unreadable; it does not fire", "schedule", name, "err", err)
			continue
		}
		out = append(out, &s)
		if data, ok := fired[name]; ok {
			var f Firing
			if err := json.Unmarshal(data, &f); err == nil {
				last[name] = &f
			}
		}
	}
	return out, last, nil
}
