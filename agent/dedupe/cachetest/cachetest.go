// Package cachetest holds the contract tests every dedupe.Cache passes: a cache's own
// tests call Run with a function that opens a fresh cache of its kind.
package cachetest

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chiffon-dev/chiffon/agent/dedupe"
	"github.com/chiffon-dev/chiffon/envelope"
)

// Open opens an empty cache whose entries expire ttl after their last write. Run
// closes it.
type Open func(t *testing.T, ttl time.Duration) dedupe.Cache

// wait bounds every wait for a commit.
const wait = 10 * time.Second

// Run runs the contract tests against the caches open opens.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		fn   func(*testing.T, Open)
	}{
		{"UnknownRequestIsNil", testUnknownRequestIsNil},
		{"StartThenGetRunning", testStartThenGetRunning},
		{"StartReadsEntryAtOnce", testStartReadsEntryAtOnce},
		{"FinishReplacesRunning", testFinishReplacesRunning},
		{"OutputReadBackInPieces", testOutputReadBackInPieces},
		{"EachPieceStopsAtError", testEachPieceStopsAtError},
		{"EntriesExpireAfterTTL", testEntriesExpireAfterTTL},
		{"WritesAfterCloseFail", testWritesAfterCloseFail},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

func openCache(t *testing.T, open Open, ttl time.Duration) dedupe.Cache {
	t.Helper()
	c := open(t, ttl)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// start starts e as requestID and waits for its commit.
func start(t *testing.T, c dedupe.Cache, requestID string, e *dedupe.Entry) {
	t.Helper()
	errc := make(chan error, 1)
	c.Start(requestID, e, func(err error) { errc <- err })
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("start %s: %v", requestID, err)
		}
	case <-time.After(wait):
		t.Fatalf("start %s: not committed within %s", requestID, wait)
	}
}

func get(t *testing.T, c dedupe.Cache, requestID string) *dedupe.Entry {
	t.Helper()
	e, err := c.Get(requestID)
	if err != nil {
		t.Fatalf("get %s: %v", requestID, err)
	}
	return e
}

var startedAt = time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.UTC)

func newEntry() *dedupe.Entry {
	return &dedupe.Entry{TaskID: envelope.NewID(), WorkType: "echo", StartedAt: startedAt}
}

// assertEntry fails unless got is want, its time compared as an instant.
func assertEntry(t *testing.T, got, want *dedupe.Entry) {
	t.Helper()
	if got == nil {
		t.Fatalf("no entry, want %+v", want)
	}
	g, w := *got, *want
	if !g.StartedAt.Equal(w.StartedAt) {
		t.Fatalf("started_at %s, want %s", g.StartedAt, w.StartedAt)
	}
	g.StartedAt, w.StartedAt = time.Time{}, time.Time{}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("entry\n%+v\nwant\n%+v", g, w)
	}
}

func testUnknownRequestIsNil(t *testing.T, open Open) {
	c := openCache(t, open, time.Hour)
	if e := get(t, c, envelope.NewID()); e != nil {
		t.Fatalf("unknown request: %+v, want nil", e)
	}
}

func testStartThenGetRunning(t *testing.T, open Open) {
	c := openCache(t, open, time.Hour)
	id, e := envelope.NewID(), newEntry()
	start(t, c, id, e)
	if e.State != dedupe.Running {
		t.Fatalf("Start left state %q, want %q", e.State, dedupe.Running)
	}
	assertEntry(t, get(t, c, id), e)
	if other := get(t, c, envelope.NewID()); other != nil {
		t.Fatalf("another request: %+v, want nil", other)
	}
}

func testStartReadsEntryAtOnce(t *testing.T, open Open) {
	c := openCache(t, open, time.Hour)
	id, e := envelope.NewID(), newEntry()
	want := *e
	want.State = dedupe.Running
	errc := make(chan error, 1)
	c.Start(id, e, func(err error) { errc <- err })
	e.TaskID, e.WorkType = "changed", "changed" // after Start returned
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatalf("not committed within %s", wait)
	}
	assertEntry(t, get(t, c, id), &want)
}

func testFinishReplacesRunning(t *testing.T, open Open) {
	c := openCache(t, open, time.Hour)
	id, e := envelope.NewID(), newEntry()
	start(t, c, id, e)
	e.Result = &envelope.WorkResult{TaskID: e.TaskID, Status: envelope.ResultFailed, ExitCode: 3, Output: "tail <b>&",
		ResourcesUsed: &envelope.ResourcesUsed{DurationSeconds: 2, CPUTimeMS: 40}}
	e.ResultFields = map[string]any{"structured": map[string]any{"k": "v"}}
	const out = "line <1>\nline 2\n"
	if err := c.Finish(id, e, out); err != nil {
		t.Fatal(err)
	}
	if e.State != dedupe.Finished || e.OutputLen != int64(len(out)) || e.OutputPieces != 1 {
		t.Fatalf("Finish left state %q, output_len %d, output_pieces %d; want %q, %d, 1",
			e.State, e.OutputLen, e.OutputPieces, dedupe.Finished, len(out))
	}
	got := get(t, c, id)
	assertEntry(t, got, e)
	if s := readOutput(t, c, id, got); s != out {
		t.Fatalf("output %q, want %q", s, out)
	}
}

