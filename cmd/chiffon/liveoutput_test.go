package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
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
			var o liveOutput
			var got bytes.Buffer
			for i, p := range tt.pieces {
				b := o.event(outputEvent(p.off, p.data))
				if string(b) != tt.lines[i] {
					t.Errorf("event %d handed on %q, want %q", i, b, tt.lines[i])
				}
				got.Write(b)
			}
			done := &task.Task{OutputComplete: true, OutputBytes: int64(len(tt.want))}
			rest, err := o.rest(context.Background(), nil, done)
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
	var o liveOutput
	printed := o.event(outputEvent(0, "first\nsec"))
	rest, err := o.rest(context.Background(), &client.Client{BaseURL: srv.URL},
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
	v.event(runningAt(10))
	frame := strings.TrimPrefix(term.String(), "\r\033[K")
	term.Reset()
	v.output([]byte("line 1\nline 2\n"))
	if want := "\r\033[Kline 1\nline 2\n\r\033[K" + frame; term.String() != want {
		t.Fatalf("output on the terminal:\n%q\nwant\n%q", term.String(), want)
	}
	term.Reset()
	v.output([]byte("no newline"))
	v.close()
	if want := "\r\033[Kno newline\n\r\033[K" + frame + "\n"; term.String() != want {
		t.Fatalf("an unfinished line, then the end:\n%q\nwant\n%q", term.String(), want)
	}
}

// TestBarLeavesOutputToAPipeAlone: with stdout a pipe and the bar on the terminal,
// the output goes to the pipe as it is and the bar is not erased for it.
func TestBarLeavesOutputToAPipeAlone(t *testing.T) {
	var term, pipe bytes.Buffer
	v := &barView{w: &term, out: outputLines{w: &pipe}, columns: func() int { return 80 }}
	v.event(runningAt(10))
	drawn := term.String()
	v.output([]byte("partial"))
	v.close()
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
	v.output([]byte("a\nno newline"))
	v.event(runningAt(50))
	v.output([]byte("tail"))
	v.close()
	lines := strings.Split(pipe.String(), "\n")
	if len(lines) != 5 || lines[0] != "a" || lines[1] != "no newline" || !strings.Contains(lines[2], "running") ||
		lines[3] != "tail" || lines[4] != "" || strings.Contains(pipe.String(), "\033") {
		t.Fatalf("into one pipe: %q", pipe.String())
	}
}

// TestWatchPrintsOutputExactlyAcrossAResumedStream: the event stream drops and is
// resumed with Last-Event-ID; the events after it repeat bytes already printed,
// and the last bytes come in no event. Stdout holds the output exactly once.
func TestWatchPrintsOutputExactlyAcrossAResumedStream(t *testing.T) {
	const whole = "one\ntwo\nthree\nfour\n"
	var mu sync.Mutex
	streams, lastIDs := 0, []string{}
	send := func(w http.ResponseWriter, evs ...*task.Event) {
		for _, ev := range evs {
			b, _ := json.Marshal(ev)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, b)
		}
	}
	seq := func(e *task.Event, n int64) *task.Event { e.Seq = n; return e }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/api/v1/tasks/t1/events":
			streams++
			lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
			w.Header().Set("Content-Type", "text/event-stream")
			if streams == 1 { // drops after the first piece
				send(w, &task.Event{Seq: 1, Type: task.EventState, State: task.StateRunning}, seq(outputEvent(0, "one\ntw"), 2))
				return
			}
			send(w, seq(outputEvent(4, "two\nthr"), 3), seq(outputEvent(0, "one\n"), 4), seq(outputEvent(11, "ee\n"), 5),
				&task.Event{Seq: 6, Type: task.EventResult, State: task.StateSucceeded,
					Result: &envelope.WorkResult{Status: envelope.ResultSuccess}})
		case "/api/v1/tasks/t1":
			st := task.StateRunning
			if streams > 1 {
				st = task.StateSucceeded
			}
			_ = json.NewEncoder(w).Encode(&task.Task{ID: "t1", State: st, OutputBytes: int64(len(whole)), OutputComplete: true,
				Result: &task.Result{Status: envelope.ResultSuccess}})
		case "/api/v1/tasks/t1/output":
			_, _ = w.Write([]byte(whole))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv("CHIFFON_API_TOKEN", "tok")
	code, out, errOut := runCLI(t, "", "watch", "t1", "--server", srv.URL)
	if code != 0 || out != whole {
		t.Fatalf("exit %d, stdout %q, want %q; stderr:\n%s", code, out, whole, errOut)
	}
	if mu.Lock(); len(lastIDs) < 2 || lastIDs[1] != "2" {
		t.Fatalf("the stream was not resumed after event 2: Last-Event-ID %q", lastIDs)
	}
	mu.Unlock()
}

// TestAWaitThatLosesItsOrchestratorSaysSo: when every orchestrator stays away
// until the follow gives up, submit --wait/watch exits 75 saying it lost track
// of the task, not with an exit code the task could have had.
func TestAWaitThatLosesItsOrchestratorSaysSo(t *testing.T) {
	old := client.FollowGiveUp
	client.FollowGiveUp = 300 * time.Millisecond
	t.Cleanup(func() { client.FollowGiveUp = old })
	var streams atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/tasks/t1/events" && streams.Add(1) == 1 {
			w.Header().Set("Content-Type", "text/event-stream")
			b, _ := json.Marshal(&task.Event{Seq: 1, Type: task.EventState, State: task.StateRunning})
			fmt.Fprintf(w, "id: 1\nevent: state\ndata: %s\n\n", b)
			return // the stream ends; the orchestrator is gone from now on
		}
		writeAPIError(w, http.StatusServiceUnavailable, "unavailable", "", "no orchestrator leads")
	}))
	defer srv.Close()
	t.Setenv("CHIFFON_API_TOKEN", "tok")
	code, _, errOut := runCLI(t, "", "watch", "t1", "--server", srv.URL)
	if code != exitNotFinished || !strings.Contains(errOut, "lost track of the task") {
		t.Fatalf("exit %d, stderr %q; want 75, lost track", code, errOut)
	}
}
