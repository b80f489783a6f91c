package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/internal/taskview"
	"github.com/spf13/cobra"
)

// exitBatchFailed is the exit code of a followed batch that failed: that of a
// failed task without an exit code of its own.
const exitBatchFailed = 1

// batchExitCodes is the help text of the exit codes of following a batch.
const batchExitCodes = `Exit codes of following a batch: 0 the batch succeeded (every agent's task
succeeded); 1 it failed: a task did not succeed, or an agent got no task (offline,
unknown, unsupported, or skipped for --stop-on-failure); 1 also when the CLI itself
failed; 2 a usage error; 65 a parameter the work type's schema refuses: no batch was
made; 75 the wait stopped (Ctrl-C, or the orchestrator stayed unreachable) before the
batch finished, and the batch goes on.`

// followBatch shows batch id as it changes until it ends, and each agent's
// output on stdout, as it comes by lines prefixed with the agent's id, or with
// group agent by agent at the end; then it prints a table of the agents and a
// summary, and returns the exit code of the batch's state. With jsonOut it
// prints the batch as JSON lines, and no output.
func followBatch(cmd *cobra.Command, c *client.Client, id string, jsonOut, group bool) error {
	// Output lines between the redrawn lines of the live view would break it.
	view := taskview.NewBatchView(jsonOut, group, cmd.OutOrStdout(), cmd.ErrOrStderr())
	see := view.Batch
	var output *taskview.BatchOutput
	if !jsonOut {
		output = taskview.NewBatchOutput(cmd.Context(), c, cmd.OutOrStdout(), group)
		see = func(b *api.Batch) {
			view.Batch(b)
			output.Batch(b)
		}
	}
	b, err := taskview.WatchBatch(cmd.Context(), c, id, see)
	err = noBatch(err, id)
	view.Close()
	if err != nil && output != nil {
		output.Stop()
	}
	var lost *taskview.LostError
	switch {
	case errors.Is(err, context.Canceled):
		return exitCode(exitNotFinished, fmt.Errorf("stopped watching; the batch goes on: chiffon batch %s --wait", id))
	case errors.As(err, &lost):
		return exitCode(exitNotFinished, fmt.Errorf("%v; the batch goes on: chiffon batch %s --wait", err, id))
	case err != nil:
		return err
	}
	if !jsonOut {
		output.Finish(b, cmd.ErrOrStderr())
		fmt.Fprintln(cmd.ErrOrStderr(), taskview.BatchSummary(b))
	}
	if code := batchExitCode(b); code != 0 {
		return exitCode(code, nil)
	}
	return nil
}

// batchExitCode maps a batch to the process exit code.
func batchExitCode(b *api.Batch) int {
	switch {
	case b.FinishedAt == nil:
		return exitNotFinished
	case b.State == api.BatchSucceeded:
		return 0
	}
	return exitBatchFailed
}