// readOutput reads e's output back with EachPiece and checks its pieces.
func readOutput(t *testing.T, c dedupe.Cache, id string, e *dedupe.Entry) string {
	t.Helper()
	var b strings.Builder
	n := 0
	err := c.EachPiece(id, e, func(off int64, data string) error {
		if off != int64(b.Len()) {
			t.Fatalf("piece %d at offset %d, want %d", n, off, b.Len())
		}
		if len(data) == 0 || len(data) > envelope.MaxChunkSize {
			t.Fatalf("piece %d of %d bytes, want 1 to %d", n, len(data), envelope.MaxChunkSize)
		}
		if !utf8.ValidString(data) {
			t.Fatalf("piece %d not split on a rune boundary", n)
		}
		b.WriteString(data)
		n++
		return nil
	})
	if err != nil {
		t.Fatalf("EachPiece: %v", err)
	}
	if n != e.OutputPieces || int64(b.Len()) != e.OutputLen {
		t.Fatalf("%d pieces, %d bytes; the entry says %d, %d", n, b.Len(), e.OutputPieces, e.OutputLen)
	}
	return b.String()
}

func testOutputReadBackInPieces(t *testing.T, open Open) {
	c := openCache(t, open, time.Hour)
	// Three-byte runes across the piece boundaries, and an output too large for one
	// Badger transaction.
	for name, out := range map[string]string{
		"empty":     "",
		"runes":     strings.Repeat("ab€", envelope.MaxChunkSize/5*3),
		"16_pieces": strings.Repeat("0123456789abcdef", envelope.MaxChunkSize),
	} {
		t.Run(name, func(t *testing.T) {
			id, e := envelope.NewID(), newEntry()
			e.Result = &envelope.WorkResult{TaskID: e.TaskID, Status: envelope.ResultSuccess}
			if err := c.Finish(id, e, out); err != nil {
				t.Fatal(err)
			}
			got := get(t, c, id)
			assertEntry(t, got, e)
			if s := readOutput(t, c, id, got); s != out {
				t.Fatalf("output of %d bytes read back as %d bytes, or different", len(out), len(s))
			}
		})
	}
}

func testEachPieceStopsAtError(t *testing.T, open Open) {
	c := openCache(t, open, time.Hour)
	id, e := envelope.NewID(), newEntry()
	if err := c.Finish(id, e, strings.Repeat("x", 3*envelope.MaxChunkSize)); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	calls := 0
	err := c.EachPiece(id, get(t, c, id), func(int64, string) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("EachPiece returned %v after %d calls, want fn's error after 1", err, calls)
	}
}

func testEntriesExpireAfterTTL(t *testing.T, open Open) {
	// Badger expires entries on whole seconds: a TTL of 2s keeps an entry at least
	// 1s, time enough to read it back.
	const ttl = 2 * time.Second
	c := openCache(t, open, ttl)
	running, finished := envelope.NewID(), envelope.NewID()
	start(t, c, running, newEntry())
	if err := c.Finish(finished, newEntry(), "out"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{running, finished} {
		if get(t, c, id) == nil {
			t.Fatalf("%s gone at once", id)
		}
	}
	deadline := time.Now().Add(3 * ttl)
	for get(t, c, running) != nil || get(t, c, finished) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("entries still there %s after they were written, with a TTL of %s", 3*ttl, ttl)
		}
		time.Sleep(50 * time.Millisecond) // polling for the expiry, within the deadline
	}
	// The request is new again.
	start(t, c, finished, newEntry())
	if e := get(t, c, finished); e == nil || e.State != dedupe.Running {
		t.Fatalf("started again after expiry: %+v", e)
	}
}

func testWritesAfterCloseFail(t *testing.T, open Open) {
	c := open(t, time.Hour)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	c.Start(envelope.NewID(), newEntry(), func(err error) { errc <- err })
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("Start after Close succeeded")
		}
	case <-time.After(wait):
		t.Fatalf("Start after Close: done not called within %s", wait)
	}
	if err := c.Finish(envelope.NewID(), newEntry(), "out"); err == nil {
		t.Fatal("Finish after Close succeeded")
	}
}
