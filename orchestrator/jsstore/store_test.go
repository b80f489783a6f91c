package jsstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/orchestrator/jsstore"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/task/storetest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// wait bounds every wait for a commit or a condition.
const wait = 10 * time.Second

// startServer starts an embedded JetStream server storing in dir (a new temporary
// directory when "").
func startServer(t *testing.T, dir string) (*broker.Server, broker.ServerConfig) {
	t.Helper()
	if dir == "" {
		dir = testnats.StoreDir(t)
	}
	cfg := broker.ServerConfig{JetStream: true, StoreDir: dir}
	return testnats.Start(t, cfg), cfg
}

func connect(t *testing.T, srv *broker.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

var streams atomic.Int64

// freshOptions names a stream and a prefix no other store of the test binary
// uses.
func freshOptions(retention time.Duration) jsstore.Options {
	n := streams.Add(1)
	return jsstore.Options{Stream: fmt.Sprintf("TASKS_%d", n), Prefix: fmt.Sprintf("test%d.store", n), Retention: retention}
}

func open(t *testing.T, nc *nats.Conn, opts jsstore.Options) *jsstore.Store {
	t.Helper()
	s, err := jsstore.Open(nc, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestContractOnThreeReplicas keeps the contract with the stream on a
// three-node cluster, the store connected to a node the stream's leader may not
// be on: a record read right after its commit is the one committed (read from the
// stream's leader), not an older one a follower still holds.
func TestContractOnThreeReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := testnats.StartCluster(t, broker.LocalClusterConfig{})
	storetest.Run(t, func(t *testing.T, retention time.Duration) task.Store {
		opts := freshOptions(retention)
		opts.Replicas = 3
		s, err := jsstore.Open(c.ConnectNode(0), opts)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestContract(t *testing.T) {
	srv, _ := startServer(t, "")
	storetest.Run(t, func(t *testing.T, retention time.Duration) task.Store {
		s, err := jsstore.Open(connect(t, srv), freshOptions(retention))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// save saves w and returns the error its done ran with.
func save(t *testing.T, s task.Store, w *task.Write) error {
	t.Helper()
	errc := make(chan error, 1)
	s.Save(w, func(err error) { errc <- err })
	select {
	case err := <-errc:
		return err
	case <-time.After(wait):
		t.Fatalf("save %s: no answer within %s", w.ID, wait)
		return nil
	}
}

func mustSave(t *testing.T, s task.Store, w *task.Write) {
	t.Helper()
	if err := save(t, s, w); err != nil {
		t.Fatalf("save %s: %v", w.ID, err)
	}
}

var base = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func newTask(id string, state task.State) *task.Task {
	return &task.Task{ID: id, State: state, ToAgent: envelope.Code, WorkType: "echo", CreatedAt: base, UpdatedAt: base}
}

func event(seq int64, msg string) *task.Event {
	return &task.Event{Seq: seq, Type: task.EventState, At: base, State: task.StateRunning, Message: msg}
}

// fullWrite is a write of a record, 3 events and a piece of output.
func fullWrite(id string, out string) *task.Write {
	return &task.Write{ID: id, Task: newTask(id, task.StateRunning),
		Events: []*task.Event{event(1, "a"), event(2, "b"), event(3, "c")}, Output: task.Piece{Data: out}}
}

func eventCount(t *testing.T, s task.Store, id string) int {
	t.Helper()
	n := 0
	if err := s.Events(id, 0, func(*task.Event) error { n++; return nil }); err != nil {
		t.Fatalf("events of %s: %v", id, err)
	}
	return n
}

func outputOf(t *testing.T, s task.Store, id string) string {
	t.Helper()
	var b strings.Builder
	if _, err := s.WriteOutput(id, &b); err != nil {
		t.Fatalf("output of %s: %v", id, err)
	}
	return b.String()
}

// streamOf returns a context the test's end cancels, the JetStream API on nc and
// the stream name.
func streamOf(t *testing.T, nc *nats.Conn, name string) (context.Context, jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, js, st
}

// subjectCounts returns the stream's subjects under prefix, with their message
// counts.
func subjectCounts(t *testing.T, nc *nats.Conn, opts jsstore.Options) map[string]uint64 {
	t.Helper()
	ctx, _, st := streamOf(t, nc, opts.Stream)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(opts.Prefix+".>"))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects
}

// subjectsOf returns the subjects of task id among counts.
func subjectsOf(counts map[string]uint64, id string) []string {
	var out []string
	for subj := range counts {
		if strings.Contains(subj, "."+id) {
			out = append(out, subj)
		}
	}
	return out
}

// waitFor polls cond until it holds, failing t after wait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, wait)
		}
		time.Sleep(20 * time.Millisecond) // polling, within the deadline
	}
}

// first one wrote.
func TestReopenReadsBack(t *testing.T) {
	srv, cfg := startServer(t, "")
	nc := connect(t, srv)
	opts := freshOptions(time.Hour)
	s, err := jsstore.Open(nc, opts)
	if err != nil {
		t.Fatal(err)
	}
	running, done := newTask("task-1", task.StateRunning), newTask("task-2", task.StateSucceeded)
	mustSave(t, s, &task.Write{ID: running.ID, Task: running, Events: []*task.Event{event(1, "a"), event(2, "b")},
		Output: task.Piece{Data: "hello "}})
	mustSave(t, s, &task.Write{ID: running.ID, Output: task.Piece{Offset: 6, Data: "world"}})
	mustSave(t, s, &task.Write{ID: done.ID, Task: done})
	if err := s.ReplaceOutput(done.ID, "replaced"); err != nil {
		t.Fatal(err)
	}
	held := newTask("task-3", task.StatePending)
	errc := make(chan error, 1)
	s.Save(&task.Write{ID: held.ID, Task: held, MoreComing: true}, func(err error) { errc <- err })
	if err := s.Close(); err != nil { // commits the held write
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("held write at Close: %v", err)
	}
	nc.Close()

	srv = testnats.Restart(t, srv, cfg)
	s2 := open(t, connect(t, srv), opts)
	got, err := s2.Task(running.ID)
	if err != nil || got.State != task.StateRunning {
		t.Fatalf("task after reopening: %+v %v", got, err)
	}
	if n, out := eventCount(t, s2, running.ID), outputOf(t, s2, running.ID); n != 2 || out != "hello world" {
		t.Fatalf("after reopening: %d events, output %q", n, out)
	}
	if out := outputOf(t, s2, done.ID); out != "replaced" {
		t.Fatalf("replaced output after reopening: %q", out)
	}
	unfinished, err := s2.Unfinished()
	if err != nil || len(unfinished) != 2 || unfinished[0].ID != running.ID || unfinished[1].ID != held.ID {
		t.Fatalf("unfinished after reopening: %v %v", unfinished, err)
	}
}

// An id that cannot be a subject token is refused, and nothing is published.
func TestInvalidIDsRefused(t *testing.T) {
	srv, _ := startServer(t, "")
	nc := connect(t, srv)
	opts := freshOptions(0)
	s := open(t, nc, opts)
	for _, id := range []string{"a.b", "a*", "a>", "*", ">", "a b", "a\tb", ""} {
		tk := newTask(id, task.StatePending)
		if err := save(t, s, &task.Write{ID: id, Task: tk, Events: []*task.Event{event(1, "x")}}); !errors.Is(err, jsstore.ErrInvalidID) {
			t.Errorf("save of id %q: %v, want ErrInvalidID", id, err)
		}
		if err := s.ReplaceOutput(id, "x"); !errors.Is(err, jsstore.ErrInvalidID) {
			t.Errorf("ReplaceOutput of id %q: %v, want ErrInvalidID", id, err)
		}
		if _, err := s.Task(id); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Task of id %q: %v, want ErrNotFound", id, err)
		}
	}
	// A refused write does not spoil the writes saved with it.
	bad := &task.Write{ID: "x.y", Task: newTask("x.y", task.StatePending), MoreComing: true}
	errc := make(chan error, 1)
	s.Save(bad, func(err error) { errc <- err })
	mustSave(t, s, fullWrite("task-1", "out"))
	if err := <-errc; !errors.Is(err, jsstore.ErrInvalidID) {
		t.Errorf("held write of id x.y: %v", err)
	}
	counts := subjectCounts(t, nc, opts)
	if len(counts) != 5 || len(subjectsOf(counts, "task-1")) != 5 {
		t.Fatalf("stream holds %v, want only task-1's record, 3 events and output", counts)
	}
}

// The sweep purges an expired task's events and output with its record, and
// leaves an unfinished task alone.
func TestSweepPurgesExpiredTask(t *testing.T) {
	srv, _ := startServer(t, "")
	nc := connect(t, srv)
	opts := freshOptions(300 * time.Millisecond)
	s := open(t, nc, opts)
	for _, id := range []string{"task-1", "task-2"} {
		mustSave(t, s, fullWrite(id, "out"))
	}
	if err := s.ReplaceOutput("task-2", strings.Repeat("y", envelope.MaxChunkSize+1)); err != nil {
		t.Fatal(err)
	}
	finished := newTask("task-2", task.StateSucceeded)
	now := time.Now()
	finished.FinishedAt = &now
	mustSave(t, s, &task.Write{ID: finished.ID, Task: finished, Events: []*task.Event{event(4, "end")}})
	if c := subjectsOf(subjectCounts(t, nc, opts), "task-2"); len(c) != 8 {
		t.Fatalf("finished task's subjects before the sweep: %v", c)
	}
	waitFor(t, "the sweep purges task-2", func() bool {
		return len(subjectsOf(subjectCounts(t, nc, opts), "task-2")) == 0
	})
	if c := subjectsOf(subjectCounts(t, nc, opts), "task-1"); len(c) != 5 {
		t.Fatalf("running task's subjects after the sweep: %v", c)
	}
	if _, err := s.Task("task-1"); err != nil || outputOf(t, s, "task-1") != "out" || eventCount(t, s, "task-1") != 3 {
		t.Fatalf("running task after the sweep: %v", err)
	}
}

// A store opened with a retention sweeps at once: tasks that finished before it
// opened, past the retention, are purged without waiting for the interval.
func TestSweepAtOpen(t *testing.T) {
	srv, _ := startServer(t, "")
	nc := connect(t, srv)
	opts := freshOptions(0)
	s, err := jsstore.Open(nc, opts)
	if err != nil {
		t.Fatal(err)
	}
	old := newTask("task-1", task.StateFailed)
	at := time.Now().Add(-2 * time.Hour)
	old.FinishedAt = &at
	mustSave(t, s, &task.Write{ID: old.ID, Task: old, Events: []*task.Event{event(1, "x")}, Output: task.Piece{Data: "o"}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	opts.Retention = time.Hour // the next sweep would come in a minute
	s = open(t, nc, opts)
	if _, err := s.Task(old.ID); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("expired task read: %v", err)
	}
	waitFor(t, "the sweep at open purges task-1", func() bool { return len(subjectCounts(t, nc, opts)) == 0 })
}

// Writes queued together beyond one atomic batch's 1000 messages commit in
// several batches, all of them.
func TestManyWritesSplitIntoBatches(t *testing.T) {
	srv, _ := startServer(t, "")
	s := open(t, connect(t, srv), freshOptions(0))
	const writes = 700 // 2 messages each
	errc := make(chan error, writes)
	for i := 1; i <= writes; i++ {
		id := fmt.Sprintf("task-%d", i%7)
		tk := newTask(id, task.StateRunning)
		tk.Attempts = i
		s.Save(&task.Write{ID: id, Task: tk, Events: []*task.Event{event(int64(i), "e")}, MoreComing: true}, func(err error) { errc <- err })
	}
	s.Flush()
	for range writes {
		select {
		case err := <-errc:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(wait):
			t.Fatal("a write never committed")
		}
	}
	total := 0
	for i := range 7 {
		total += eventCount(t, s, fmt.Sprintf("task-%d", i))
	}
	if total != writes {
		t.Fatalf("%d events stored, want %d", total, writes)
	}
	if tk, err := s.Task("task-0"); err != nil || tk.Attempts != writes {
		t.Fatalf("last record of task-0: %+v %v", tk, err)
	}
}

// A finished task past the retention reads as absent before any sweep purges it:
// here its finish marker is gone, so no sweep will.
func TestExpiredTaskHiddenBeforeSweep(t *testing.T) {
	srv, _ := startServer(t, "")
	nc := connect(t, srv)
	opts := freshOptions(0)
	s, err := jsstore.Open(nc, opts)
	if err != nil {
		t.Fatal(err)
	}
	old, running := newTask("task-1", task.StateSucceeded), newTask("task-2", task.StateRunning)
	at := time.Now().Add(-2 * time.Hour)
	old.FinishedAt = &at
	mustSave(t, s, &task.Write{ID: old.ID, Task: old})
	mustSave(t, s, &task.Write{ID: running.ID, Task: running})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, _, st := streamOf(t, nc, opts.Stream)
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(opts.Prefix+".f.task-1")); err != nil {
		t.Fatal(err)
	}

	opts.Retention = time.Hour
	s = open(t, nc, opts)
	if _, err := s.Task(old.ID); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("task finished 2h ago, with a retention of 1h: %v, want ErrNotFound", err)
	}
	list, err := s.Tasks(nil, 0)
	if err != nil || len(list) != 1 || list[0].ID != running.ID {
		t.Fatalf("list %v %v, want only the running task", list, err)
	}
	if c := subjectsOf(subjectCounts(t, nc, opts), "task-1"); len(c) != 1 {
		t.Fatalf("the expired record should still be stored, unswept: %v", c)
	}
}

// TestStatusOutputIsStoredOnce: a status's output is stored as its piece, and the
// event read back from it. Stored in the event as well, a 256 KiB chunk of control
// bytes (JSON escapes each to six) would not fit one message, and the status would
// be lost.
func TestStatusOutputIsStoredOnce(t *testing.T) {
	srv, _ := startServer(t, "")
	s := open(t, connect(t, srv), freshOptions(0))
	id := "task-ctl"
	out := strings.Repeat("\x01", envelope.MaxChunkSize)
	off := int64(0)
	tk := &task.Task{ID: id, State: task.StateRunning, ToAgent: envelope.Code, WorkType: "echo", CreatedAt: time.Now()}
	ev := &task.Event{Seq: 1, Type: task.EventStatus, State: task.StateRunning, OutputOffset: &off,
		Status: &envelope.WorkStatus{TaskID: id, Status: envelope.StatusRunning, Step: envelope.Step{Number: 1, Output: out}}}
	mustSave(t, s, &task.Write{ID: id, Task: tk, Events: []*task.Event{ev}, Output: task.Piece{Offset: 0, Data: out}})
	var got []*task.Event
	if err := s.Events(id, 0, func(ev *task.Event) error { got = append(got, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Status == nil || got[0].Status.Step.Output != out {
		t.Fatalf("status read back with %d events, output of %d bytes; want %d bytes", len(got), len(got[0].Status.Step.Output), len(out))
	}
}

// Open on a broker without JetStream says so.
// TestOpenSaysWhenTheBrokerCannotHoldTheReplicas: three replicas on one server,
// or on a cluster of two, fail with what to do.
func TestOpenSaysWhenTheBrokerCannotHoldTheReplicas(t *testing.T) {
	opts := freshOptions(0)
	opts.Replicas = 3
	srv := testnats.Start(t, broker.ServerConfig{JetStream: true, StoreDir: testnats.StoreDir(t)})
	if _, err := jsstore.Open(connect(t, srv), opts); err == nil || !strings.Contains(err.Error(), "set store.jetstream.replicas to 1") {
		t.Errorf("Open of 3 replicas on one server: %v", err)
	}
	two := testnats.StartCluster(t, broker.LocalClusterConfig{Nodes: 2})
	if _, err := jsstore.Open(two.ConnectNode(0), opts); err == nil || !strings.Contains(err.Error(), "needs 3 JetStream servers") {
		t.Errorf("Open of 3 replicas on a cluster of 2: %v", err)
	}
}

func TestOpenWithoutJetStreamSaysSo(t *testing.T) {
	srv := testnats.Start(t, broker.ServerConfig{})
	_, err := jsstore.Open(connect(t, srv), freshOptions(0))
	if err == nil || !strings.Contains(err.Error(), "is JetStream enabled on the broker") {
		t.Fatalf("Open without JetStream: %v", err)
	}
}
