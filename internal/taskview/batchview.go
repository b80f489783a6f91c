package taskview

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"golang.org/x/sys/unix"
)

// BatchView shows a batch as it changes.
type BatchView interface {
	// Batch shows b, the batch as it is now.
	Batch(b *api.Batch)
	// Close ends the view.
	Close()
}

// NewBatchView picks the view: JSON lines with --json, one live line per agent
// on a terminal when redraw allows it, else a plain line per change of an
// agent's state.
func NewBatchView(jsonOut, redraw bool, stdout, stderr io.Writer) BatchView {
	switch {
	case jsonOut:
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		return batchJSONView{enc}
	case redraw && IsTerminal(stderr):
		f := stderr.(*os.File)
		return &batchLiveView{w: stderr, columns: func() int { return TerminalColumns(f) }, rows: func() int { return terminalRows(f) }}
	default:
		return &batchLineView{w: stderr, now: time.Now}
	}
}

type batchJSONView struct{ enc *json.Encoder }

func (v batchJSONView) Batch(b *api.Batch) { _ = v.enc.Encode(b) }
func (batchJSONView) Close()               {}

// batchLineView prints a line each time an agent's state changes.
type batchLineView struct {
	w      io.Writer
	now    func() time.Time
	states map[string]string
}

func (v *batchLineView) Batch(b *api.Batch) {
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

func (*batchLineView) Close() {}

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

func (v *batchLiveView) Batch(b *api.Batch) {
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
		lines[i] = FitColumns(lines[i], cols-1)
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
	lines := []string{fmt.Sprintf("batch %s: %s", b.State, CountsText(b.Counts))}
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
		return append(lines, fmt.Sprintf("… %d more: %s", len(targets)-keep, CountsText(rest)))
	}
	for _, t := range targets {
		lines = append(lines, targetLine(t, width))
	}
	return lines
}

func (*batchLiveView) Close() {}

// targetLine is one agent of a batch: its id, state, progress and task.
func targetLine(t api.BatchTarget, width int) string {
	return fmt.Sprintf("%-*s  %-11s %3d%%  %s", width, t.AgentID, t.State, t.ProgressPercent, cmp.Or(t.TaskID, "-"))
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

// targetOrder is the order the states of a batch's agents are counted in:
// what goes on, what went well, what did not, what got no task.
var targetOrder = []string{
	string(task.StateRunning), string(task.StateDispatched), string(task.StatePending),
	api.TargetWaiting, api.TargetRegistering, string(task.StateSucceeded), string(task.StateFailed),
	string(task.StateError), string(task.StateCancelled), api.TargetSkipped,
	api.TargetOffline, api.TargetUnknown, api.TargetUnsupported,
}

// CountsText is counts by state, such as "3 succeeded, 1 offline".
func CountsText(counts map[string]int) string {
	var parts []string
	add := func(state string) {
		if n := counts[state]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, state))
		}
	}
	for _, s := range targetOrder {
		add(s)
	}
	for _, s := range slices.Sorted(maps.Keys(counts)) {
		if !slices.Contains(targetOrder, s) {
			add(s)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
