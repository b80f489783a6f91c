package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
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
	view := newBatchView(jsonOut, group, cmd.OutOrStdout(), cmd.ErrOrStderr())
	see := view.batch
	var output *batchOutput
	if !jsonOut {
		output = newBatchOutput(cmd.Context(), c, cmd.OutOrStdout(), group)
		see = func(b *api.Batch) {
			view.batch(b)
			output.batch(b)
		}
	}
	b, err := watchBatch(cmd.Context(), c, id, see)
	view.close()
	if err != nil && output != nil {
		output.stop()
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
		output.finish(b, cmd.ErrOrStderr())
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
	s := fmt.Sprintf("batch %s %s: %s", b.ID, b.State, countsText(b.Counts))
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

// batchView shows a batch as it changes.
type batchView interface {
	batch(b *api.Batch)
	// close ends the view.
	close()
}

// newBatchView picks the view: JSON lines with --json, one live line per agent
// on a terminal when redraw allows it, else a plain line per change of an
// agent's state.
func newBatchView(jsonOut, redraw bool, stdout, stderr io.Writer) batchView {
	switch {
	case jsonOut:
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		return batchJSONView{enc}
	case redraw && isTerminal(stderr):
		f := stderr.(*os.File)
		return &batchLiveView{w: stderr, columns: func() int { return terminalColumns(f) }, rows: func() int { return terminalRows(f) }}
	default:
		return &batchLineView{w: stderr, now: time.Now}
	}
}

type batchJSONView struct{ enc *json.Encoder }

func (v batchJSONView) batch(b *api.Batch) { _ = v.enc.Encode(b) }
func (batchJSONView) close()               {}

// batchLineView prints a line each time an agent's state changes.
type batchLineView struct {
	w      io.Writer
	now    func() time.Time
	states map[string]string
}

func (v *batchLineView) batch(b *api.Batch) {
	if v.states == nil {
		v.states = map[string]string{}
	}
	width := agentWidth(b.Targets)
	for _, t := range b.Targets {
		if v.states[t.AgentID] == t.State {
			continue
		}
		v.states[t.AgentID] = t.State
		fmt.Fprintf(v.w, "%s %s\n", v.now().Local().Format(time.TimeOnly), targetLine(t, width))
	}
}

func (*batchLineView) close() {}

// batchLiveView redraws one line per agent in place, under a line of the
// batch's state. Each line is fitted to the terminal's width and the lines to
// its height, so that moving the cursor back up finds the first of them.
type batchLiveView struct {
	w io.Writer
	// columns and rows return the terminal's size, asked at each frame; nil or a
	// result below 1 means 80 columns and no bound on the rows.
	columns, rows func() int
	drawn         []string
}

func (v *batchLiveView) batch(b *api.Batch) {
	cols, rows := 0, 0
	if v.columns != nil {
		cols = v.columns()
	}
	if v.rows != nil {
		rows = v.rows()
	}
	if cols < 1 {
		cols = 80
	}
	lines := v.frame(b, rows)
	for i := range lines {
		lines[i] = fitColumns(lines[i], cols-1)
	}
	if strings.Join(lines, "\n") == strings.Join(v.drawn, "\n") {
		return
	}
	var sb strings.Builder
	if len(v.drawn) > 0 {
		fmt.Fprintf(&sb, "\033[%dF", len(v.drawn)) // to the start of the first line drawn
	}
	for _, l := range lines {
		sb.WriteString("\r\033[K" + l + "\n")
	}
	sb.WriteString("\033[J") // what a taller frame before left below
	fmt.Fprint(v.w, sb.String())
	v.drawn = lines
}

// frame is the lines of b on a terminal rows high (0: unknown): the batch's
// state and counts, then one line per agent, the last ones summed up in one
// line when they do not fit.
func (v *batchLiveView) frame(b *api.Batch, rows int) []string {
	lines := []string{fmt.Sprintf("batch %s: %s", b.State, countsText(b.Counts))}
	width := agentWidth(b.Targets)
	targets := b.Targets
	if room := rows - 2; rows > 0 && len(targets) > room {
		keep := max(room-1, 0)
		rest := map[string]int{}
		for _, t := range targets[keep:] {
			rest[t.State]++
		}
		for _, t := range targets[:keep] {
			lines = append(lines, targetLine(t, width))
		}
		return append(lines, fmt.Sprintf("… %d more: %s", len(targets)-keep, countsText(rest)))
	}
	for _, t := range targets {
		lines = append(lines, targetLine(t, width))
	}
	return lines
}

func (*batchLiveView) close() {}

// targetLine is one agent of a batch: its id, state, progress and task.
func targetLine(t api.BatchTarget, width int) string {
	return fmt.Sprintf("%-*s  %-11s %3d%%  %s", width, t.AgentID, t.State, t.ProgressPercent, dash(t.TaskID))
}

// agentWidth is the width of the longest agent id of targets.
func agentWidth(targets []api.BatchTarget) int {
	w := 0
	for _, t := range targets {
		w = max(w, len(t.AgentID))
	}
	return w
}

// terminalRows is the height of the terminal f is, else $LINES, else 0.
func terminalRows(f *os.File) int {
	if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Row > 0 {
		return int(ws.Row)
	}
	n := 0
	_, _ = fmt.Sscan(os.Getenv("LINES"), &n)
	return n
}
