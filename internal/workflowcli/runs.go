package workflowcli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/spf13/cobra"
)

// runCmd is `chiffon workflow run NAME`.
func (cfg Config) runCmd() *cobra.Command {
	var (
		params []string
		wait   bool
	)
	cmd := cfg.command(&cobra.Command{
		Use:   "run NAME [--param k=v]... [--wait] | run ID [--wait]",
		Short: "Start a run of a workflow and print its id; --wait follows it to its end",
		Long: `Starts a run of workflow NAME and prints its id. --param k=v gives a parameter the
workflow declares, typed by its declared type (integer, number, boolean, object or
string); k:=JSON gives one as JSON. A parameter the workflow refuses, or a required
one left out, exits 65 and starts nothing.

With an ID instead of a NAME (no workflow has that name, a run has that id), it
shows that run, or follows it with --wait.

--wait follows the run through its event stream, printing a line as each step
changes: "15:04:05 step NAME running", "succeeded", "failed: why", "skipped: why",
and a gate's "running: awaiting approval". It exits as the run ended: 0 succeeded;
a failed run as its first failed step's failed task would exit submit --wait (its
exit code, else 1); 130 cancelled; 75 when the wait stopped before the end (Ctrl-C,
or no orchestrator answered for 2 minutes), and the run goes on. With --json it
prints the run (with --wait, the ended run).`,
		Args: cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, args []string, c *client.Client, jsonOut bool) error {
		name := args[0]
		wf, err := c.Workflow(cmd.Context(), name)
		if status(err) == http.StatusNotFound {
			return cfg.existingRun(cmd, c, name, params, wait, jsonOut, err)
		}
		if err != nil {
			return err
		}
		given, err := cfg.typedParams(&wf.WorkflowSpec, params)
		if err != nil {
			return err
		}
		run, err := c.StartRun(cmd.Context(), name, api.WorkflowRunRequest{Params: given})
		if err != nil {
			return cfg.startRefused(err, wf)
		}
		switch {
		case wait:
			fmt.Fprintf(cmd.ErrOrStderr(), "run %s of workflow %s started\n", run.ID, name)
			return cfg.follow(cmd, c, run, jsonOut)
		case jsonOut:
			return cfg.PrintJSON(cmd.OutOrStdout(), run)
		}
		_, err = fmt.Fprintln(cmd.OutOrStdout(), run.ID)
		return err
	})
	cmd.Flags().StringArrayVar(&params, "param", nil, "a parameter of the run: k=v (typed by the workflow's declared type) or k:=JSON; repeatable")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the run to its end, a line per step change, and exit as it ended")
	return cmd
}

// startRefused says why the orchestrator refused a run of wf.
func (cfg Config) startRefused(err error, wf *api.Workflow) error {
	if status(err) == http.StatusConflict {
		return cfg.Explain(fmt.Sprintf("workflow %s runs as many runs as its max_runs (%d) allows: wait for one to end, or cancel one (HTTP 409)",
			wf.Name, max(wf.MaxRuns, 1)), err)
	}
	return cfg.explainParams(err)
}

// existingRun shows or follows run id, typed where a workflow's name was
// looked for in vain (notFound).
func (cfg Config) existingRun(cmd *cobra.Command, c *client.Client, id string, params []string, wait, jsonOut bool, notFound error) error {
	whole, _, ok := task.ParseIDRef(id)
	if !ok || whole == "" {
		return cfg.noWorkflow(notFound, id)
	}
	run, err := c.Run(cmd.Context(), whole)
	if status(err) == http.StatusNotFound {
		return cfg.Explain(fmt.Sprintf("no workflow named %q, and no run of that id (HTTP 404)", id), err)
	}
	if err != nil {
		return err
	}
	switch {
	case len(params) > 0:
		return cfg.Usage(fmt.Sprintf("--param starts a run of a workflow; %s is a run already", id))
	case wait:
		return cfg.follow(cmd, c, run, jsonOut)
	case jsonOut:
		return cfg.PrintJSON(cmd.OutOrStdout(), run)
	}
	return printRun(cmd.OutOrStdout(), run)
}

// printRun shows one run: what it is, then a line per step.
func printRun(w io.Writer, r *api.WorkflowRun) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Run", r.ID)
	row("Workflow", r.Workflow)
	state := string(r.State)
	if r.Error != "" {
		state += ": " + r.Error
	}
	row("State", state)
	if len(r.Params) > 0 {
		row("Params", compact(r.Params))
	}
	if r.Schedule != "" {
		row("Schedule", r.Schedule)
	}
	row("Created", r.CreatedAt.Local().Format(time.DateTime)+" by "+dash(r.CreatedBy))
	if r.FinishedAt != nil {
		row("Finished", r.FinishedAt.Local().Format(time.DateTime))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nSTEP\tSTATE\tMADE\tDETAIL")
	for i := range r.Steps {
		s := &r.Steps[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, s.State, made(s), dash(stepDetail(r, s)))
	}
	return tw.Flush()
}

