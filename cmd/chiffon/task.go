package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chiffon-dev/chiffon/internal/taskview"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/spf13/cobra"
)

// newTaskCmd is `chiffon task ID`, one task (the list: tasks.go).
func newTaskCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "task ID",
		Short: "Show a task: state, agent, steps, result, last error, and its history (who did what, when)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			t, err := c.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if cf.jsonOut {
				return printJSON(cmd.OutOrStdout(), t)
			}
			// The work type's description, when the catalogue has it: best effort.
			var description string
			if list, _, err := fetchWorkTypes(cmd.Context(), c); err == nil {
				if wt := findWorkType(list, string(t.ToAgent), t.WorkType); wt != nil {
					description = wt.Description
				}
			}
			if err := printTask(cmd.OutOrStdout(), t, description); err != nil {
				return err
			}
			h, err := c.History(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printHistory(cmd.OutOrStdout(), h)
		},
	}
	cf.add(cmd)
	return cmd
}

// printTask shows a task; description is its work type's, or "".
func printTask(w io.Writer, t *task.Task, description string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("ID", t.ID)
	row("State", string(t.State))
	row("To", string(t.ToAgent))
	row("Work type", t.WorkType)
	if description != "" {
		descriptionRows(tw, "Description", description)
	}
	row("Agent", dash(t.AgentID))
	row("Request", t.RequestID)
	row("Trace", t.TraceID)
	if n := t.Hints.GPUNeed(); n > 0 {
		row("GPU memory", fmt.Sprintf("%d MiB needed on one GPU", n))
	}
	row("Attempts", fmt.Sprint(t.Attempts))
	row("Progress", fmt.Sprintf("%d%%", t.ProgressPercent))
	row("Created", t.CreatedAt.Local().Format(time.DateTime))
	if t.FinishedAt != nil {
		row("Finished", t.FinishedAt.Local().Format(time.DateTime))
	}
	if t.OutputCapped {
		row("Output", fmt.Sprintf("%d bytes, cut at the orchestrator's max_output_bytes: the rest was dropped", t.OutputBytes))
	} else {
		row("Output", fmt.Sprintf("%d bytes", t.OutputBytes))
	}
	if r := t.Result; r != nil {
		row("Result", fmt.Sprintf("%s, exit %d", r.Status, r.ExitCode))
		if u := r.ResourcesUsed; u != nil {
			row("Resources", fmt.Sprintf("%d s, cpu %d ms, vram %d MB", u.DurationSeconds, u.CPUTimeMS, u.GPUVRAMMB))
		}
		if len(r.GPUs) > 0 {
			row("GPU", taskview.GPUUses(r.GPUs))
		}
	}
	if e := t.Error; e != nil {
		row("Error", fmt.Sprintf("%d %s", e.Code, e.Message))
	}
	if a := t.Approval; a != nil {
		row("Approval", approvalText(a))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r := t.Result; r != nil && len(r.StructuredOutput) > 0 {
		var b bytes.Buffer
		if json.Indent(&b, r.StructuredOutput, "  ", "  ") != nil {
			b.Reset()
			b.Write(r.StructuredOutput)
		}
		fmt.Fprintf(w, "\nStructured output:\n  %s\n", b.Bytes())
	}
	if len(t.Retries) > 0 {
		// The attempts that failed before the last, apart from the task's own end.
		fmt.Fprintln(w, "\nFailed attempts:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tAGENT\tERROR\tWAITED")
		for _, r := range t.Retries {
			fmt.Fprintf(tw, "  %d\t%s\t%d %s\t%s\n", r.Attempt, dash(r.AgentID), r.Code, r.Message, time.Duration(r.WaitMS)*time.Millisecond)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(t.Steps) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nSteps:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tNAME\tSTATUS")
	for _, s := range t.Steps {
		fmt.Fprintf(tw, "  %d\t%s\t%s\n", s.Number, s.Name, s.Status)
	}
	return tw.Flush()
}

// printHistory shows a task's audit trail: each change, when, and by which API
// token when a request made it.
func printHistory(w io.Writer, evs []*task.Event) error {
	if len(evs) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nHistory:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, ev := range evs {
		what := ev.Message
		if ev.Error != nil {
			what = strings.TrimSpace(fmt.Sprintf("%s %d %s", what, ev.Error.Code, ev.Error.Message))
		}
		if ev.Type == task.EventResult && ev.Result != nil {
			what = fmt.Sprintf("result %s, exit %d", ev.Result.Status, ev.Result.ExitCode)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", ev.At.Local().Format(time.DateTime), ev.State, dash(ev.By), what)
	}
	return tw.Flush()
}
