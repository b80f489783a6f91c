// The contract tests of the records a store keeps by kind and id (PutRecord,
// Record, Records).

package storetest

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

func putRecord(t *testing.T, s task.Store, kind, id string, data []byte) {
	t.Helper()
	if err := s.PutRecord(kind, id, data); err != nil {
		t.Fatalf("put record %s/%s: %v", kind, id, err)
	}
}

// wantRecord fails t unless the record id of kind holds want.
func wantRecord(t *testing.T, s task.Store, kind, id string, want []byte) {
	t.Helper()
	got, err := s.Record(kind, id)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("record %s/%s = %q, %v; want %q", kind, id, got, err, want)
	}
}

// wantNoRecord fails t unless the record id of kind is absent.
func wantNoRecord(t *testing.T, s task.Store, kind, id string) {
	t.Helper()
	if got, err := s.Record(kind, id); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("record %s/%s = %q, %v; want ErrNotFound", kind, id, got, err)
	}
}

// wantRecords fails t unless the records of kind are exactly want.
func wantRecords(t *testing.T, s task.Store, kind string, want map[string][]byte) {
	t.Helper()
	got, err := s.Records(kind)
	if err != nil {
		t.Fatalf("records of %s: %v", kind, err)
	}
	if got == nil || !maps.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("records of %s = %q, want %q", kind, got, want)
	}
}

// Records are kept by kind and id, read back byte for byte, listed by kind only,
// replaced, and deleted with nil data; keys outside task.CheckKey's alphabet are
// refused and store nothing.
func testRecordsPutReadListDelete(t *testing.T, open Open) {
	s := openStore(t, open, 0)
	wantRecords(t, s, "batch", map[string][]byte{})
	wantNoRecord(t, s, "batch", "b1")

	b1 := []byte(`{"n":1,"html":"<a&b>"}`)
	b2 := []byte{0, 1, 2, '.', '*', '>', 0xff, '\n'} // not text: stored as given
	long := strings.Repeat("x", 128)                 // the longest key
	buf := slices.Clone(b1)
	putRecord(t, s, "batch", "b1", buf)
	buf[0] = 'X' // the store kept its own copy
	putRecord(t, s, "batch", "b2", b2)
	putRecord(t, s, "schedule", "b1", []byte("other kind, same id"))
	putRecord(t, s, "a", "b", []byte("kind a")) // its key's prefix is another kind's
	putRecord(t, s, long, long, []byte("long"))
	wantRecord(t, s, "batch", "b1", b1)
	wantRecord(t, s, "batch", "b2", b2)
	wantRecord(t, s, "schedule", "b1", []byte("other kind, same id"))
	wantRecord(t, s, long, long, []byte("long"))
	wantNoRecord(t, s, "batch", "b3")
	wantNoRecord(t, s, "batc", "b1")
	if got, _ := s.Record("batch", "b1"); len(got) > 0 {
		got[0] = 'Y' // the caller's copy
	}
	wantRecord(t, s, "batch", "b1", b1)
	wantRecords(t, s, "batch", map[string][]byte{"b1": b1, "b2": b2})
	wantRecords(t, s, "schedule", map[string][]byte{"b1": []byte("other kind, same id")})
	wantRecords(t, s, "batc", map[string][]byte{})
	if err := s.PutRecord("batch", "b1", []byte{}); !errors.Is(err, task.ErrEmptyRecord) {
		t.Fatalf("an empty record: %v, want ErrEmptyRecord", err)
	}
	wantRecord(t, s, "batch", "b1", b1)
	if list, err := s.Tasks(nil, 0); err != nil || len(list) != 0 {
		t.Fatalf("tasks %v %v: records are no tasks", list, err)
	}
	if list, err := s.Unfinished(); err != nil || len(list) != 0 {
		t.Fatalf("unfinished %v %v: records are no tasks", list, err)
	}

	b1v2 := []byte(`{"n":2}`) // shorter than what it replaces
	putRecord(t, s, "batch", "b1", b1v2)
	wantRecord(t, s, "batch", "b1", b1v2)
	wantRecords(t, s, "batch", map[string][]byte{"b1": b1v2, "b2": b2})

	putRecord(t, s, "batch", "b1", nil)
	wantNoRecord(t, s, "batch", "b1")
	wantRecords(t, s, "batch", map[string][]byte{"b2": b2})
	wantRecord(t, s, "schedule", "b1", []byte("other kind, same id"))
	putRecord(t, s, "batch", "b1", nil) // deleting what is not there
	putRecord(t, s, "batch", "never", nil)
	wantRecords(t, s, "batch", map[string][]byte{"b2": b2})
	putRecord(t, s, "batch", "b1", b1) // put again after the delete
	wantRecord(t, s, "batch", "b1", b1)
	wantRecords(t, s, "batch", map[string][]byte{"b1": b1, "b2": b2})

	wantBadKeysRefused(t, s, "", ".", "a.b", "a/b", "a b", "*", ">", "a\n", "é", long+"x")
	// Nothing of the refused writes is stored, under any kind they could be
	// mistaken for.
	wantRecords(t, s, "batch", map[string][]byte{"b1": b1, "b2": b2})
	wantRecords(t, s, "a", map[string][]byte{"b": []byte("kind a")})
	wantRecords(t, s, "x", map[string][]byte{})
}

