// Package badgerstore keeps an orchestrator's tasks, their events and their output
// in Badger: the task.Store an orchestrator opens in its data directory. It is the
// only part of the orchestrator that knows Badger, and it owns what tuning Badger
// takes: managed-mode commits (internal/kvstore), the group commit of writes made
// together (a Batcher, which also holds a write the caller says more follow), the
// TTLs that make retention, the hand-written JSON of stored records and the value
// log's garbage collection.
package badgerstore

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
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/kvstore"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/output"
	"github.com/dgraph-io/badger/v4"
)

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

// Options configures a Store.
type Options struct {
	// Retention is how long a finished task is kept (see task.Store); 0 keeps
	// finished tasks forever.
	Retention time.Duration
	// Logger receives Badger's warnings and errors; nil means slog.Default().
	Logger *slog.Logger
}

// Store keeps tasks, their events and their output in Badger. It implements
// task.Store.
type Store struct {
	db *kvstore.DB
	// w takes every task and event write: writes of tasks in flight together share
	// a transaction, and they commit in the order they were made.
	w *kvstore.Batcher
	// retention is the TTL of a finished task's keys. Events and output pieces are
	// written with retention+expireSlack from the start, so a task that ends within
	// expireSlack of its creation needs no rewrite: its keys expire at most
	// expireSlack after its record, never before it.
	retention time.Duration
	log       *slog.Logger

	mu     sync.Mutex
	closed bool
	// resumed holds the unfinished tasks found at open (Unfinished) until they end:
	// their keys were written by an earlier process, with a TTL that may not
	// outlive their record, or none.
	resumed map[string]bool

	wg   sync.WaitGroup // the garbage collection and the retention rewrites
	done chan struct{}
}

var _ task.Store = (*Store)(nil)

// expireSlack bounds how long after a finished task's record its events and output
// may remain, for a task that ended within expireSlack of its creation.
const expireSlack = time.Hour

// gcInterval is how often the value log's space is reclaimed.
const gcInterval = 10 * time.Minute

// liveTTL is the TTL of an event or output piece written before the task ends.
func (s *Store) liveTTL() time.Duration {
	if s.retention <= 0 {
		return 0 // nothing expires
	}
	return s.retention + expireSlack
}

// Open opens the store in dir, tuned to stay small in memory: an idle orchestrator
// holds a few MiB of memtables and caches, not Badger's default ~200 MiB. Close it.
func Open(dir string, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	bopts := kvstore.SmallOptions(dir, log).
		WithBaseTableSize(2 << 20).
		WithBlockCacheSize(4 << 20).
		WithIndexCacheSize(2 << 20).
		// Badger msyncs a full value log file in the write path; larger files make
		// that stall rarer (the mapping is virtual until written).
		WithValueLogFileSize(128 << 20).
		WithCompactL0OnClose(false)
	db, err := kvstore.Open(bopts)
	if err != nil {
		return nil, fmt.Errorf("open task store %s: %w", dir, err)
	}
	s := &Store{db: db, w: kvstore.NewBatcher(db), retention: opts.Retention, log: log,
		resumed: map[string]bool{}, done: make(chan struct{})}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); kvstore.RunGC(db.DB, gcInterval, s.done) }()
	return s, nil
}

// Close commits what is queued or held, waits for the retention rewrites under way
// and closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	s.w.Close()
	s.wg.Wait()
	return s.db.Close()
}

func setTTL(e *badger.Entry, ttl time.Duration) *badger.Entry {
	if ttl > 0 {
		return e.WithTTL(ttl)
	}
	return e
}

