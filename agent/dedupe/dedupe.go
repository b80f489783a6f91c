// Package dedupe holds what an agent keeps of each request, by request_id, so that it
// runs a request at most once: the Entry and the Cache that stores it. It imports
// nothing of the agent, so that the agent and each Cache (package badgercache keeps
// entries in Badger, package memcache in memory for tests) can import it.
package dedupe

import (
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

// States of an Entry.
const (
	// Running: the request was taken and its handler started (or is about to).
	Running = "running"
	// Finished: the request ended; the entry holds its result and its whole output.
	Finished = "finished"
)

// Entry is what the cache holds for one request_id.
type Entry struct {
	State     string    `json:"state"`
	TaskID    string    `json:"task_id"`
	WorkType  string    `json:"work_type"`
	StartedAt time.Time `json:"started_at"`
	// Result and ResultFields are the work_result's payload and x_custom_fields.
	Result       *envelope.WorkResult `json:"result,omitempty"`
	ResultFields map[string]any       `json:"result_fields,omitempty"`
	// OutputLen and OutputPieces describe the cached output.
	OutputLen    int64 `json:"output_len"`
	OutputPieces int   `json:"output_pieces"`
}

// Cache remembers, by request_id, whether a request is running or finished, and a
// finished request's result and output. It is what the agent needs of its storage:
// a lookup on every work_request, a running entry before a handler starts, a
// finished entry with the whole output when it ends, and that output read back for
// the replay of a duplicate.
//
// Expiry: an entry, and a finished entry's output, is kept for the cache's TTL (set
// when it is opened; the agent's dedupe_ttl) from its last write, then reads as
// absent: the request is new again. Badger counts the TTL in whole seconds, so an
// entry may go up to a second early or late.
//
// A Cache is safe for concurrent use.
type Cache interface {
	// Get returns the entry of requestID, or nil when there is none.
	Get(requestID string) (*Entry, error)
	// Start records requestID as running: it sets e.State to Running, stores e and
	// returns without waiting, having read e. done runs once the entry is committed,
	// or with the error that kept it out (a closed cache's, a broken disk's); it may
	// run before Start returns, on any goroutine, and must not block. Entries
	// started together may commit together.
	Start(requestID string, e *Entry, done func(error))
	// Finish records requestID as finished with e's result and out as its whole
	// output, and waits for the commit. It sets e.State to Finished, e.OutputLen and
	// e.OutputPieces. The entry and its output commit so that a finished entry read
	// back always has its whole output.
	Finish(requestID string, e *Entry, out string) error
	// EachPiece calls fn with each piece of the output of requestID's finished entry
	// e, in order, with its byte offset in the output, until fn returns an error,
	// which EachPiece returns. Pieces are split on rune boundaries, at most
	// envelope.MaxChunkSize bytes each, and there are e.OutputPieces of them; an
	// empty output has none.
	EachPiece(requestID string, e *Entry, fn func(offset int64, data string) error) error
	// Close commits what is pending and releases the cache. A write after Close
	// fails.
	Close() error
}
