package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator"
)

// progressView shows a task's events as they arrive.
type progressView interface {
	event(e *orchestrator.Event)
	// close ends the view, such as by finishing the bar's line.
	close()
}

// newProgressView picks the view: JSON lines with --json, a redrawn bar on a terminal,
// plain lines into a pipe or file.
func newProgressView(jsonOut bool, stdout, stderr io.Writer) progressView {
	switch {
	case jsonOut:
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		return jsonView{enc}
	case isTerminal(stderr):
		return &barView{w: stderr}
	default:
		return &lineView{w: stderr}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

type jsonView struct{ enc *json.Encoder }

func (v jsonView) event(e *orchestrator.Event) { _ = v.enc.Encode(e) }
func (jsonView) close()                        {}

// progressState is what the bar and the plain lines show.
type progressState struct {
	state   orchestrator.State
	percent int
	step    string
}

func (p *progressState) apply(e *orchestrator.Event) (changed bool) {
	next := *p
	if e.State != "" {
		next.state = e.State
	}
	if s := e.Status; s != nil {
		next.percent = s.ProgressPercent
		if s.Step.Name != "" {
			next.step = fmt.Sprintf("step %d: %s", s.Step.Number, s.Step.Name)
		}
	}
	if e.Result != nil {
		next.percent = 100
	}
	changed = next != *p
	*p = next
	return changed
}

// lineView prints one line per change of state, percent or step.
type lineView struct {
	w  io.Writer
	st progressState
}

func (v *lineView) event(e *orchestrator.Event) {
	if e.Type == orchestrator.EventRetry && e.Error != nil {
		fmt.Fprintf(v.w, "%s retry after %d: %s\n", e.At.Local().Format(time.TimeOnly), e.Error.Code, e.Error.Message)
	}
	if !v.st.apply(e) {
		return
	}
	fmt.Fprintf(v.w, "%s %-10s %3d%%  %s\n", e.At.Local().Format(time.TimeOnly), v.st.state, v.st.percent, v.st.step)
}

func (*lineView) close() {}

// barView redraws one line: a bar, the percent, the state and the step name.
type barView struct {
	w  io.Writer
	st progressState
}

const barWidth = 30

func (v *barView) event(e *orchestrator.Event) {
	if !v.st.apply(e) {
		return
	}
	filled := v.st.percent * barWidth / 100
	bar := strings.Repeat("█", filled) + strings.Repeat("░", barWidth-filled)
	step := v.st.step
	if len(step) > 48 {
		step = step[:47] + "…"
	}
	fmt.Fprintf(v.w, "\r\033[K%s %3d%%  %-9s %s", bar, v.st.percent, v.st.state, step)
}

func (v *barView) close() { fmt.Fprintln(v.w) }
