package orchestrator

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/jsonw"
	"github.com/chiffon-dev/chiffon/internal/kvstore"
	"github.com/chiffon-dev/chiffon/output"
	"github.com/dgraph-io/badger/v4"
)

// ErrNotFound is returned for a task the store does not hold.
var ErrNotFound = errors.New("task not found")

// Keys: t/<id> the task, e/<id>/<seq> its events, o/<id>/<offset> its output pieces.
// Numbers are big-endian so that keys sort in numeric order.
func taskKey(id string) []byte { return []byte("t/" + id) }

func numKey(prefix, id string, n int64) []byte {
	k := make([]byte, 0, len(prefix)+len(id)+10)
	k = append(k, prefix...)
	k = append(k, id...)
	k = append(k, '/')
	return binary.BigEndian.AppendUint64(k, uint64(n))
}

func keyNum(k []byte) int64 { return int64(binary.BigEndian.Uint64(k[len(k)-8:])) }

func eventPrefix(id string) []byte  { return []byte("e/" + id + "/") }
func outputPrefix(id string) []byte { return []byte("o/" + id + "/") }

// store keeps tasks, their events and their output in Badger.
type store struct {
	db *kvstore.DB
	// w takes every task and event write: writes of tasks in flight together share
	// a transaction, and they commit in the order they were made.
	w *kvstore.Batcher
	// retention is the TTL of a finished task's keys. Events and output pieces are
	// written with retention+expireSlack from the start, so a task that ends within
	// expireSlack of its creation needs no rewrite: its keys expire at most
	// expireSlack after its record, never before it.
	retention time.Duration
}

// expireSlack bounds how long after a finished task's record its events and output
// may remain, for a task that ended within expireSlack of its creation.
const expireSlack = time.Hour

// liveTTL is the TTL of an event or output piece written before the task ends.
func (s *store) liveTTL() time.Duration {
	if s.retention <= 0 {
		return 0 // nothing expires
	}
	return s.retention + expireSlack
}

// openStore opens the Badger store in dir, tuned to stay small in memory: an idle
// orchestrator holds a few MiB of memtables and caches, not Badger's default ~200 MiB.
func openStore(dir string, log *slog.Logger) (*store, error) {
	opts := kvstore.SmallOptions(dir, log).
		WithBaseTableSize(2 << 20).
		WithBlockCacheSize(4 << 20).
		WithIndexCacheSize(2 << 20).
		// Badger msyncs a full value log file in the write path; larger files make
		// that stall rarer (the mapping is virtual until written).
		WithValueLogFileSize(128 << 20).
		WithCompactL0OnClose(false)
	db, err := kvstore.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open task store %s: %w", dir, err)
	}
	return &store{db: db, w: kvstore.NewBatcher(db)}, nil
}

func (s *store) close() error {
	s.w.Close()
	return s.db.Close()
}

func setTTL(e *badger.Entry, ttl time.Duration) *badger.Entry {
	if ttl > 0 {
		return e.WithTTL(ttl)
	}
	return e
}

