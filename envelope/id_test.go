package envelope_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/chiffon-dev/chiffon/envelope"
)

// Ids are canonical lower-case UUIDv7s, each greater than the one before: keys made
// from them land at the end of Badger's memtable and tables, not all over them.
func TestNewIDIsTimeOrderedUUIDv7(t *testing.T) {
	prev := envelope.NewID()
	for range 10_000 {
		id := envelope.NewID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 || u.String() != id {
			t.Fatalf("NewID() = %q: not a canonical UUIDv7 (%v)", id, err)
		}
		if id <= prev {
			t.Fatalf("NewID() = %s after %s: not increasing", id, prev)
		}
		prev = id
	}
	e := envelope.New(envelope.Orchestrator, envelope.Infra, "", "", &envelope.Ping{})
	for _, id := range []string{e.MessageID, e.RequestID, e.TraceID} {
		if u, err := uuid.Parse(id); err != nil || u.Version() != 7 {
			t.Fatalf("New made id %q, want a UUIDv7", id)
		}
	}
}
