package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/internal/taskview"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/spf13/cobra"
)

// followTask shows a task's events until it ends, and its output as it comes (or,
// with --json, the events and then the final task), and returns the task's exit
// code.
func followTask(cmd *cobra.Command, c *client.Client, id string, jsonOut bool) error {
	ctx := cmd.Context()
	view := taskview.NewView(jsonOut, cmd.OutOrStdout(), cmd.ErrOrStderr())
	var live taskview.LiveOutput
	followed := false // an event came: the orchestrator was reached
	err := c.Events(ctx, id, func(e *task.Event) error {
		followed = true
		if !jsonOut && e.Type == task.EventState && e.State == task.StateAwaitingApproval &&
			strings.HasPrefix(e.Message, "awaiting approval") {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s; waiting until an operator runs chiffon approve %s (or reject)\n", e.Message, id)
		}
		if !jsonOut {
			view.Output(live.Event(e))
		}
		view.Event(e)
		return nil
	})
	if err != nil {
		view.Output(live.TakeHeld())
		view.Close()
		if errors.Is(err, context.Canceled) {
			return exitCode(exitNotFinished, fmt.Errorf("stopped watching; the task goes on: chiffon watch %s", id))
		}
		if followed && lostTrack(err) {
			// The task's fate is unknown, not failed: say so with the code of a
			// wait that stopped, never with an exit code a task could have.
			return exitCode(exitNotFinished, fmt.Errorf("lost track of the task (%w); it may still run: chiffon watch %s", err, id))
		}
		return err
	}
	task, err := c.Get(context.WithoutCancel(ctx), id)
	if err != nil {
		view.Close()
		return err
	}
	if jsonOut {
		view.Close()
		if err := printJSON(cmd.OutOrStdout(), task); err != nil {
			return err
		}
	} else {
		rest, err := live.Rest(ctx, c, task)
		view.Output(rest)
		view.Close() // the summary starts a line of its own
		if err != nil {
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

// lostTrack reports whether err, the end of a follow, says the orchestrators
// could not be reached (or answered 5xx) until the follow gave up, rather than
// that the request was wrong.
func lostTrack(err error) bool {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Status >= 500
	}
	var md *client.MaybeDoneError
	var ne net.Error
	return errors.As(err, &md) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED)
}