func (s *store) getTask(id string) (*Task, error) {
	var t Task
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(taskKey(id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return json.Unmarshal(v, &t) })
	})
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// listTasks returns the tasks keep accepts, newest first, at most limit (0: all).
func (s *store) listTasks(keep func(*Task) bool, limit int) ([]*Task, error) {
	var out []*Task
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("t/"), PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var t Task
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &t) }); err != nil {
				return err
			}
			if keep == nil || keep(&t) {
				out = append(out, &t)
			}
		}
		return nil
	})
	slices.SortFunc(out, func(a, b *Task) int { return b.CreatedAt.Compare(a.CreatedAt) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

// storedEvent is an Event as stored. A status event's output is not stored twice:
// the output piece written in the same transaction holds it, and OutputLen says how
// many bytes to read back at OutputOffset.
type storedEvent struct {
	*Event
	OutputLen int64 `json:"output_len,omitempty"`
}

// storedForm returns what to store for ev: ev itself, or a copy without the output
// of a status whose output is stored as a piece at ev.OutputOffset.
func storedForm(ev *Event) any {
	if ev.Status == nil || ev.Status.Step.Output == "" || ev.OutputOffset == nil {
		return ev
	}
	st, c := *ev.Status, *ev
	st.Step.Output = ""
	c.Status = &st
	return storedEvent{Event: &c, OutputLen: int64(len(ev.Status.Step.Output))}
}

// events calls fn for each stored event of task id with Seq > after, in order, with
// the output of status events read back from the output pieces.
func (s *store) events(id string, after int64, fn func(*Event) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		var pieces []storedPiece
		loaded := false
		it := txn.NewIterator(badger.IteratorOptions{Prefix: eventPrefix(id)})
		defer it.Close()
		for it.Seek(numKey("e/", id, after+1)); it.Valid(); it.Next() {
			var ev Event
			se := storedEvent{Event: &ev}
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &se) }); err != nil {
				return err
			}
			if se.OutputLen > 0 && ev.Status != nil && ev.OutputOffset != nil {
				if !loaded {
					var err error
					if pieces, err = loadPieces(txn, id); err != nil {
						return err
					}
					loaded = true
				}
				ev.Status.Step.Output = sliceOutput(pieces, *ev.OutputOffset, se.OutputLen)
			}
			if err := fn(&ev); err != nil {
				return err
			}
		}
		return nil
	})
}

// storedPiece is one stored piece of output.
type storedPiece struct {
	start int64
	data  []byte
}

// loadPieces reads every output piece of task id, in offset order.
func loadPieces(txn *badger.Txn, id string) ([]storedPiece, error) {
	var out []storedPiece
	it := txn.NewIterator(badger.IteratorOptions{Prefix: outputPrefix(id)})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			return nil, err
		}
		out = append(out, storedPiece{keyNum(it.Item().Key()), v})
	}
	return out, nil
}

// sliceOutput returns bytes [off, off+n) of the output held in pieces, stopping at a
// gap.
func sliceOutput(pieces []storedPiece, off, n int64) string {
	var b strings.Builder
	pos, end := off, off+n
	for _, p := range pieces {
		pend := p.start + int64(len(p.data))
		if pend <= pos {
			continue
		}
		if p.start > pos || pos >= end {
			break
		}
		take := min(pend, end)
		b.Write(p.data[pos-p.start : take-p.start])
		pos = take
	}
	return b.String()
}

// outputEntry is the store entry of one piece of output at its offset in the whole
// output, or nil for no output.
func (s *store) outputEntry(id string, offset int64, data string) *badger.Entry {
	if data == "" {
		return nil
	}
	return setTTL(badger.NewEntry(numKey("o/", id, offset), kvstore.StringValue(data)), s.liveTTL())
}

// replaceOutput makes data the whole output of task id.
func (s *store) replaceOutput(id, data string) error {
	chunks := output.Split(data, envelope.MaxChunkSize)
	keep := make(map[int64]bool, len(chunks))
	for _, c := range chunks {
		keep[c.Range.Start] = true
	}
	old, err := s.outputPieces(id)
	if err != nil {
		return err
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, p := range old {
		if !keep[p.Start] {
			if err := wb.Delete(numKey("o/", id, p.Start)); err != nil {
				return err
			}
		}
	}
	for _, c := range chunks {
		if err := wb.SetEntry(s.outputEntry(id, c.Range.Start, c.Data)); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// outputPieces lists the [start, end) ranges of the stored pieces of task id.
func (s *store) outputPieces(id string) ([]output.Span, error) {
	var out []output.Span
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: outputPrefix(id)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			off := keyNum(it.Item().Key())
			out = append(out, output.Span{Start: off, End: off + it.Item().ValueSize()})
		}
		return nil
	})
	return out, err
}

