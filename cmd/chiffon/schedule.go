package main

import (
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/spf13/cobra"
)

// newScheduleCmd is `chiffon schedule`: add, list, show, pause, resume and rm.
func newScheduleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Schedules: a task, or a batch, made at the times of a cron expression",
		Long: `A schedule makes a task, or a batch (one task per matching agent), at each time its
cron expression names, in its time zone. The orchestrator that leads runs them; each
firing is made once, even across a restart or a change of leader.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newScheduleAddCmd(), newScheduleListCmd(), newScheduleShowCmd(),
		newSchedulePauseCmd(true), newSchedulePauseCmd(false), newScheduleRmCmd())
	return cmd
}

// newScheduleAddCmd is `chiffon schedule add NAME`.
func newScheduleAddCmd() *cobra.Command {
	var (
		cf                clientFlags
		cron, tz, catchUp string
		paused            bool
		tf                taskFlags
		bf                batchFlags
	)
	cmd := &cobra.Command{
		Use:   "add NAME --cron EXPR --to TYPE --work-type W [--param k=v]... [--all | --label k=v | --agents a,b]",
		Short: "Add a schedule of a task, or with --all/--label/--agents of a batch",
		Long: `Adds schedule NAME (1 to 63 of a-z, 0-9, '_' and '-'): at each time of --cron it
makes the task that --to, --work-type, --param, --params-json and --hint describe, as
submit does (--param k=v typed by the work type's schema; a value it refuses exits 65).
With --all, --label or --agents it makes a batch instead, one task per matching agent
(--max-parallel and --stop-on-failure as for submit --all).

--cron takes five fields (minute hour day-of-month month day-of-week), six with seconds
first, or a descriptor such as @daily, @hourly or "@every 10m". It is read in the IANA
time zone --tz (default UTC). --catch-up says what to do about the firings missed while
no orchestrator ran: none (the default) skips them, latest makes the last one, all
makes each (the last 100 at most). --paused adds it paused: it fires once resumed.

Prints the schedule's next firing, or with --json the schedule. A schedule of the same
name must be removed first (schedule rm).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := api.ScheduleSpec{Name: args[0], Cron: cron, TZ: tz,
				CatchUp: api.CatchUp(catchUp), Paused: paused}
			task, err := scheduleWhat(&spec, &tf, &bf)
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			params, err := tf.typedParams(cmd.Context(), c, *task)
			if err != nil {
				return err
			}
			if spec.Task != nil {
				spec.Task.Parameters = params
			} else {
				spec.Batch.Parameters = params
			}
			s, err := c.AddSchedule(cmd.Context(), spec)
			if status(err) == http.StatusConflict {
				return &explainedError{
					msg: fmt.Sprintf("a schedule named %q exists already (HTTP 409): remove it first (chiffon schedule rm %s) or pick another name",
						spec.Name, spec.Name),
					err: err,
				}
			}
			if err != nil {
				return err
			}
			if cf.jsonOut {
				return printJSON(cmd.OutOrStdout(), s)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "schedule %s added; %s\n", s.Name, nextText(s))
			return err
		},
	}
	cf.add(cmd)
	f := cmd.Flags()
	f.StringVar(&cron, "cron", "", `when it fires: "MIN HOUR DOM MON DOW", six fields with seconds first, or @daily, "@every 10m"...`)
	f.StringVar(&tz, "tz", "", "IANA time zone the cron expression is read in, such as Europe/Paris (default UTC)")
	f.StringVar(&catchUp, "catch-up", string(api.CatchUpNone), "the firings missed while no orchestrator ran: none, latest or all")
	f.BoolVar(&paused, "paused", false, "add it paused")
	tf.add(cmd, "hint k=v: max_duration_seconds, max_memory_mb, gpu_vram_mb, agent_id (not with a batch); repeatable")
	bf.add(f)
	_ = cmd.MarkFlagRequired("cron")
	return cmd
}

// scheduleWhat sets what spec makes, the task of tf or the batch of bf, and
// checks spec: a refusal is a usage error. task is the one each firing makes
// (a batch's, for one agent).
func scheduleWhat(spec *api.ScheduleSpec, tf *taskFlags, bf *batchFlags) (task *api.SubmitRequest, err error) {
	t, err := tf.request()
	if err != nil {
		return nil, err
	}
	if len(t.Parameters) == 0 {
		t.Parameters = nil
	}
	batch, err := bf.request(t)
	if err != nil {
		return nil, err
	}
	if batch != nil {
		spec.Batch = batch
	} else {
		spec.Task = &t
	}
	if err := spec.Validate(); err != nil {
		return nil, fieldUsage(err)
	}
	return &t, nil
}

