package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/internal/taskview"
	"github.com/spf13/cobra"
)

// newScheduleCmd is `chiffon schedule`: add, list, show, pause, resume and rm.
func newScheduleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Schedules: a task, a batch or a workflow run made at the times of a cron expression",
		Long: `A schedule makes a task, a batch (one task per matching agent) or a run of a workflow
at each time its cron expression names, in its time zone. The orchestrator that leads runs them; each
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
		cf                          clientFlags
		cron, tz, catchUp, workflow string
		paused                      bool
		tf                          taskFlags
		bf                          batchFlags
	)
	cmd := &cobra.Command{
		Use:   "add NAME --cron EXPR (--to TYPE --work-type W [--all | --label k=v | --agents a,b] | --workflow W) [--param k=v]...",
		Short: "Add a schedule of a task, with --all/--label/--agents of a batch, with --workflow of a workflow run",
		Long: `Adds schedule NAME (1 to 63 of a-z, 0-9, '_' and '-'): at each time of --cron it
makes the task that --to, --work-type, --param, --params-json and --hint describe, as
submit does (--param k=v typed by the work type's schema; a value it refuses exits 65).
With --all, --label or --agents it makes a batch instead, one task per matching agent
(--max-parallel and --stop-on-failure as for submit --all). With --workflow W it starts
a run of workflow W instead, --param typed by W's parameters (as workflow run types
them); a firing W refuses (it runs max_runs runs already) is skipped.

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
			task, err := scheduleWhat(&spec, &tf, &bf, workflow)
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			if workflow != "" {
				spec.Workflow, err = workflowConfig().ScheduleWorkflow(cmd.Context(), c, workflow, tf.params)
			} else {
				err = typeScheduleParams(cmd.Context(), c, &spec, &tf, *task)
			}
			if err != nil {
				return err
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
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "schedule %s added; %s\n", s.Name, taskview.NextText(s))
			return err
		},
	}
	cf.add(cmd)
	f := cmd.Flags()
	f.StringVar(&cron, "cron", "", `when it fires: "MIN HOUR DOM MON DOW", six fields with seconds first, or @daily, "@every 10m"...`)
	f.StringVar(&tz, "tz", "", "IANA time zone the cron expression is read in, such as Europe/Paris (default UTC)")
	f.StringVar(&catchUp, "catch-up", string(api.CatchUpNone), "the firings missed while no orchestrator ran: none, latest or all")
	f.BoolVar(&paused, "paused", false, "add it paused")
	f.StringVar(&workflow, "workflow", "", "start a run of this workflow at each firing (not with --to, --work-type, --hint or a batch)")
	tf.add(cmd, "hint k=v: max_duration_seconds, max_memory_mb, gpu_vram_mb, agent_id (not with a batch); repeatable")
	for _, name := range []string{"to", "work-type"} { // but with --workflow: scheduleWhat asks for them
		_ = f.SetAnnotation(name, cobra.BashCompOneRequiredFlag, []string{"false"})
	}
	bf.add(f)
	_ = cmd.MarkFlagRequired("cron")
	return cmd
}

// scheduleWhat sets what spec makes, the task of tf or the batch of bf, and
// checks spec: a refusal is a usage error. task is the one each firing makes
// (a batch's, for one agent). With workflow, spec gets its run later, and tf
// and bf may give only --param.
func scheduleWhat(spec *api.ScheduleSpec, tf *taskFlags, bf *batchFlags, workflow string) (task *api.SubmitRequest, err error) {
	switch {
	case workflow != "" && (tf.to != "" || tf.workType != "" || tf.paramsJS != "" || len(tf.hints) > 0 || bf.batch()):
		return nil, usagef("--workflow: not with --to, --work-type, --params-json, --hint or a batch's flags")
	case workflow != "":
		spec.Workflow = &api.ScheduleWorkflow{Name: workflow} // its params once the workflow is read
		if err := spec.Validate(); err != nil {
			return nil, fieldUsage(err)
		}
		return nil, nil
	case tf.to == "" || tf.workType == "":
		return nil, usagef(`required flag(s) "to", "work-type" not set (or --workflow)`)
	}
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

// typeScheduleParams types the parameters of spec's task or batch by the
// work type's schema.
func typeScheduleParams(ctx context.Context, c *client.Client, spec *api.ScheduleSpec, tf *taskFlags, task api.SubmitRequest) error {
	params, err := tf.typedParams(ctx, c, task)
	if spec.Task != nil {
		spec.Task.Parameters = params
	} else {
		spec.Batch.Parameters = params
	}
	return err
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
			return taskview.ScheduleTable(cmd.OutOrStdout(), ss)
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
			return taskview.ScheduleText(cmd.OutOrStdout(), s)
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
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "schedule %s %s; %s\n", s.Name, done, taskview.NextText(s))
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
