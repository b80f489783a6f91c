package api

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// CatchUp says what a schedule does about the firings it missed while no
// orchestrator ran it (down, or no leader).
type CatchUp string

// Catch-up modes.
const (
	// CatchUpNone skips the missed firings (the default).
	CatchUpNone CatchUp = "none"
	// CatchUpLatest makes the latest missed firing only.
	CatchUpLatest CatchUp = "latest"
	// CatchUpAll makes every missed firing, oldest first, at most the last 100.
	CatchUpAll CatchUp = "all"
)

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
	// Task is the task each firing makes; or Batch, the batch; or Workflow, a
	// run of the workflow.
	Task     *SubmitRequest    `json:"task,omitempty"`
	Batch    *BatchRequest     `json:"batch,omitempty"`
	Workflow *ScheduleWorkflow `json:"workflow,omitempty"`
}

// ScheduleWorkflow is the workflow run a schedule's firing starts.
type ScheduleWorkflow struct {
	// Name names the workflow.
	Name string `json:"name"`
	// Params are the run's parameters, checked against the workflow's as a
	// run's are.
	Params map[string]any `json:"params,omitempty"`
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

// Firing is one firing of a schedule and what it made: its task, its batch
// or its workflow run.
type Firing struct {
	At      time.Time `json:"at"`
	TaskID  string    `json:"task_id,omitempty"`
	BatchID string    `json:"batch_id,omitempty"`
	RunID   string    `json:"run_id,omitempty"`
}

var scheduleName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// cronParser reads five fields, six with seconds first, or a descriptor.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// When is a schedule's parsed cron expression in its time zone.
type When struct {
	cron cron.Schedule
	loc  *time.Location
}

// Next returns its first time after t, in UTC.
func (w When) Next(t time.Time) time.Time { return w.cron.Next(t.In(w.loc)).UTC() }

// ParseWhen reads a schedule's cron and tz; a bad one is a *FieldError.
func ParseWhen(spec, tz string) (When, error) {
	loc := time.UTC
	if tz != "" {
		var err error
		if loc, err = time.LoadLocation(tz); err != nil || tz == "Local" {
			return When{}, &FieldError{Field: "tz", Message: fmt.Sprintf("unknown time zone %q: give an IANA name such as Europe/Paris", tz)}
		}
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return When{}, &FieldError{Field: "cron", Message: "give the time zone in tz, not in the expression"}
	}
	c, err := cronParser.Parse(spec)
	if err != nil {
		return When{}, &FieldError{Field: "cron", Message: err.Error()}
	}
	return When{c, loc}, nil
}

// Validate checks a schedule and names the offending field.
func (s *ScheduleSpec) Validate() error {
	if !scheduleName.MatchString(s.Name) {
		return &FieldError{Field: "name", Message: "must be 1 to 63 of a-z, 0-9, '_' and '-', starting with a letter or digit"}
	}
	if _, err := ParseWhen(s.Cron, s.TZ); err != nil {
		return err
	}
	switch s.CatchUp {
	case "", CatchUpNone, CatchUpLatest, CatchUpAll:
	default:
		return &FieldError{Field: "catch_up", Message: fmt.Sprintf("must be none, latest or all, got %q", s.CatchUp)}
	}
	targets := 0
	for _, set := range []bool{s.Task != nil, s.Batch != nil, s.Workflow != nil} {
		if set {
			targets++
		}
	}
	switch {
	case targets != 1:
		return &FieldError{Field: "task", Message: "give exactly one of task, batch and workflow"}
	case s.Task != nil:
		if err := s.Task.Validate(); err != nil {
			return prefixField("task.", err)
		}
	case s.Batch != nil:
		if err := s.Batch.Validate(); err != nil {
			return prefixField("batch.", err)
		}
	case !scheduleName.MatchString(s.Workflow.Name): // a workflow's names are a schedule's
		return &FieldError{Field: "workflow.name", Message: "must name a workflow: 1 to 63 of a-z, 0-9, '_' and '-', starting with a letter or digit"}
	}
	return nil
}

// prefixField names a field error's field within the object at prefix.
func prefixField(prefix string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return &FieldError{Field: prefix + fe.Field, Message: fe.Message}
	}
	return err
}

// ValidScheduleName reports whether name may name a schedule.
func ValidScheduleName(name string) bool { return scheduleName.MatchString(name) }