// Task returns task id's record, or task.ErrNotFound.
func (s *Store) Task(id string) (*task.Task, error) {
	var t task.Task
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(taskKey(id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return task.ErrNotFound
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

// Tasks returns the tasks keep accepts, newest first, at most limit (0: all).
func (s *Store) Tasks(keep func(*task.Task) bool, limit int) ([]*task.Task, error) {
	var out []*task.Task
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("t/"), PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var t task.Task
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &t) }); err != nil {
				return err
			}
			if keep == nil || keep(&t) {
				out = append(out, &t)
			}
		}
		return nil
	})
	slices.SortFunc(out, func(a, b *task.Task) int { return b.CreatedAt.Compare(a.CreatedAt) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

// TaskIDs returns the ids of the stored tasks that part names, in order, at
// most limit (0: all). It reads keys only: a prefix of an id seeks to its keys,
// a short id scans every task's key (expired ones are skipped).
func (s *Store) TaskIDs(part string, limit int) ([]string, error) {
	scan := []byte("t/")
	if strings.Contains(part, "-") {
		scan = taskKey(part) // only a prefix has a '-'
	}
	var out []string
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: scan})
		defer it.Close()
		for it.Rewind(); it.Valid() && (limit <= 0 || len(out) < limit); it.Next() {
			if id := string(it.Item().Key()[2:]); task.MatchesID(id, part) {
				out = append(out, id)
			}
		}
		return nil
	})
	return out, err
}

// Events calls fn for each stored event of task id with Seq > after, in order, with
// the output of status events read back from the output pieces.
func (s *Store) Events(id string, after int64, fn func(*task.Event) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		var pieces []task.StoredPiece
		loaded := false
		it := txn.NewIterator(badger.IteratorOptions{Prefix: eventPrefix(id)})
		defer it.Close()
		for it.Seek(numKey("e/", id, after+1)); it.Valid(); it.Next() {
			var ev task.Event
			se := task.StoredEvent{Event: &ev}
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
				ev.Status.Step.Output = task.SliceOutput(pieces, *ev.OutputOffset, se.OutputLen)
			}
			if err := fn(&ev); err != nil {
				return err
			}
		}
		return nil
	})
}

// loadPieces reads every output piece of task id, in offset order.
func loadPieces(txn *badger.Txn, id string) ([]task.StoredPiece, error) {
	var out []task.StoredPiece
	it := txn.NewIterator(badger.IteratorOptions{Prefix: outputPrefix(id)})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			return nil, err
		}
		out = append(out, task.StoredPiece{Start: keyNum(it.Item().Key()), Data: v})
	}
	return out, nil
}

// outputEntry is the store entry of a piece of output, or nil for no output.
func (s *Store) outputEntry(id string, p task.Piece) *badger.Entry {
	if p.Data == "" {
		return nil
	}
	return setTTL(badger.NewEntry(numKey("o/", id, p.Offset), kvstore.StringValue(p.Data)), s.liveTTL())
}

