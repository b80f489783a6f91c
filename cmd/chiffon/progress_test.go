package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
)

// progressEvents is a short task history: dispatched, two statuses, a retry, a result.
func progressEvents() []*orchestrator.Event {
	at := time.Date(2026, 1, 19, 4, 21, 4, 0, time.UTC)
	status := func(pct int, n int64, name string) *envelope.WorkStatus {
		return &envelope.WorkStatus{Status: envelope.StatusRunning, ProgressPercent: pct, Step: envelope.Step{Number: n, Name: name}}
	}
	return []*orchestrator.Event{
		{Seq: 1, Type: orchestrator.EventState, At: at, State: orchestrator.StateDispatched},
		{Seq: 2, Type: orchestrator.EventStatus, At: at, State: orchestrator.StateRunning, Status: status(0, 0, "accepted")},
		{Seq: 3, Type: orchestrator.EventStatus, At: at, State: orchestrator.StateRunning, Status: status(0, 0, "accepted")},
		{Seq: 4, Type: orchestrator.EventRetry, At: at, State: orchestrator.StateRunning, Error: &orchestrator.TaskError{Code: 5001, Message: "no ack"}},
		{Seq: 5, Type: orchestrator.EventStatus, At: at, State: orchestrator.StateRunning, Status: status(40, 2, "Installing packages")},
		{Seq: 6, Type: orchestrator.EventResult, At: at, State: orchestrator.StateSucceeded, Result: &envelope.WorkResult{Status: envelope.ResultSuccess}},
	}
}

func TestPlainProgressPrintsOneLinePerChange(t *testing.T) {
	var out bytes.Buffer
	v := newProgressView(false, &bytes.Buffer{}, &out)
	for _, e := range progressEvents() {
		v.event(e)
	}
	v.close()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"dispatched", "running      0%  step 0: accepted", "retry after 5001: no ack",
		"running     40%  step 2: Installing packages", "succeeded  100%"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %q, want it to contain %q", i+1, lines[i], w)
		}
	}
}

func TestBarProgressRedrawsOneLine(t *testing.T) {
	var out bytes.Buffer
	v := &barView{w: &out}
	for _, e := range progressEvents() {
		v.event(e)
	}
	v.close()
	s := out.String()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Fatalf("bar must stay on one line until it closes: %q", s)
	}
	frames := strings.Split(strings.TrimSuffix(s, "\n"), "\r\033[K")
	last := frames[len(frames)-1]
	if !strings.Contains(last, strings.Repeat("█", barWidth)) || !strings.Contains(last, "100%") || !strings.Contains(last, "Installing packages") {
		t.Errorf("last frame = %q", last)
	}
	if mid := frames[len(frames)-2]; !strings.Contains(mid, " 40%") || !strings.Contains(mid, strings.Repeat("█", 12)+"░") {
		t.Errorf("40%% frame = %q", mid)
	}
}

func TestJSONProgressPrintsEveryEvent(t *testing.T) {
	var out bytes.Buffer
	v := newProgressView(true, &out, &bytes.Buffer{})
	for _, e := range progressEvents() {
		v.event(e)
	}
	dec := json.NewDecoder(&out)
	n := 0
	for dec.More() {
		var e orchestrator.Event
		if err := dec.Decode(&e); err != nil {
			t.Fatal(err)
		}
		n++
		if e.Seq != int64(n) {
			t.Errorf("event %d has seq %d", n, e.Seq)
		}
	}
	if n != len(progressEvents()) {
		t.Errorf("got %d JSON lines, want %d", n, len(progressEvents()))
	}
}

func TestTaskExitCodes(t *testing.T) {
	tests := []struct {
		task orchestrator.Task
		want int
	}{
		{orchestrator.Task{State: orchestrator.StateSucceeded}, 0},
		{orchestrator.Task{State: orchestrator.StateFailed, Result: &orchestrator.Result{ExitCode: 3}}, 3},
		{orchestrator.Task{State: orchestrator.StateFailed, Result: &orchestrator.Result{ExitCode: 300}}, 1},
		{orchestrator.Task{State: orchestrator.StateCancelled}, exitTaskCancelled},
		{orchestrator.Task{State: orchestrator.StateError}, exitTaskError},
		{orchestrator.Task{State: orchestrator.StateRunning}, exitNotFinished},
	}
	for _, tt := range tests {
		if got := taskExitCode(&tt.task); got != tt.want {
			t.Errorf("%s: exit %d, want %d", tt.task.State, got, tt.want)
		}
	}
}
