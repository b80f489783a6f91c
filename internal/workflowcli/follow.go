package workflowcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/internal/taskview"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/spf13/cobra"
)

// follow follows run to its end through its event stream (taskview.WatchRun:
// a broken stream opened again), printing a line as each step changes, or
// with jsonOut the ended run; and returns the exit of how it ended.
func (cfg Config) follow(cmd *cobra.Command, c *client.Client, run *api.WorkflowRun, jsonOut bool) error {
	lines := &stepLines{w: cmd.OutOrStdout(), seen: map[string]string{}}
	see := lines.see
	if jsonOut {
		see = func(*api.WorkflowRun) {}
	}
	see(run)
	end, err := taskview.WatchRun(cmd.Context(), c, run.ID, see)
	var lost *taskview.LostError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return cfg.Exit(cfg.Codes.NotFinished, fmt.Errorf("stopped watching; the run goes on: chiffon workflow run %s --wait", run.ID))
	case errors.As(err, &lost):
		return cfg.Exit(cfg.Codes.NotFinished, fmt.Errorf("%v; the run goes on: chiffon workflow run %s --wait", err, run.ID))
	case err != nil:
		return cfg.noRun(err, run.ID)
	case jsonOut:
		if err := cfg.PrintJSON(cmd.OutOrStdout(), end); err != nil {
			return err
		}
	default:
		lines.end(end)
	}
	return cfg.runExit(cmd.Context(), c, end)
}

// runExit is the exit of an ended run: nil when it succeeded; a cancelled
// one exits as a cancelled task; a failed one as its first failed step's
// failed task would (its exit code), else 1.
func (cfg Config) runExit(ctx context.Context, c *client.Client, r *api.WorkflowRun) error {
	switch r.State {
	case api.RunSucceeded:
		return nil
	case api.RunCancelled:
		return cfg.Exit(cfg.Codes.Cancelled, nil)
	}
	for _, s := range r.Steps {
		if s.State != api.StepFailed || s.TaskID == "" {
			continue
		}
		t, err := c.Get(ctx, s.TaskID)
		if err == nil && t.State == task.StateFailed {
			if code := cfg.TaskExitCode(t); code != 0 {
				return cfg.Exit(code, nil)
			}
		}
		break
	}
	return cfg.Exit(1, nil)
}

// stepLines prints a line each time a step of a run changes.
type stepLines struct {
	w io.Writer
	// seen is what was printed of each step: its state, and a gate's
	// approval.
	seen map[string]string
}

// see prints a line for each step of r that changed since the last look; a
// step still pending prints none.
func (p *stepLines) see(r *api.WorkflowRun) {
	for i := range r.Steps {
		s := &r.Steps[i]
		key := string(s.State)
		if s.Approval != nil {
			key += " " + s.Approval.State
		}
		if s.State == api.StepPending || p.seen[s.Name] == key {
			continue
		}
		p.seen[s.Name] = key
		line := stepTime(s).Local().Format(time.TimeOnly) + " step " + s.Name + " " + string(s.State)
		if d := stepDetail(r, s); d != "" {
			line += ": " + d
		}
		fmt.Fprintln(p.w, line)
	}
}

// end prints the run's end.
func (p *stepLines) end(r *api.WorkflowRun) {
	at := time.Now()
	if r.FinishedAt != nil {
		at = *r.FinishedAt
	}
	line := at.Local().Format(time.TimeOnly) + " run " + r.ID + " " + string(r.State)
	if r.Error != "" {
		line += ": " + r.Error
	}
	fmt.Fprintln(p.w, line)
}

// stepTime is when step s came to its state.
func stepTime(s *api.StepRun) time.Time {
	switch {
	case s.State.Final() && s.FinishedAt != nil:
		return *s.FinishedAt
	case s.Approval != nil && s.Approval.DecidedAt != nil:
		return *s.Approval.DecidedAt
	case s.StartedAt != nil:
		return *s.StartedAt
	}
	return time.Now()
}

// stepDetail says why a step failed or was skipped, or where its gate is.
func stepDetail(r *api.WorkflowRun, s *api.StepRun) string {
	switch {
	case s.State == api.StepFailed:
		return s.Error
	case s.State == api.StepSkipped:
		return s.SkipReason
	case s.State != api.StepRunning || s.Approval == nil:
		return ""
	case s.Approval.State == task.ApprovalWaiting:
		return fmt.Sprintf("awaiting approval (chiffon workflow approve %s %s)", r.ID, s.Name)
	}
	return s.Approval.State + " by " + dash(s.Approval.By)
}

// compact is v as one line of JSON.
func compact(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// dash stands for an empty cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