// writeOutput writes the contiguous output of task id from byte 0 to w, stopping at
// the first gap. It returns the number of bytes written.
func (s *store) writeOutput(id string, w io.Writer) (int64, error) {
	var n int64
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: outputPrefix(id)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			off := keyNum(it.Item().Key())
			if off > n {
				return nil // a gap
			}
			err := it.Item().Value(func(v []byte) error {
				if end := off + int64(len(v)); end > n {
					if _, err := w.Write(v[n-off:]); err != nil {
						return err
					}
					n = end
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// expire rewrites the keys of finished task id with ttl, for a task that ran longer
// than expireSlack or was resumed after a restart (its keys may expire before its
// record, or never): its events before lastSeq and, when withOutput, its output
// pieces. The task and its
// last event were written with the TTL by the final save. Events are read by key
// (their numbers are known): a prefix iterator seeks every table, which made this
// the orchestrator's costliest step for a short task.
func (s *store) expire(id string, ttl time.Duration, lastSeq int64, withOutput bool) error {
	if ttl <= 0 {
		return nil
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	rewrite := func(item *badger.Item) error {
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		return wb.SetEntry(badger.NewEntry(item.KeyCopy(nil), v).WithTTL(ttl))
	}
	err := s.db.View(func(txn *badger.Txn) error {
		for seq := int64(1); seq < lastSeq; seq++ {
			item, err := txn.Get(numKey("e/", id, seq))
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err == nil {
				err = rewrite(item)
			}
			if err != nil {
				return err
			}
		}
		if !withOutput {
			return nil
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: outputPrefix(id)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := rewrite(it.Item()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return wb.Flush()
}

// badgerLogger passes Badger's warnings and errors to slog and drops its chatter.
// saveTask writes t and its events in one transaction and waits for the commit.
func (s *store) saveTask(t *Task, evs []*Event, ttl time.Duration) error {
	entries, err := s.taskEntries(t.ID, t, evs, ttl)
	if err != nil {
		return err
	}
	return s.w.WriteWait(entries...)
}

// saveTaskAsync is saveTask without waiting, with extra entries (nil ones skipped)
// in the same transaction, and without the task's record when record is nil: the
// record and evs are encoded now, the write is queued behind the earlier ones, and
// done runs once it is committed or has failed. A held write waits for the next
// write or Kick (see kvstore.Batcher.Hold).
func (s *store) saveTaskAsync(id string, record *Task, evs []*Event, ttl time.Duration, hold bool, done func(error), extra ...*badger.Entry) error {
	entries, err := s.taskEntries(id, record, evs, ttl)
	if err != nil {
		return err
	}
	for _, e := range extra {
		if e != nil {
			entries = append(entries, e)
		}
	}
	if hold {
		s.w.Hold(entries, done)
	} else {
		s.w.Write(entries, done)
	}
	return nil
}

// taskEntries are the entries of task id's record (unless nil) and evs: with ttl (a
// finished task), or the record without one and the events with liveTTL.
func (s *store) taskEntries(id string, record *Task, evs []*Event, ttl time.Duration) ([]*badger.Entry, error) {
	entries := make([]*badger.Entry, 0, len(evs)+1)
	if record != nil {
		tb, err := marshalStored(record)
		if err != nil {
			return nil, err
		}
		entries = append(entries, setTTL(badger.NewEntry(taskKey(id), tb), ttl))
	}
	for _, ev := range evs {
		eb, err := marshalStored(storedForm(ev))
		if err != nil {
			return nil, err
		}
		entries = append(entries, setTTL(badger.NewEntry(numKey("e/", id, ev.Seq), eb), cmp.Or(ttl, s.liveTTL())))
	}
	return entries, nil
}

// marshalStored is json.Marshal without HTML escaping: output text such as "<200>" is
// stored as written rather than as \u003c escapes (readers decode both alike). Task
// records and events, nearly every write, are written by hand (see storedjson.go);
// anything else, or a record the hand-written path gives up on, goes through
// encoding/json.
func marshalStored(v any) ([]byte, error) {
	if b, ok := encodeStored(v); ok {
		return b, nil
	}
	return jsonw.AppendValue(nil, v)
}