// wantBadKeysRefused fails t unless every put, delete and read with one of keys as
// the kind or the id is refused.
func wantBadKeysRefused(t *testing.T, s task.Store, keys ...string) {
	t.Helper()
	for _, bad := range keys {
		if err := s.PutRecord(bad, "x", []byte("bad kind")); err == nil {
			t.Errorf("PutRecord with kind %q succeeded", bad)
		}
		if err := s.PutRecord("batch", bad, []byte("bad id")); err == nil {
			t.Errorf("PutRecord with id %q succeeded", bad)
		}
		if err := s.PutRecord("batch", bad, nil); err == nil {
			t.Errorf("delete with id %q succeeded", bad)
		}
		if _, err := s.Record(bad, "x"); err == nil {
			t.Errorf("Record with kind %q succeeded", bad)
		}
		if _, err := s.Record("batch", bad); err == nil {
			t.Errorf("Record with id %q succeeded", bad)
		}
		if got, err := s.Records(bad); err == nil {
			t.Errorf("Records of kind %q = %q, want an error", bad, got)
		}
	}
}

// Records never expire: one is still there after a finished task, saved after it,
// expired.
func testRecordsSurviveRetention(t *testing.T, open Open) {
	const retention = 2 * time.Second // Badger expires keys on whole seconds
	s := openStore(t, open, retention)
	done := newTask(1, task.StateSucceeded)
	done.CreatedAt = time.Now()
	// A record named as the task is, under the kinds a store may keep tasks by.
	for _, kind := range []string{"t", "f", "batch"} {
		putRecord(t, s, kind, done.ID, []byte("kept "+kind))
	}
	save(t, s, &task.Write{ID: done.ID, Task: done, Events: []*task.Event{event(1, "end")}, Output: task.Piece{Data: "out"}})
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
	for _, kind := range []string{"t", "f", "batch"} {
		wantRecord(t, s, kind, done.ID, []byte("kept "+kind))
		wantRecords(t, s, kind, map[string][]byte{done.ID: []byte("kept " + kind)})
	}
}

// PutRecord after Close fails, as Save does: a put and a delete.
func testRecordAfterCloseFails(t *testing.T, open Open) {
	s := open(t, 0)
	putRecord(t, s, "batch", "b1", []byte("before"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{[]byte("after"), nil} {
		errc := make(chan error, 1)
		go func() { errc <- s.PutRecord("batch", "b1", data) }()
		select {
		case err := <-errc:
			if err == nil {
				t.Fatalf("PutRecord(%q) after Close succeeded", data)
			}
		case <-time.After(wait):
			t.Fatalf("PutRecord(%q) after Close never answered", data)
		}
	}
}
