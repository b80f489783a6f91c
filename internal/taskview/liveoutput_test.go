package taskview

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// outputEvent is a status event carrying data at off of the whole output.
func outputEvent(off int64, data string) *task.Event {
	return &task.Event{Type: task.EventStatus, State: task.StateRunning, OutputOffset: &off,
		Status: &envelope.WorkStatus{Status: envelope.StatusRunning, Step: envelope.Step{Output: data}}}
}

// TestLiveOutputPrintsEachByteOnceInOrder: pieces repeated by a resumed stream, or
// arriving past a gap, still make the output exactly, and only whole lines are
// handed on while the task runs.
func TestLiveOutputPrintsEachByteOnceInOrder(t *testing.T) {
	type piece struct {
		off  int64
		data string
	}
	tests := []struct {
		name   string
		pieces []piece
		want   string
		lines  []string // what each event hands on
	}{
		{"in order", []piece{{0, "a\nb"}, {3, "c\n"}}, "a\nbc\n", []string{"a\n", "bc\n"}},
		{"a resumed stream repeats bytes", []piece{{0, "one\n"}, {0, "one\n"}, {2, "e\ntwo\n"}}, "one\ntwo\n",
			[]string{"one\n", "", "two\n"}},
		{"a piece past a gap waits for it", []piece{{0, "1\n"}, {4, "3\n"}, {2, "2\n"}}, "1\n2\n3\n",
			[]string{"1\n", "", "2\n3\n"}},
		{"no trailing newline", []piece{{0, "x\ny"}}, "x\ny", []string{"x\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o LiveOutput
			var got bytes.Buffer
			for i, p := range tt.pieces {
				b := o.Event(outputEvent(p.off, p.data))
				if string(b) != tt.lines[i] {
					t.Errorf("event %d handed on %q, want %q", i, b, tt.lines[i])
				}
				got.Write(b)
			}
			done := &task.Task{OutputComplete: true, OutputBytes: int64(len(tt.want))}
			rest, err := o.Rest(context.Background(), nil, done)
			if err != nil {
				t.Fatal(err)
			}
			got.Write(rest)
			if got.String() != tt.want {
				t.Fatalf("output %q, want %q", got.String(), tt.want)
			}
		})
	}
}

// TestLiveOutputFetchesWhatTheEventsMissed: once the task ends, the bytes no event
// carried come from the output endpoint, after those printed and never twice.
func TestLiveOutputFetchesWhatTheEventsMissed(t *testing.T) {
	const whole = "first\nsecond\nthird"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/tasks/t1/output" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("X-Chiffon-Output-Complete", "true")
		_, _ = w.Write([]byte(whole))
	}))
	defer srv.Close()
	var o LiveOutput
	printed := o.Event(outputEvent(0, "first\nsec"))
	rest, err := o.Rest(context.Background(), &client.Client{BaseURL: srv.URL},
		&task.Task{ID: "t1", OutputComplete: true, OutputBytes: int64(len(whole))})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(printed) + string(rest); got != whole {
		t.Fatalf("printed %q then %q, want %q", printed, rest, whole)
	}
}

// runningAt is a status event of a running task at pct percent.
func runningAt(pct int) *task.Event {
	return &task.Event{Type: task.EventStatus, At: time.Now(), State: task.StateRunning,
		Status: &envelope.WorkStatus{Status: envelope.StatusRunning, ProgressPercent: pct}}
}

// TestBarPrintsOutputAboveItself: on a terminal that shows both the output and the
// bar, the bar's line is erased, the output printed from the line's start, and the
// bar drawn again below it; the output's bytes are untouched.
func TestBarPrintsOutputAboveItself(t *testing.T) {
	var term bytes.Buffer // the terminal, both stdout and stderr
	v := &barView{w: &term, out: outputLines{w: &term, shared: true}, columns: func() int { return 80 }}
	v.Event(runningAt(10))
	frame := strings.TrimPrefix(term.String(), "\r\033[K")
	term.Reset()
	v.Output([]byte("line 1\nline 2\n"))
	if want := "\r\033[Kline 1\nline 2\n\r\033[K" + frame; term.String() != want {
		t.Fatalf("output on the terminal:\n%q\nwant\n%q", term.String(), want)
	}
	term.Reset()
	v.Output([]byte("no newline"))
	v.Close()
	if want := "\r\033[Kno newline\n\r\033[K" + frame + "\n"; term.String() != want {
		t.Fatalf("an unfinished line, then the end:\n%q\nwant\n%q", term.String(), want)
	}
}

// TestBarLeavesOutputToAPipeAlone: with stdout a pipe and the bar on the terminal,
// the output goes to the pipe as it is and the bar is not erased for it.
func TestBarLeavesOutputToAPipeAlone(t *testing.T) {
	var term, pipe bytes.Buffer
	v := &barView{w: &term, out: outputLines{w: &pipe}, columns: func() int { return 80 }}
	v.Event(runningAt(10))
	drawn := term.String()
	v.Output([]byte("partial"))
	v.Close()
	if pipe.String() != "partial" {
		t.Fatalf("stdout got %q", pipe.String())
	}
	if term.String() != drawn+"\n" {
		t.Fatalf("the terminal got %q, want the bar and its line's end", term.String())
	}
}

// TestPlainLinesKeepOutputAndStateLinesApart: into one pipe (2>&1), a line of output
// left open is ended before the next state line and before the summary.
func TestPlainLinesKeepOutputAndStateLinesApart(t *testing.T) {
	var pipe bytes.Buffer
	v := &lineView{w: &pipe, out: outputLines{w: &pipe, shared: true}}
	v.Output([]byte("a\nno newline"))
	v.Event(runningAt(50))
	v.Output([]byte("tail"))
	v.Close()
	lines := strings.Split(pipe.String(), "\n")
	if len(lines) != 5 || lines[0] != "a" || lines[1] != "no newline" || !strings.Contains(lines[2], "running") ||
		lines[3] != "tail" || lines[4] != "" || strings.Contains(pipe.String(), "\033") {
		t.Fatalf("into one pipe: %q", pipe.String())
	}
}