// made says what a step made: its task, its batch, or a gate.
func made(s *api.StepRun) string {
	switch {
	case s.TaskID != "":
		return "task " + s.TaskID
	case s.BatchID != "":
		return "batch " + s.BatchID
	case s.Approval != nil:
		return "gate (" + s.Approval.State + ")"
	}
	return "-"
}

// runsCmd is `chiffon workflow runs [NAME]`.
func (cfg Config) runsCmd() *cobra.Command {
	var limit int
	cmd := cfg.command(&cobra.Command{
		Use:   "runs [NAME]",
		Short: "List workflow runs, newest first, of one workflow with NAME",
		Args:  cobra.MaximumNArgs(1),
	}, func(cmd *cobra.Command, args []string, c *client.Client, jsonOut bool) error {
		name := ""
		if len(args) == 1 {
			name = args[0]
		}
		runs, err := c.Runs(cmd.Context(), name, limit)
		if err != nil {
			return err
		}
		if jsonOut {
			return cfg.PrintJSON(cmd.OutOrStdout(), runs)
		}
		return printRuns(cmd.OutOrStdout(), runs)
	})
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many runs, 1 to 1000 (default the orchestrator's, 100)")
	return cmd
}

// printRuns is the table of `workflow runs`.
func printRuns(w io.Writer, runs []*api.WorkflowRun) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tWORKFLOW\tSTATE\tSTEPS\tCREATED")
	for _, r := range runs {
		done := 0
		for _, s := range r.Steps {
			if s.State.Final() {
				done++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\n", r.ID, r.Workflow, r.State, done, len(r.Steps),
			r.CreatedAt.Local().Format(time.DateTime))
	}
	return tw.Flush()
}

// cancelCmd is `chiffon workflow cancel ID`.
func (cfg Config) cancelCmd() *cobra.Command {
	return cfg.command(&cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a workflow run: its running steps are cancelled, the others skipped",
		Long: `Asks run ID to stop: its runner cancels the running steps' tasks and batches, skips
the steps that did not start, and the run ends cancelled. A run that ended is refused
(HTTP 409). With --json it prints the run as the cancel left it.`,
		Args: cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, args []string, c *client.Client, jsonOut bool) error {
		run, err := c.CancelRun(cmd.Context(), args[0])
		if status(err) == http.StatusConflict {
			return cfg.Explain(fmt.Sprintf("run %s has already ended (HTTP 409)", args[0]), err)
		}
		if err != nil {
			return cfg.noRun(err, args[0])
		}
		if jsonOut {
			return cfg.PrintJSON(cmd.OutOrStdout(), run)
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "run %s: cancel asked; it ends once its running steps are cancelled\n", run.ID)
		return err
	})
}

// decideCmd is `chiffon workflow approve RUN STEP`, or with approve false
// `workflow reject RUN STEP`.
func (cfg Config) decideCmd(approve bool) *cobra.Command {
	var note string
	use, short, done := "reject RUN STEP [--note TEXT]", "Reject a gate step awaiting approval: it fails", "rejected"
	if approve {
		use, short, done = "approve RUN STEP [--note TEXT]", "Approve a gate step awaiting approval: it succeeds", "approved"
	}
	cmd := cfg.command(&cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `, and the steps that need it
start or are skipped as their needs say. The run records who decided, the note and
the time. A step that is no gate awaiting approval is refused (HTTP 409).`,
		Args: cobra.ExactArgs(2),
	}, func(cmd *cobra.Command, args []string, c *client.Client, jsonOut bool) error {
		id, step := args[0], args[1]
		run, err := c.DecideStep(cmd.Context(), id, step, approve, note)
		var ae *client.APIError
		switch {
		case errors.As(err, &ae) && ae.Status == http.StatusConflict:
			return cfg.Explain(fmt.Sprintf("step %s of run %s is not a gate awaiting approval (HTTP 409)", step, id), err)
		case errors.As(err, &ae) && ae.Status == http.StatusBadRequest && ae.Field == "step":
			return cfg.Explain(fmt.Sprintf("run %s has no step %q (HTTP 400)", id, step), err)
		case err != nil:
			return cfg.noRun(err, id)
		case jsonOut:
			return cfg.PrintJSON(cmd.OutOrStdout(), run)
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "step %s of run %s %s\n", step, id, done)
		return err
	})
	cmd.Flags().StringVar(&note, "note", "", "why, kept with the decision (at most 1 KiB)")
	return cmd
}
