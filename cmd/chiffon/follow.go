package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/spf13/cobra"
)

// followTask shows a task's events until it ends, then prints its output (or, with
// --json, the final task) and returns the task's exit code.
func followTask(cmd *cobra.Command, c *client.Client, id string, jsonOut bool) error {
	ctx := cmd.Context()
	view := newProgressView(jsonOut, cmd.OutOrStdout(), cmd.ErrOrStderr())
	err := c.Events(ctx, id, func(e *task.Event) error {
		if !jsonOut && e.Type == task.EventState && e.State == task.StateAwaitingApproval &&
			strings.HasPrefix(e.Message, "awaiting approval") {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s; waiting until an operator runs chiffon approve %s (or reject)\n", e.Message, id)
		}
		view.event(e)
		return nil
	})
	view.close()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return exitCode(exitNotFinished, fmt.Errorf("stopped watching; the task goes on: chiffon watch %s", id))
		}
		return err
	}
	task, err := c.Get(context.WithoutCancel(ctx), id)
	if err != nil {
		return err
	}
	if jsonOut {
		if err := printJSON(cmd.OutOrStdout(), task); err != nil {
			return err
		}
	} else {
		if _, err := c.Output(ctx, id, cmd.OutOrStdout()); err != nil {
			return err
		}
		fmt.Fprintln(cmd.ErrOrStderr(), summary(task))
	}
	if code := taskExitCode(task); code != 0 {
		return exitCode(code, nil)
	}
	return nil
}

// summary is the one line that ends a followed task.
func summary(t *task.Task) string {
	s := fmt.Sprintf("task %s %s", t.ID, t.State)
	if t.Result != nil {
		s += fmt.Sprintf(" (exit %d)", t.Result.ExitCode)
	}
	if t.Error != nil {
		s += fmt.Sprintf(": %d %s", t.Error.Code, t.Error.Message)
	}
	if t.FinishedAt != nil {
		s += " in " + t.FinishedAt.Sub(t.CreatedAt).Round(time.Millisecond).String()
	}
	return s
}
