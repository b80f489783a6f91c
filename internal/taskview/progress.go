// Package taskview is how the CLI shows a task or a batch while it runs: the
// progress views (a redrawn bar on a terminal, plain lines into a pipe, JSON
// lines), the task's output put together from its events by offset
// (LiveOutput), a batch's views and each agent's output prefixed with its id
// (BatchView, BatchOutput). It reads the API through package client and
// writes to the writers it is given.
package taskview

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"golang.org/x/sys/unix"
)

// View shows a task's events as they arrive, and its output beside them.
type View interface {
	// Event shows one of the task's events.
	Event(e *task.Event)
	// Output prints a piece of the task's output (to stdout), around the view's
	// own lines.
	Output(b []byte)
	// Close ends the view, such as by finishing the bar's line.
	Close()
}

// NewView picks the view: JSON lines with --json, a redrawn bar on a terminal,
// plain lines into a pipe or file.
func NewView(jsonOut bool, stdout, stderr io.Writer) View {
	out := outputLines{w: stdout, shared: sameFile(stdout, stderr)}
	switch {
	case jsonOut:
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		return jsonView{enc}
	case IsTerminal(stderr):
		f := stderr.(*os.File)
		return &barView{w: stderr, out: out, columns: func() int { return TerminalColumns(f) }}
	default:
		return &lineView{w: stderr, out: out}
	}
}

// sameFile reports whether a and b are one open file, such as the same terminal, or
// one pipe for stdout and stderr (2>&1): the task's output and the view's lines then
// share its lines.
func sameFile(a, b io.Writer) bool {
	fa, ok := a.(*os.File)
	fb, ok2 := b.(*os.File)
	if !ok || !ok2 {
		return false
	}
	sa, err := fa.Stat()
	sb, err2 := fb.Stat()
	return err == nil && err2 == nil && os.SameFile(sa, sb)
}

// outputLines is where a view prints the task's output, and whether the last
// byte printed left a line open there.
type outputLines struct {
	w io.Writer
	// shared says the view's own lines go to the same file as the output.
	shared  bool
	midLine bool
}

func (o *outputLines) write(b []byte) {
	if len(b) == 0 {
		return
	}
	_, _ = o.w.Write(b)
	o.midLine = b[len(b)-1] != '\n'
}

// endLine ends, on the view's writer w, a line of output left open on the same
// file, so that the view's next line starts a line of its own.
func (o *outputLines) endLine(w io.Writer) {
	if o.shared && o.midLine {
		fmt.Fprintln(w)
		o.midLine = false
	}
}

func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

type jsonView struct{ enc *json.Encoder }

func (v jsonView) Event(e *task.Event) { _ = v.enc.Encode(e) }

// output prints nothing: the events carry the output.
func (jsonView) Output([]byte) {}
func (jsonView) Close()        {}

// State is what the bar and the plain lines show.
type State struct {
	State   task.State
	Percent int
	Step    string
}

func (p *State) Apply(e *task.Event) (changed bool) {
	next := *p
	if e.State != "" {
		next.State = e.State
	}
	if s := e.Status; s != nil {
		next.Percent = s.ProgressPercent
		if s.Step.Name != "" {
			next.Step = fmt.Sprintf("step %d: %s", s.Step.Number, s.Step.Name)
		}
	}
	if e.Result != nil && e.Result.Status == envelope.ResultSuccess {
		next.Percent = 100 // a failed or cancelled task stays where it stopped
	}
	changed = next != *p
	*p = next
	return changed
}

// lineView prints one line per change of state, percent or step, and the output
// as it comes.
type lineView struct {
	w   io.Writer
	out outputLines
	st  State
}

func (v *lineView) Event(e *task.Event) {
	if e.Type == task.EventRetry && e.Error != nil {
		v.out.endLine(v.w)
		fmt.Fprintf(v.w, "%s retry after %d: %s\n", e.At.Local().Format(time.TimeOnly), e.Error.Code, e.Error.Message)
	}
	if !v.st.Apply(e) {
		return
	}
	v.out.endLine(v.w)
	fmt.Fprintf(v.w, "%s %-10s %3d%%  %s\n", e.At.Local().Format(time.TimeOnly), v.st.State, v.st.Percent, v.st.Step)
}

func (v *lineView) Output(b []byte) { v.out.write(b) }

func (v *lineView) Close() { v.out.endLine(v.w) }

// barView redraws one line: a bar, the percent, the state and the step name. Each
// frame is fitted to the terminal's width: a line that wrapped would leave its first
// rows behind, as "\r" and erase-line redraw only the row the cursor is on.
type barView struct {
	w   io.Writer
	out outputLines
	// drawn says a frame is on the cursor's line of w.
	drawn bool
	// columns returns the terminal's width, asked at each frame so that a resized
	// terminal is followed; nil or a result below 1 means 80.
	columns func() int
	st      State
}

const barWidth = 30

func (v *barView) Event(e *task.Event) {
	if v.st.Apply(e) {
		v.draw()
	}
}

// draw draws the frame on a line of its own.
func (v *barView) draw() {
	v.out.endLine(v.w)
	cols := 0
	if v.columns != nil {
		cols = v.columns()
	}
	if cols < 1 {
		cols = 80
	}
	fmt.Fprint(v.w, "\r\033[K"+v.frame(cols))
	v.drawn = true
}

// output prints b above the bar: on the same terminal the bar's line is erased,
// b printed from its start, and the bar drawn again below it.
func (v *barView) Output(b []byte) {
	if len(b) == 0 {
		return
	}
	redraw := v.drawn && v.out.shared
	if redraw {
		fmt.Fprint(v.w, "\r\033[K")
	}
	v.out.write(b)
	if redraw {
		v.draw()
	}
}

// frame is the line drawn on a terminal cols wide. It leaves the last column free
// (writing there wraps on some terminals), shortens the bar, then drops it, to keep
// room for the step, and cuts what still does not fit.
func (v *barView) frame(cols int) string {
	avail := cols - 1
	head := fmt.Sprintf("%3d%%  %-9s ", v.st.Percent, v.st.State)
	text := head + v.st.Step
	const minStep, minBar = 12, 10
	if bar := min(barWidth, avail-len(head)-minStep-1); bar >= minBar {
		filled := v.st.Percent * bar / 100
		text = strings.Repeat("█", filled) + strings.Repeat("░", bar-filled) + " " + text
	}
	return FitColumns(text, avail)
}

// FitColumns makes s one line of at most n cells: control characters become spaces
// and a longer s is cut with "…". A rune counts as one cell.
func FitColumns(s string, n int) string {
	s = Printable(s)
	if n < 1 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// Printable is s with its control characters, newlines too, as spaces: text
// from an agent or a script cannot move the cursor or redraw the terminal.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// TerminalColumns is the width of the terminal f is, else $COLUMNS, else 0.
func TerminalColumns(f *os.File) int {
	if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
		return int(ws.Col)
	}
	n, _ := strconv.Atoi(os.Getenv("COLUMNS"))
	return n
}

// close ends the bar's line, or a line of output left open on the terminal.
func (v *barView) Close() {
	if v.drawn || v.out.shared && v.out.midLine {
		fmt.Fprintln(v.w)
	}
	v.drawn, v.out.midLine = false, false
}