// newScheduleListCmd is `chiffon schedule list`.
func newScheduleListCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the schedules: cron, time zone, state, next and last firing",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			ss, err := c.Schedules(cmd.Context())
			if err != nil {
				return err
			}
			if cf.jsonOut {
				return printJSON(cmd.OutOrStdout(), ss)
			}
			return printScheduleTable(cmd.OutOrStdout(), ss)
		},
	}
	cf.add(cmd)
	return cmd
}

// newScheduleShowCmd is `chiffon schedule show NAME`.
func newScheduleShowCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a schedule: when it fires, what it makes, its next and last firing",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			s, err := c.Schedule(cmd.Context(), args[0])
			if err != nil {
				return noSchedule(err, args[0])
			}
			if cf.jsonOut {
				return printJSON(cmd.OutOrStdout(), s)
			}
			return printSchedule(cmd.OutOrStdout(), s)
		},
	}
	cf.add(cmd)
	return cmd
}

// newSchedulePauseCmd is `schedule pause NAME`, or with pause false `schedule
// resume NAME`.
func newSchedulePauseCmd(pause bool) *cobra.Command {
	var cf clientFlags
	use, short, done := "resume NAME", "Resume a paused schedule: it fires at its times from now on (missed ones are not made)", "resumed"
	if pause {
		use, short, done = "pause NAME", "Pause a schedule: it does not fire until resumed", "paused"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			s, err := c.PauseSchedule(cmd.Context(), args[0], pause)
			if err != nil {
				return noSchedule(err, args[0])
			}
			if cf.jsonOut {
				return printJSON(cmd.OutOrStdout(), s)
			}
			if s.Paused {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "schedule %s %s: it does not fire until resumed\n", s.Name, done)
			} else {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "schedule %s %s; %s\n", s.Name, done, nextText(s))
			}
			return err
		},
	}
	cf.add(cmd)
	return cmd
}

// scheduleRemoved is what `schedule rm --json` prints.
type scheduleRemoved struct {
	Name    string `json:"name"`
	Removed bool   `json:"removed"`
}

// newScheduleRmCmd is `chiffon schedule rm NAME`.
func newScheduleRmCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"remove"},
		Short:   "Remove a schedule; the tasks and batches it made stay",
		Long: `Removes a schedule: it fires no more. The tasks and batches it made stay, and go on.
With --json it prints {"name": NAME, "removed": true}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			if err := c.RemoveSchedule(cmd.Context(), args[0]); err != nil {
				return noSchedule(err, args[0])
			}
			if cf.jsonOut {
				return printJSON(cmd.OutOrStdout(), scheduleRemoved{Name: args[0], Removed: true})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "schedule %s removed\n", args[0])
			return err
		},
	}
	cf.add(cmd)
	return cmd
}

// printScheduleTable is the table of `chiffon schedule list`.
func printScheduleTable(w io.Writer, ss []*api.Schedule) error {
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

// printSchedule shows one schedule.
func printSchedule(w io.Writer, s *api.Schedule) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Name", s.Name)
	row("State", scheduleState(s))
	row("Cron", s.Cron)
	row("TZ", tzText(s.TZ))
	row("Catch-up", catchUpText(s.CatchUp))
	switch {
	case s.Batch != nil:
		row("Makes", "a batch")
		batchRequestRows(row, s.Batch)
	case s.Task != nil:
		row("Makes", "a task")
		row("Work", workText(s.Task.ToAgent, s.Task.WorkType))
		if len(s.Task.Parameters) > 0 {
			row("Parameters", compactJSON(s.Task.Parameters))
		}
		if h := s.Task.Hints; h != nil && *h != (task.Hints{}) {
			row("Hints", compactJSON(h))
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
		case l.BatchID != "":
			last += ": batch " + l.BatchID
		case l.TaskID != "":
			last += ": task " + l.TaskID
		}
	}
	row("Last", last)
	return tw.Flush()
}

// scheduleState is active or paused.
func scheduleState(s *api.Schedule) string {
	if s.Paused {
		return "paused"
	}
	return "active"
}

// scheduleWork says what a schedule makes: task or batch, and its work.
func scheduleWork(s *api.Schedule) string {
	switch {
	case s.Batch != nil:
		return "batch " + workText(s.Batch.ToAgent, s.Batch.WorkType)
	case s.Task != nil:
		return "task " + workText(s.Task.ToAgent, s.Task.WorkType)
	}
	return "-"
}

// nextText says when a schedule fires next.
func nextText(s *api.Schedule) string {
	if s.Next == nil {
		if s.Paused {
			return "paused: it does not fire until resumed"
		}
		return "no next firing"
	}
	return "next at " + s.Next.Local().Format(time.DateTime)
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
