package taskview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"golang.org/x/sys/unix"
)

// progressEvents is a short task history: dispatched, two statuses, a retry, a result.
func progressEvents() []*task.Event {
	at := time.Date(2026, 1, 19, 4, 21, 4, 0, time.UTC)
	status := func(pct int, n int64, name string) *envelope.WorkStatus {
		return &envelope.WorkStatus{Status: envelope.StatusRunning, ProgressPercent: pct, Step: envelope.Step{Number: n, Name: name}}
	}
	return []*task.Event{
		{Seq: 1, Type: task.EventState, At: at, State: task.StateDispatched},
		{Seq: 2, Type: task.EventStatus, At: at, State: task.StateRunning, Status: status(0, 0, "accepted")},
		{Seq: 3, Type: task.EventStatus, At: at, State: task.StateRunning, Status: status(0, 0, "accepted")},
		{Seq: 4, Type: task.EventRetry, At: at, State: task.StateRunning, Error: &task.TaskError{Code: 5001, Message: "no ack"}},
		{Seq: 5, Type: task.EventStatus, At: at, State: task.StateRunning, Status: status(40, 2, "Installing packages")},
		{Seq: 6, Type: task.EventResult, At: at, State: task.StateSucceeded, Result: &envelope.WorkResult{Status: envelope.ResultSuccess}},
	}
}

func TestPlainProgressPrintsOneLinePerChange(t *testing.T) {
	var out bytes.Buffer
	v := NewView(false, &bytes.Buffer{}, &out)
	for _, e := range progressEvents() {
		v.Event(e)
	}
	v.Close()
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
		v.Event(e)
	}
	v.Close()
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
	v := NewView(true, &out, &bytes.Buffer{})
	for _, e := range progressEvents() {
		v.Event(e)
	}
	dec := json.NewDecoder(&out)
	n := 0
	for dec.More() {
		var e task.Event
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

// TestBarProgressFitsTheTerminalWidth: no frame may reach the terminal's last column,
// or it wraps and erase-line leaves its first row on the screen.
func TestBarProgressFitsTheTerminalWidth(t *testing.T) {
	long := strings.Repeat("Installing packages é ", 8) + "\nand more"
	events := progressEvents()
	events[4].Status.Step.Name = long
	for _, cols := range []int{10, 24, 40, 60, 80, 300} {
		var out bytes.Buffer
		v := &barView{w: &out, columns: func() int { return cols }}
		for _, e := range events {
			v.Event(e)
		}
		frames := strings.Split(out.String(), "\r\033[K")[1:]
		if len(frames) != 4 {
			t.Fatalf("%d columns: %d frames, want 4: %q", cols, len(frames), out.String())
		}
		for _, f := range frames {
			if n := utf8.RuneCountInString(f); n > cols-1 || !utf8.ValidString(f) || strings.ContainsAny(f, "\r\n") {
				t.Errorf("%d columns: a frame of %d cells: %q", cols, n, f)
			}
		}
		last := frames[len(frames)-1]
		if cols >= 60 && !strings.Contains(last, strings.Repeat("█", 10)) {
			t.Errorf("%d columns: no bar in %q", cols, last)
		}
		if cols >= 24 && !strings.Contains(last, "100%") {
			t.Errorf("%d columns: no percent in %q", cols, last)
		}
		if cols == 300 && !strings.Contains(last, "step 2: "+strings.ReplaceAll(long, "\n", " ")) {
			t.Errorf("%d columns: the step is cut: %q", cols, last)
		}
	}
}

func TestTerminalColumnsFallsBackToCOLUMNS(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "notty")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	t.Setenv("COLUMNS", "57")
	if got := TerminalColumns(f); got != 57 {
		t.Errorf("TerminalColumns of a file with COLUMNS=57: %d", got)
	}
}

// TestBarProgressAsksTheTerminalItsWidth draws on a pseudo-terminal 33 columns wide.
func TestBarProgressAsksTheTerminalItsWidth(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open the pty: %v", err)
	}
	defer tty.Close()
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 33}); err != nil {
		t.Skipf("set the pty's size: %v", err)
	}
	t.Setenv("COLUMNS", "")
	v, ok := NewView(false, &bytes.Buffer{}, tty).(*barView)
	if !ok {
		t.Fatalf("a terminal gets %T, want a bar", v)
	}
	if v.columns == nil || v.columns() != 33 {
		t.Fatalf("the bar does not follow the terminal's 33 columns")
	}
}