// ReplaceOutput makes data the whole output of task id.
func (s *Store) ReplaceOutput(id, data string) error {
	chunks := output.Split(data, envelope.MaxChunkSize)
	keep := make(map[int64]bool, len(chunks))
	for _, c := range chunks {
		keep[c.Range.Start] = true
	}
	old, err := s.pieceStarts(id)
	if err != nil {
		return err
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, start := range old {
		if !keep[start] {
			if err := wb.Delete(numKey("o/", id, start)); err != nil {
				return err
			}
		}
	}
	for _, c := range chunks {
		if err := wb.SetEntry(s.outputEntry(id, task.Piece{Offset: c.Range.Start, Data: c.Data})); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// OutputSpans lists the [start, end) ranges of the stored pieces of task id. It reads
// each piece: Badger's ValueSize only estimates a value's length.
func (s *Store) OutputSpans(id string) ([]task.Span, error) {
	var out []task.Span
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: outputPrefix(id)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			off := keyNum(it.Item().Key())
			err := it.Item().Value(func(v []byte) error {
				out = append(out, task.Span{Start: off, End: off + int64(len(v))})
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// pieceStarts lists the offsets of the stored pieces of task id, from their keys.
func (s *Store) pieceStarts(id string) ([]int64, error) {
	var out []int64
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: outputPrefix(id)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			out = append(out, keyNum(it.Item().Key()))
		}
		return nil
	})
	return out, err
}

// WriteOutput writes the contiguous output of task id from byte 0 to w, stopping at
// the first gap. It returns the number of bytes written.
func (s *Store) WriteOutput(id string, w io.Writer) (int64, error) {
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

// expire rewrites the keys of finished task id with the retention TTL, for a task
// that ran longer than expireSlack or was resumed after a restart (its keys may
// expire before its record, or never): its events before lastSeq and its output
// pieces. The task and its last event were written with the TTL by the final save.
// Events are read by key (their numbers are known): a prefix iterator seeks every
// table, which made this the orchestrator's costliest step for a short task.
func (s *Store) expire(id string, lastSeq int64) error {
	ttl := s.retention
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

// Save encodes w now and queues it behind the earlier writes; done runs once it is
// committed or has failed. A write with MoreComing is held for the next write or
// Flush (see kvstore.Batcher.Hold). A write that finishes a task which ran longer
// than expireSlack, or was resumed, is followed by a rewrite of its older keys with
// the retention TTL.
func (s *Store) Save(w *task.Write, done func(error)) {
	ttl := time.Duration(0)
	if w.Task != nil && w.Task.State.Final() {
		ttl = s.retention
	}
	entries, err := s.taskEntries(w.ID, w.Task, w.Events, ttl)
	if err != nil {
		done(err)
		return
	}
	if e := s.outputEntry(w.ID, w.Output); e != nil {
		entries = append(entries, e)
	}
	if ttl > 0 && s.needsExpiry(w.Task) {
		id, lastSeq, then := w.ID, lastSeq(w.Events), done
		done = func(err error) {
			if err == nil {
				s.expireLater(id, lastSeq)
			}
			then(err)
		}
	}
	if w.MoreComing {
		s.w.Hold(entries, done)
	} else {
		s.w.Write(entries, done)
	}
}

// Flush commits the held writes, if any.
func (s *Store) Flush() { s.w.Flush() }

// needsExpiry reports whether finished task t's events and output may outlive its
// record: it was resumed, or ran longer than expireSlack.
func (s *Store) needsExpiry(t *task.Task) bool {
	s.mu.Lock()
	resumed := s.resumed[t.ID]
	delete(s.resumed, t.ID)
	s.mu.Unlock()
	return resumed || time.Since(t.CreatedAt) > expireSlack
}

func lastSeq(evs []*task.Event) int64 {
	var n int64
	for _, ev := range evs {
		n = max(n, ev.Seq)
	}
	return n
}

// expireLater runs expire on a goroutine of the store's, unless the store is
// closing. It runs on the committing goroutine, which must not wait for it.
func (s *Store) expireLater(id string, lastSeq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.expire(id, lastSeq); err != nil {
			s.log.Warn("set retention on task", "task_id", id, "err", err)
		}
	}()
}

// Unfinished returns the tasks not in a final state, oldest first, and notes them as
// resumed (see needsExpiry).
func (s *Store) Unfinished() ([]*task.Task, error) {
	tasks, err := s.Tasks(func(t *task.Task) bool { return !t.State.Final() }, 0)
	if err != nil {
		return nil, err
	}
	slices.Reverse(tasks)
	s.mu.Lock()
	for _, t := range tasks {
		s.resumed[t.ID] = true
	}
	s.mu.Unlock()
	return tasks, nil
}

// EventVersions returns the commit timestamp of each stored event of task id, in
// order: events written in one transaction share it. For tests of write grouping.
func (s *Store) EventVersions(id string) ([]uint64, error) {
	var vs []uint64
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: eventPrefix(id)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			vs = append(vs, it.Item().Version())
		}
		return nil
	})
	return vs, err
}

// taskEntries are the entries of task id's record (unless nil) and evs: with ttl (a
// finished task), or the record without one and the events with liveTTL.
func (s *Store) taskEntries(id string, record *task.Task, evs []*task.Event, ttl time.Duration) ([]*badger.Entry, error) {
	entries := make([]*badger.Entry, 0, len(evs)+1)
	if record != nil {
		tb, err := task.MarshalStored(record)
		if err != nil {
			return nil, err
		}
		entries = append(entries, setTTL(badger.NewEntry(taskKey(id), tb), ttl))
	}
	for _, ev := range evs {
		eb, err := task.MarshalStored(task.StoredForm(ev))
		if err != nil {
			return nil, err
		}
		entries = append(entries, setTTL(badger.NewEntry(numKey("e/", id, ev.Seq), eb), cmp.Or(ttl, s.liveTTL())))
	}
	return entries, nil
}
