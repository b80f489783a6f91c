// Package storetest holds the contract tests every task.Store passes: a backend's
// own tests call Run with a function that opens a fresh store of its kind.
package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// Open opens an empty store that keeps finished tasks for retention (0: forever).
// Run closes it.
type Open func(t *testing.T, retention time.Duration) task.Store

// wait bounds every wait for a commit.
const wait = 10 * time.Second

// Run runs the contract tests against the stores open opens.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		fn   func(*testing.T, Open)
	}{
		{"CreateThenRead", testCreateThenRead},
		{"TaskNotFound", testTaskNotFound},
		{"EventsInOrderAfterSeq", testEventsInOrderAfterSeq},
		{"StatusOutputReadBack", testStatusOutputReadBack},
		{"RecordlessWriteKeepsRecord", testRecordlessWriteKeepsRecord},
		{"OutputContiguousUpToGap", testOutputContiguousUpToGap},
		{"ReplaceOutput", testReplaceOutput},
		{"ListNewestFirstFilteredLimited", testListNewestFirstFilteredLimited},
		{"UnfinishedOldestFirst", testUnfinishedOldestFirst},
		{"AsyncWritesCommitInOrder", testAsyncWritesCommitInOrder},
		{"MoreComingCommitsAtFlush", testMoreComingCommitsAtFlush},
		{"SaveReadsWriteAtOnce", testSaveReadsWriteAtOnce},
		{"FinishedTaskExpires", testFinishedTaskExpires},
		{"SaveAfterCloseFails", testSaveAfterCloseFails},
		{"RecordsPutReadListDelete", testRecordsPutReadListDelete},
		{"RecordsSurviveRetention", testRecordsSurviveRetention},
		{"RecordAfterCloseFails", testRecordAfterCloseFails},
		{"TaskIDsByShortIDOrPrefix", testTaskIDsByShortIDOrPrefix},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

func openStore(t *testing.T, open Open, retention time.Duration) task.Store {
	t.Helper()
	s := open(t, retention)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// save saves w and waits for its commit.
func save(t *testing.T, s task.Store, w *task.Write) {
	t.Helper()
	errc := make(chan error, 1)
	s.Save(w, func(err error) { errc <- err })
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("save %s: %v", w.ID, err)
		}
	case <-time.After(wait):
		t.Fatalf("save %s: not committed within %s", w.ID, wait)
	}
}

var base = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func newTask(n int, state task.State) *task.Task {
	at := base.Add(time.Duration(n) * time.Second)
	return &task.Task{ID: fmt.Sprintf("task-%03d", n), State: state, ToAgent: envelope.Code, WorkType: "echo",
		Parameters: map[string]any{"n": fmt.Sprint(n)}, RequestID: "r", TraceID: "tr", CreatedAt: at, UpdatedAt: at}
}

func event(seq int64, msg string) *task.Event {
	return &task.Event{Seq: seq, Type: task.EventState, At: base, State: task.StatePending, Message: msg}
}

func events(t *testing.T, s task.Store, id string, after int64) []*task.Event {
	t.Helper()
	var out []*task.Event
	if err := s.Events(id, after, func(ev *task.Event) error { out = append(out, ev); return nil }); err != nil {
		t.Fatalf("events of %s: %v", id, err)
	}
	return out
}

func messages(evs []*task.Event) string {
	var b []string
	for _, ev := range evs {
		b = append(b, fmt.Sprintf("%d:%s", ev.Seq, ev.Message))
	}
	return strings.Join(b, " ")
}

func output(t *testing.T, s task.Store, id string) string {
	t.Helper()
	var b strings.Builder
	n, err := s.WriteOutput(id, &b)
	if err != nil || n != int64(b.Len()) {
		t.Fatalf("output of %s: %d bytes reported, %d written, %v", id, n, b.Len(), err)
	}
	return b.String()
}

