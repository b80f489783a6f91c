package jsstore_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/jsstore"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// A record is stored raw on P.r.<kind>.<id>, and deleted with a tombstone (an
// empty message on the same subject) that the reads skip.
func TestRecordLayout(t *testing.T) {
	srv, _ := startServer(t, "")
	nc := connect(t, srv)
	opts := freshOptions(0)
	s := open(t, nc, opts)
	if err := s.PutRecord("batch", "b1", []byte("one")); err != nil {
		t.Fatal(err)
	}
	ctx, _, st := streamOf(t, nc, opts.Stream)
	m, err := st.GetLastMsgForSubject(ctx, opts.Prefix+".r.batch.b1")
	if err != nil || string(m.Data) != "one" {
		t.Fatalf("record's message: %v %v", m, err)
	}
	if err := s.PutRecord("batch", "b1", nil); err != nil {
		t.Fatal(err)
	}
	if m, err = st.GetLastMsgForSubject(ctx, opts.Prefix+".r.batch.b1"); err != nil || len(m.Data) != 0 {
		t.Fatalf("deleted record's message: %v %v, want a tombstone", m, err)
	}
	if _, err := s.Record("batch", "b1"); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("deleted record read: %v", err)
	}
	if recs, err := s.Records("batch"); err != nil || len(recs) != 0 {
		t.Fatalf("records after the delete: %q %v", recs, err)
	}
	// An empty record would read as its own tombstone: refused.
	if err := s.PutRecord("batch", "b2", []byte{}); !errors.Is(err, jsstore.ErrEmptyRecord) {
		t.Fatalf("empty record: %v, want ErrEmptyRecord", err)
	}
	if c := subjectCounts(t, nc, opts); len(c) != 1 {
		t.Fatalf("stream holds %v, want the record's subject only", c)
	}
}

// The sweep purges an expired task's subjects and leaves records alone, even one
// whose id is the task's.
func TestSweepLeavesRecords(t *testing.T) {
	srv, _ := startServer(t, "")
	nc := connect(t, srv)
	opts := freshOptions(300 * time.Millisecond)
	s := open(t, nc, opts)
	for _, kind := range []string{"t", "f", "batch"} {
		if err := s.PutRecord(kind, "task-1", []byte("kept "+kind)); err != nil {
			t.Fatal(err)
		}
	}
	finished := newTask("task-1", task.StateSucceeded)
	now := time.Now()
	finished.FinishedAt = &now
	mustSave(t, s, &task.Write{ID: finished.ID, Task: finished, Events: []*task.Event{event(1, "end")}})
	waitFor(t, "the sweep purges task-1", func() bool {
		c := subjectCounts(t, nc, opts)
		return c[opts.Prefix+".t.task-1"] == 0 && c[opts.Prefix+".f.task-1"] == 0
	})
	c := subjectCounts(t, nc, opts)
	if len(c) != 3 {
		t.Fatalf("stream holds %v after the sweep, want the three records", c)
	}
	for _, kind := range []string{"t", "f", "batch"} {
		if got, err := s.Record(kind, "task-1"); err != nil || !bytes.Equal(got, []byte("kept "+kind)) {
			t.Fatalf("record %s/task-1 after the sweep: %q %v", kind, got, err)
		}
	}
}

// A deposed leader's PutRecord is refused by the stream, as its task writes are,
// and stores nothing: neither a put nor a delete.
func TestDeposedLeaderPutRecordIsRefused(t *testing.T) {
	srv, _ := startServer(t, "")
	opts := freshOptions(0)
	a := elect(t, srv.ClientURL(), opts, "a", time.Minute) // a long lease: a believes it leads
	a.waitLead(t)
	if err := a.PutRecord("batch", "b1", []byte("before")); err != nil {
		t.Fatal(err)
	}
	nc := connect(t, srv)
	takeOver(t, nc, opts, lastLeaderSeq(t, nc, opts))
	if err := a.PutRecord("batch", "b1", []byte("after")); !errors.Is(err, jsstore.ErrNotLeader) {
		t.Fatalf("deposed leader's PutRecord: %v, want ErrNotLeader", err)
	}
	if err := a.PutRecord("batch", "b1", nil); !errors.Is(err, jsstore.ErrNotLeader) {
		t.Fatalf("deposed leader's delete: %v, want ErrNotLeader", err)
	}
	if got, err := a.Record("batch", "b1"); err != nil || string(got) != "before" {
		t.Fatalf("record after the deposed leader's writes: %q %v, want before", got, err)
	}
}
