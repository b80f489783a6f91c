package main

import (
	"context"
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/spf13/cobra"
)

// newCancelCmd is `chiffon cancel ID`.
func newCancelCmd() *cobra.Command {
	var cf clientFlags
	var reason string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a task: its agent stops the work and the task ends cancelled",
		Long: `Cancels a task, then follows it for up to --wait until it ends and prints the state it
ends in (cancelled, or succeeded or failed when the work ended first). A task still
running after --wait is reported as still cancelling; chiffon watch ID follows it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			t, err := c.Cancel(cmd.Context(), args[0], reason)
			if err != nil {
				return err
			}
			t, ended, err := awaitEnd(cmd.Context(), c, t, wait)
			if err != nil {
				return err
			}
			if cf.jsonOut {
				return printJSON(cmd.OutOrStdout(), t)
			}
			if !ended {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "task %s still cancelling (%s after %s); chiffon watch %s follows it\n", t.ID, t.State, wait, t.ID)
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "task %s %s\n", t.ID, t.State)
			return err
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why: the agent ends the task's output with it, and the task's events show it")
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Second, "how long to wait for the task to end; 0 returns at once")
	return cmd
}

// awaitEnd follows t for up to wait until it ends, and returns it as it then is
// and whether it ended.
func awaitEnd(ctx context.Context, c *client.Client, t *task.Task, wait time.Duration) (*task.Task, bool, error) {
	if t.State.Final() || wait <= 0 {
		return t, t.State.Final(), nil
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err := c.Events(wctx, t.ID, func(*task.Event) error { return nil })
	if err != nil && wctx.Err() == nil {
		return t, false, err
	}
	// Past --wait, or interrupted: the task as it is now, asked even after a Ctrl-C.
	gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer gcancel()
	now, err := c.Get(gctx, t.ID)
	if err != nil {
		return t, false, err
	}
	return now, now.State.Final(), nil
}