// A task saved with its first events reads back as saved.
func testCreateThenRead(t *testing.T, open Open) {
	s := openStore(t, open, 0)
	tk := newTask(1, task.StatePending)
	tk.Hints = &task.Hints{AgentID: "code-1"}
	save(t, s, &task.Write{ID: tk.ID, Task: tk, Events: []*task.Event{event(1, "submitted")}})
	got, err := s.Task(tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != tk.ID || got.State != tk.State || !got.CreatedAt.Equal(tk.CreatedAt) || got.Hints == nil ||
		got.Hints.AgentID != "code-1" || got.Parameters["n"] != "1" {
		t.Fatalf("read %+v, saved %+v", got, tk)
	}
	if m := messages(events(t, s, tk.ID, 0)); m != "1:submitted" {
		t.Fatalf("events %q", m)
	}
}

func testTaskNotFound(t *testing.T, open Open) {
	s := openStore(t, open, 0)
	if _, err := s.Task("nope"); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("Task of an unknown id: %v, want ErrNotFound", err)
	}
	if evs := events(t, s, "nope", 0); len(evs) != 0 {
		t.Fatalf("events of an unknown task: %v", evs)
	}
}

// Events come in Seq order whatever the order of the writes, from after on, and a
// Seq saved again is replaced.
func testEventsInOrderAfterSeq(t *testing.T, open Open) {
	s := openStore(t, open, 0)
	tk := newTask(1, task.StateRunning)
	save(t, s, &task.Write{ID: tk.ID, Task: tk, Events: []*task.Event{event(1, "a"), event(2, "b")}})
	save(t, s, &task.Write{ID: tk.ID, Events: []*task.Event{event(4, "d"), event(3, "c")}})
	for i := int64(5); i <= 300; i++ { // past one byte of a key's number
		save(t, s, &task.Write{ID: tk.ID, Events: []*task.Event{event(i, "x")}})
	}
	save(t, s, &task.Write{ID: tk.ID, Events: []*task.Event{event(2, "B")}})
	if m := messages(events(t, s, tk.ID, 0)[:4]); m != "1:a 2:B 3:c 4:d" {
		t.Fatalf("events %q", m)
	}
	evs := events(t, s, tk.ID, 2)
	if len(evs) != 298 || evs[0].Seq != 3 || evs[297].Seq != 300 {
		t.Fatalf("events after 2: %d, first %d", len(evs), evs[0].Seq)
	}
	stop := errors.New("stop")
	n := 0
	err := s.Events(tk.ID, 0, func(*task.Event) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Events with fn failing: %v after %d calls, want fn's error after 1", err, n)
	}
}

// A status event and its output piece saved together read back with the output.
func testStatusOutputReadBack(t *testing.T, open Open) {
	s := openStore(t, open, 0)
	tk := newTask(1, task.StateRunning)
	save(t, s, &task.Write{ID: tk.ID, Task: tk})
	for i, out := range []string{"hello ", "world <3>\n"} {
		off := int64(i * len("hello "))
		ev := &task.Event{Seq: int64(i + 1), Type: task.EventStatus, At: base, State: task.StateRunning, OutputOffset: &off,
			Status: &envelope.WorkStatus{TaskID: tk.ID, Status: envelope.StatusRunning, Step: envelope.Step{Number: 1, Name: "run", Output: out}}}
		save(t, s, &task.Write{ID: tk.ID, Events: []*task.Event{ev}, Output: task.Piece{Offset: off, Data: out}})
	}
	evs := events(t, s, tk.ID, 0)
	if len(evs) != 2 || evs[0].Status.Step.Output != "hello " || evs[1].Status.Step.Output != "world <3>\n" {
		t.Fatalf("status events read back %+v", evs)
	}
	if out := output(t, s, tk.ID); out != "hello world <3>\n" {
		t.Fatalf("output %q", out)
	}
}

// A write without a record leaves the stored one as it was.
func testRecordlessWriteKeepsRecord(t *testing.T, open Open) {
	s := openStore(t, open, 0)
	tk := newTask(1, task.StateDispatched)
	save(t, s, &task.Write{ID: tk.ID, Task: tk})
	save(t, s, &task.Write{ID: tk.ID, Events: []*task.Event{event(1, "status")}})
	got, err := s.Task(tk.ID)
	if err != nil || got.State != task.StateDispatched {
		t.Fatalf("record after a write without one: %+v %v", got, err)
	}
}

