package taskview

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// How the CLI shows a schedule: `chiffon schedule list` and `show`.

// ScheduleTable writes the table of schedules ss (`chiffon schedule list`).
func ScheduleTable(w io.Writer, ss []*api.Schedule) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCRON\tTZ\tCATCH-UP\tSTATE\tNEXT\tLAST\tWORK")
	for _, s := range ss {
		last := "-"
		if s.Last != nil {
			last = s.Last.At.Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Cron, tzText(s.TZ), catchUpText(s.CatchUp),
			scheduleState(s), timeText(s.Next), last, scheduleWork(s))
	}
	return tw.Flush()
}

// ScheduleText writes schedule s, a row a line (`chiffon schedule show`).
func ScheduleText(w io.Writer, s *api.Schedule) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Name", s.Name)
	row("State", scheduleState(s))
	row("Cron", s.Cron)
	row("TZ", tzText(s.TZ))
	row("Catch-up", catchUpText(s.CatchUp))
	switch {
	case s.Workflow != nil:
		row("Makes", "a run of workflow "+s.Workflow.Name)
		if len(s.Workflow.Params) > 0 {
			row("Parameters", CompactJSON(s.Workflow.Params))
		}
	case s.Batch != nil:
		row("Makes", "a batch")
		BatchRequestRows(row, s.Batch)
	case s.Task != nil:
		row("Makes", "a task")
		row("Work", WorkText(s.Task.ToAgent, s.Task.WorkType))
		if len(s.Task.Parameters) > 0 {
			row("Parameters", CompactJSON(s.Task.Parameters))
		}
		if h := s.Task.Hints; h != nil && *h != (task.Hints{}) {
			row("Hints", CompactJSON(h))
		}
	}
	row("Created", s.CreatedAt.Local().Format(time.DateTime))
	if s.ResumedAt != nil {
		row("Resumed", s.ResumedAt.Local().Format(time.DateTime))
	}
	row("Next", timeText(s.Next))
	last := "never"
	if l := s.Last; l != nil {
		last = l.At.Local().Format(time.DateTime)
		switch {
		case l.RunID != "":
			last += ": workflow run " + l.RunID
		case l.BatchID != "":
			last += ": batch " + l.BatchID
		case l.TaskID != "":
			last += ": task " + l.TaskID
		}
	}
	row("Last", last)
	return tw.Flush()
}

// NextText says when a schedule fires next.
func NextText(s *api.Schedule) string {
	if s.Next == nil {
		if s.Paused {
			return "paused: it does not fire until resumed"
		}
		return "no next firing"
	}
	return "next at " + s.Next.Local().Format(time.DateTime)
}

// scheduleState is active or paused.
func scheduleState(s *api.Schedule) string {
	if s.Paused {
		return "paused"
	}
	return "active"
}

// scheduleWork says what a schedule makes: a task or a batch and its work, or
// a workflow run.
func scheduleWork(s *api.Schedule) string {
	switch {
	case s.Workflow != nil:
		return "workflow " + s.Workflow.Name
	case s.Batch != nil:
		return "batch " + WorkText(s.Batch.ToAgent, s.Batch.WorkType)
	case s.Task != nil:
		return "task " + WorkText(s.Task.ToAgent, s.Task.WorkType)
	}
	return "-"
}

// tzText is a schedule's time zone, UTC when none is given.
func tzText(tz string) string {
	if tz == "" {
		return "UTC"
	}
	return tz
}

// catchUpText is a schedule's catch-up mode, none when none is given.
func catchUpText(c api.CatchUp) string {
	if c == "" {
		return string(api.CatchUpNone)
	}
	return string(c)
}

// timeText is t in local time, or "-".
func timeText(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}
