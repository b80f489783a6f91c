package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

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

// How a broken batch stream is followed again: after a growing wait, up to
// batchRetryMax; and given up after batchGiveUp without an answer.
var (
	batchRetryMax = 5 * time.Second
	batchGiveUp   = 2 * time.Minute
)

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
	b, err := watchBatch(cmd.Context(), c, id, see)
	view.Close()
	if err != nil && output != nil {
		output.Stop()
	}
	var lost *lostError
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
		fmt.Fprintln(cmd.ErrOrStderr(), batchSummary(b))
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

// batchSummary is the line that ends a followed batch.
func batchSummary(b *api.Batch) string {
	s := fmt.Sprintf("batch %s %s: %s", b.ID, b.State, taskview.CountsText(b.Counts))
	if b.FinishedAt != nil {
		s += " in " + b.FinishedAt.Sub(b.CreatedAt).Round(time.Millisecond).String()
	}
	return s
}

// lostError is a batch stream that could not be had again for batchGiveUp.
type lostError struct {
	since time.Duration
	err   error
}

func (e *lostError) Error() string {
	return fmt.Sprintf("no answer from the orchestrator for %s: %v", e.since.Round(time.Second), e.err)
}
func (e *lostError) Unwrap() error { return e.err }

// watchBatch hands fn batch id each time it changes, from its event stream,
// until the batch has finished (FinishedAt set), and returns it. A stream that
// breaks or ends early (an orchestrator restarting, a proxy cutting it) is
// opened again after a growing wait, and the batch read with GET meanwhile,
// so that an end missed while away is found.
func watchBatch(ctx context.Context, c *client.Client, id string, fn func(*api.Batch)) (*api.Batch, error) {
	var (
		last     *api.Batch
		lastJSON []byte
		changed  bool
		answered = time.Now()
		wait     time.Duration
	)
	see := func(b *api.Batch) {
		answered = time.Now()
		data, _ := json.Marshal(b)
		if string(data) != string(lastJSON) {
			lastJSON, last, changed = data, b, true
			fn(b)
		}
	}
	for {
		changed = false
		// The stream ends after the batch's end; the end seen, it is not waited for.
		sctx, stop := context.WithCancel(ctx)
		err := noBatch(c.BatchEvents(sctx, id, func(b *api.Batch) error {
			see(b)
			if b.FinishedAt != nil {
				stop()
			}
			return nil
		}), id)
		stop()
		if last != nil && last.FinishedAt != nil {
			return last, nil
		}
		if ctx.Err() != nil {
			return last, ctx.Err()
		}
		if err != nil && !transient(err) {
			return last, err
		}
		if changed {
			wait = 0
		} else {
			wait = min(max(2*wait, 50*time.Millisecond), batchRetryMax)
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(wait):
		}
		b, gerr := c.Batch(ctx, id)
		gerr = noBatch(gerr, id)
		switch {
		case gerr == nil:
			see(b)
			if b.FinishedAt != nil {
				return b, nil
			}
		case ctx.Err() != nil:
			return last, ctx.Err()
		case !transient(gerr):
			return last, gerr
		default:
			err = gerr
		}
		if err != nil && time.Since(answered) > batchGiveUp {
			return last, &lostError{since: time.Since(answered), err: err}
		}
	}
}

// transient reports whether err may pass: a connection refused or cut, or a
// server error, not an answer that the request is wrong.
func transient(err error) bool {
	var ae *client.APIError
	switch {
	case errors.As(err, &ae):
		return ae.Status >= 500 || ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusRequestTimeout
	case errors.Is(err, client.ErrBadEvent):
		return false
	}
	return true
}