// Output is read from byte 0 up to the first gap; the spans list every piece.
func testOutputContiguousUpToGap(t *testing.T, open Open) {
	s := openStore(t, open, 0)
	tk := newTask(1, task.StateRunning)
	save(t, s, &task.Write{ID: tk.ID, Task: tk})
	for _, p := range []task.Piece{{Offset: 0, Data: "abc"}, {Offset: 2, Data: "cdef"}, {Offset: 10, Data: "zz"}} {
		save(t, s, &task.Write{ID: tk.ID, Output: p})
	}
	if out := output(t, s, tk.ID); out != "abcdef" {
		t.Fatalf("output %q, want the bytes before the gap", out)
	}
	spans, err := s.OutputSpans(tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(spans) != "[{0 3} {2 6} {10 12}]" {
		t.Fatalf("spans %v", spans)
	}
	if out := output(t, s, "no-output"); out != "" {
		t.Fatalf("output of a task without any: %q", out)
	}
}

// ReplaceOutput makes its data the whole output, pieces saved before gone.
func testReplaceOutput(t *testing.T, open Open) {
	s := openStore(t, open, 0)
	tk := newTask(1, task.StateRunning)
	save(t, s, &task.Write{ID: tk.ID, Task: tk, Output: task.Piece{Offset: 0, Data: "old output, longer"}})
	save(t, s, &task.Write{ID: tk.ID, Output: task.Piece{Offset: 100, Data: "stray"}})
	big := strings.Repeat("0123456789", envelope.MaxChunkSize/4)
	if err := s.ReplaceOutput(tk.ID, big); err != nil {
		t.Fatal(err)
	}
	if out := output(t, s, tk.ID); out != big {
		t.Fatalf("output after ReplaceOutput: %d bytes, want %d", len(out), len(big))
	}
	if spans, _ := s.OutputSpans(tk.ID); len(spans) == 0 || spans[len(spans)-1].End != int64(len(big)) {
		t.Fatalf("spans after ReplaceOutput: %v", spans)
	}
	if err := s.ReplaceOutput(tk.ID, ""); err != nil {
		t.Fatal(err)
	}
	if spans, _ := s.OutputSpans(tk.ID); len(spans) != 0 {
		t.Fatalf("spans after replacing with nothing: %v", spans)
	}
}

// Tasks lists newest first, keeps what keep accepts as keep changed it, and stops
// at limit.
func testListNewestFirstFilteredLimited(t *testing.T, open Open) {
	s := openStore(t, open, 0)
	for _, n := range []int{3, 1, 4, 2, 5} {
		state := task.StateRunning
		if n%2 == 0 {
			state = task.StateSucceeded
		}
		tk := newTask(n, state)
		save(t, s, &task.Write{ID: tk.ID, Task: tk})
	}
	ids := func(ts []*task.Task) string {
		var b []string
		for _, tk := range ts {
			b = append(b, tk.ID[len("task-"):]+":"+tk.WorkType)
		}
		return strings.Join(b, " ")
	}
	all, err := s.Tasks(nil, 0)
	if err != nil || ids(all) != "005:echo 004:echo 003:echo 002:echo 001:echo" {
		t.Fatalf("all: %s %v", ids(all), err)
	}
	running, err := s.Tasks(func(tk *task.Task) bool { tk.WorkType = "seen"; return tk.State == task.StateRunning }, 2)
	if err != nil || ids(running) != "005:seen 003:seen" {
		t.Fatalf("running, at most 2: %s %v", ids(running), err)
	}
}

func testUnfinishedOldestFirst(t *testing.T, open Open) {
	s := openStore(t, open, time.Hour)
	for n, state := range []task.State{task.StatePending, task.StateDispatched, task.StateFailed, task.StateRunning, task.StateCancelled} {
		tk := newTask(n, state)
		save(t, s, &task.Write{ID: tk.ID, Task: tk})
	}
	got, err := s.Unfinished()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tk := range got {
		ids = append(ids, tk.ID)
	}
	if strings.Join(ids, " ") != "task-000 task-001 task-003" {
		t.Fatalf("unfinished %v", ids)
	}
}

// Writes from many goroutines all commit, each done runs once, and each goroutine's
// writes commit in its order: its last record wins, and every event is there.
func testAsyncWritesCommitInOrder(t *testing.T, open Open) {
	s := openStore(t, open, 0)
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := newTask(w, task.StatePending)
			dones := make(chan error, each)
			for i := range each {
				c := *tk
				c.Attempts = i
				s.Save(&task.Write{ID: tk.ID, Task: &c, Events: []*task.Event{event(int64(i+1), "e")}, MoreComing: i%3 != 2},
					func(err error) { dones <- err })
			}
			s.Flush()
			for range each {
				select {
				case err := <-dones:
					if err != nil {
						t.Error(err)
						return
					}
				case <-time.After(wait):
					t.Error("a write was never committed")
					return
				}
			}
			got, err := s.Task(tk.ID)
			if err != nil || got.Attempts != each-1 {
				t.Errorf("task %s: %+v %v, want the last record", tk.ID, got, err)
			}
		}()
	}
	wg.Wait()
	for w := range writers {
		if n := len(events(t, s, newTask(w, "").ID, 0)); n != each {
			t.Errorf("writer %d: %d events, want %d", w, n, each)
		}
	}
}

