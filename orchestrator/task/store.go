package task

import (
	"errors"
	"fmt"
	"io"

	"github.com/chiffon-dev/chiffon/output"
)

// ErrNotFound is returned for a task, or a record, the store does not hold.
var ErrNotFound = errors.New("task not found")

// ErrNotLeader is a store's refusal of a write while this orchestrator does not
// lead its group (the lease lapsed, or another took over): nothing was stored.
// The API answers it 503 with Retry-After: a client tries again, and meets the
// orchestrator that leads.
var ErrNotLeader = errors.New("this orchestrator does not lead: write not stored")

// ErrUnavailable is a store's refusal of a write it could not get to its
// storage for longer than it waits (no server answers for it): nothing was
// stored. The API answers it 503 with Retry-After.
var ErrUnavailable = errors.New("the task store is not reachable: write not stored")

// ErrEmptyRecord is returned by PutRecord for empty, non-nil data: nil deletes a
// record, and a record is never empty (JetStream's store marks a deleted record
// with an empty message).
var ErrEmptyRecord = errors.New("empty record")

// Store keeps every task, its events and its output, so that an orchestrator loses
// nothing across restarts. It is what the orchestrator needs of its storage, not
// what one database offers: package badgerstore keeps tasks in Badger, package
// memstore in memory for tests.
//
// Writes are asynchronous and ordered: Save queues a Write, and the writes commit
// in the order Save was called, each one whole. A reader sees a write once its done
// has run; the orchestrator reads a task's history only after its writes of that
// task are committed.
//
// Retention: a task whose record is saved in a final state is finished. It is kept
// for the store's retention from then on (set when the store is opened; 0 keeps
// finished tasks forever), then its record reads as absent: Task answers
// ErrNotFound, Tasks and Unfinished leave it out. Its events and output may stay a
// while longer (Badger's, up to an hour), unread: a reader learns of a task from its
// record. Unfinished tasks never expire.
//
// A Store is safe for concurrent use.
type Store interface {
	// Save queues w and returns at once, having read w: the caller may change
	// its record and events afterwards. done runs once w is committed, or with
	// the error that kept it out (a closed store's, a broken disk's); it may run
	// before Save returns, and runs on the store's committing goroutine in the
	// order of the Saves, so it must not wait for a commit (it may Save: Save
	// never waits), nor for anything that does.
	Save(w *Write, done func(error))
	// Flush commits the writes Save was told to hold (Write.MoreComing) without
	// waiting for the next Save. It does not wait for the commit.
	Flush()
	// Task returns task id's record, or ErrNotFound.
	Task(id string) (*Task, error)
	// Tasks returns the stored tasks that keep accepts (nil keeps all), newest
	// first by CreatedAt, at most limit of them (0: all). keep may change the task
	// it is given; the list holds it as changed.
	Tasks(keep func(*Task) bool, limit int) ([]*Task, error)
	// TaskIDs returns the ids of the stored tasks that part names (MatchesID;
	// part as ParseIDRef returns it), in order, at most limit of them (0: all):
	// how a short id or a prefix finds its task. It reads what Tasks reads, so
	// the retention bounds it; a store may scan every id.
	TaskIDs(part string, limit int) ([]string, error)
	// Unfinished returns the tasks whose record is not in a final state, oldest
	// first: the tasks an orchestrator resumes when it opens.
	Unfinished() ([]*Task, error)
	// Events calls fn with each stored event of task id with Seq > after, in Seq
	// order, until fn returns an error, which Events returns. A status event's
	// output is read back as it was saved. A task without events is no error.
	Events(id string, after int64, fn func(*Event) error) error
	// OutputSpans returns the byte ranges of task id's output held, as saved
	// (pieces may overlap or leave gaps), in offset order.
	OutputSpans(id string) ([]Span, error)
	// WriteOutput writes the output of task id held from byte 0 to w, up to the
	// first gap, and returns the number of bytes written.
	WriteOutput(id string, w io.Writer) (int64, error)
	// ReplaceOutput makes data the whole output of task id, and waits for the
	// commit. It is not ordered with Saves: the caller waits for its Saves of the
	// task that carry output first.
	ReplaceOutput(id, data string) error
	// Close commits what is queued or held, stops the store's background work and
	// releases it. A Save after Close fails.
	Close() error

	// PutRecord stores data as the record id of kind, replacing any record
	// stored there, or, with nil data, deletes it; it waits for the commit. Empty
	// non-nil data is refused (ErrEmptyRecord). Records
	// hold what is not a task and lives as long as the store: batches and
	// schedules. They do not expire; they are fenced as task writes are (a deposed
	// leader's PutRecord fails). kind and id are each one token of CheckKey's
	// alphabet.
	PutRecord(kind, id string, data []byte) error
	// Record returns the record id of kind, or ErrNotFound.
	Record(kind, id string) ([]byte, error)
	// Records returns every record of kind by id (an empty map when none).
	Records(kind string) (map[string][]byte, error)
}

// CheckKey returns an error unless s is a record kind or id a store can hold: 1 to
// 128 of the characters a-z A-Z 0-9 _ - (no '.', no '/', no white space, so it is
// one token of a NATS subject and one segment of a Badger key).
func CheckKey(s string) error {
	if s == "" || len(s) > 128 {
		return fmt.Errorf("record key %q: must be 1 to 128 characters", s)
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("record key %q: only a-z, A-Z, 0-9, '_' and '-' are allowed", s)
		}
	}
	return nil
}

// Write is one change to one task, committed whole.
type Write struct {
	// ID is the task's id.
	ID string
	// Task is the task's record as it is now, or nil to leave the stored record as
	// it was (a status changes only the history and the output; the next record
	// saved catches up). A record in a final state finishes the task: see Store.
	Task *Task
	// Events are new events of the task, numbered: a Seq already stored is
	// replaced.
	Events []*Event
	// Output is a piece of the task's output saved with the events; a piece
	// without data is none.
	Output Piece
	// MoreComing says the caller has more writes to make at once (it is handling
	// messages that arrived together): the store may hold this write, and commit
	// it with the next Save that does not say so, or at Flush, in one transaction.
	// A caller that sets it makes sure one of these follows.
	MoreComing bool
}

// Piece is a piece of a task's output, at its offset in the whole output.
type Piece struct {
	Offset int64
	Data   string
}

// Span is the byte range [Start, End) of a task's output.
type Span = output.Span