// A write saved with MoreComing commits at the latest at Flush or the next write.
func testMoreComingCommitsAtFlush(t *testing.T, open Open) {
	s := openStore(t, open, 0)
	tk := newTask(1, task.StatePending)
	errc := make(chan error, 2)
	s.Save(&task.Write{ID: tk.ID, Task: tk, MoreComing: true}, func(err error) { errc <- err })
	s.Flush()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("held write not committed by Flush")
	}
	s.Save(&task.Write{ID: tk.ID, Events: []*task.Event{event(1, "held")}, MoreComing: true}, func(err error) { errc <- err })
	save(t, s, &task.Write{ID: tk.ID, Events: []*task.Event{event(2, "next")}})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if m := messages(events(t, s, tk.ID, 0)); m != "1:held 2:next" {
		t.Fatalf("events %q", m)
	}
}

// Save reads the write before it returns: changing the record and events after
// changes nothing stored.
func testSaveReadsWriteAtOnce(t *testing.T, open Open) {
	s := openStore(t, open, 0)
	tk := newTask(1, task.StatePending)
	ev := event(1, "before")
	errc := make(chan error, 1)
	s.Save(&task.Write{ID: tk.ID, Task: tk, Events: []*task.Event{ev}}, func(err error) { errc <- err })
	tk.State, ev.Message = task.StateRunning, "after"
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	got, err := s.Task(tk.ID)
	if err != nil || got.State != task.StatePending {
		t.Fatalf("record %+v %v, want it as saved", got, err)
	}
	if m := messages(events(t, s, tk.ID, 0)); m != "1:before" {
		t.Fatalf("events %q, want them as saved", m)
	}
}

// A finished task is kept for the retention, then its record is gone; an unfinished
// one stays.
func testFinishedTaskExpires(t *testing.T, open Open) {
	const retention = 2 * time.Second // Badger expires keys on whole seconds
	s := openStore(t, open, retention)
	running, done := newTask(1, task.StateRunning), newTask(2, task.StateRunning)
	unread := newTask(3, task.StateRunning) // ends first; only TaskIDs looks for it
	for _, tk := range []*task.Task{running, unread, done} {
		tk.CreatedAt = time.Now()
		save(t, s, &task.Write{ID: tk.ID, Task: tk, Events: []*task.Event{event(1, "a")}, Output: task.Piece{Data: "out"}})
	}
	for _, tk := range []*task.Task{unread, done} {
		tk.State = task.StateSucceeded
		save(t, s, &task.Write{ID: tk.ID, Task: tk, Events: []*task.Event{event(2, "end")}})
	}
	if _, err := s.Task(done.ID); err != nil {
		t.Fatalf("finished task gone at once: %v", err)
	}
	deadline := time.Now().Add(3 * retention)
	for {
		_, err := s.Task(done.ID)
		if errors.Is(err, task.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("finished task still there %s after it ended (%v)", 3*retention, err)
		}
		time.Sleep(50 * time.Millisecond) // polling for the expiry, within the deadline
	}
	wantTaskIDs(t, s, "task-00", running.ID)
	list, err := s.Tasks(nil, 0)
	if err != nil || len(list) != 1 || list[0].ID != running.ID {
		t.Fatalf("list %v %v, want only the running task", list, err)
	}
	if _, err := s.Task(running.ID); err != nil || output(t, s, running.ID) != "out" {
		t.Fatalf("running task: %v, output %q", err, output(t, s, running.ID))
	}
}

func testSaveAfterCloseFails(t *testing.T, open Open) {
	s := open(t, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	s.Save(&task.Write{ID: "x", Task: newTask(1, task.StatePending)}, func(err error) { errc <- err })
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("save after Close succeeded")
		}
	case <-time.After(wait):
		t.Fatal("save after Close never answered")
	}
}
