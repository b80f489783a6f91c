// Package memstore keeps an orchestrator's tasks in memory: a task.Store for tests
// that need no restart from disk. It keeps the contract badgerstore keeps (the
// shared tests in task/storetest prove both) and commits each write at once.
package memstore

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/output"
)

// ErrClosed is the error of a write to a closed Store.
var ErrClosed = errors.New("memstore: store closed")

// Store is a task.Store in memory. Records and events are kept encoded, so that a
// caller changing what it saved changes nothing stored.
type Store struct {
	mu    sync.Mutex
	tasks table
	// records are the records (task.Store.PutRecord) by kind, then id; they never
	// expire.
	records map[string]map[string][]byte
	closed  bool
	broken  error // FailWrites' error
	// dones are the done functions of committed writes, run in order by loop: a
	// done never runs before its Save returns, as with a store that commits on a
	// goroutine of its own.
	dones   []func()
	wake    chan struct{}
	stopped chan struct{}
}

var _ task.Store = (*Store)(nil)

// table is the tasks by id, and how long a finished one is kept. It is not safe
// for concurrent use: Store's methods use it under Store.mu.
type table struct {
	byID      map[string]*stored
	retention time.Duration
}

// stored is one task.
type stored struct {
	record   []byte
	created  time.Time
	finished time.Time // zero while unfinished
	events   map[int64][]byte
	output   map[int64]string // pieces by offset
}

// New returns an empty Store that keeps finished tasks for retention (0: forever).
// Close it.
func New(retention time.Duration) *Store {
	s := &Store{tasks: table{byID: map[string]*stored{}, retention: retention}, records: map[string]map[string][]byte{}, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go s.loop()
	return s
}

// FailWrites makes every later write fail with err, as a broken disk would; reads
// still work. For tests of the orchestrator's failure paths.
func (s *Store) FailWrites(err error) {
	s.mu.Lock()
	s.broken = err
	s.mu.Unlock()
}

// Save commits w at once; done runs on the store's goroutine, in order.
func (s *Store) Save(w *task.Write, done func(error)) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		go done(ErrClosed)
		return
	}
	err := s.broken
	if err == nil {
		err = s.tasks.apply(w)
	}
	s.dones = append(s.dones, func() { done(err) })
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// apply stores w whole, or nothing of it.
func (tb table) apply(w *task.Write) error {
	var record []byte
	if w.Task != nil {
		var err error
		if record, err = json.Marshal(w.Task); err != nil {
			return err
		}
	}
	events := make(map[int64][]byte, len(w.Events))
	for _, ev := range w.Events {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		events[ev.Seq] = b
	}
	st := tb.live(w.ID)
	if st == nil {
		st = &stored{events: map[int64][]byte{}, output: map[int64]string{}}
		tb.byID[w.ID] = st
	}
	if record != nil {
		st.record, st.created = record, w.Task.CreatedAt
		if w.Task.State.Final() && st.finished.IsZero() {
			st.finished = time.Now()
		}
	}
	maps.Copy(st.events, events)
	if w.Output.Data != "" {
		st.output[w.Output.Offset] = w.Output.Data
	}
	return nil
}

// live returns task id unless it is absent or expired; an expired one is dropped.
func (tb table) live(id string) *stored {
	st := tb.byID[id]
	if st != nil && tb.retention > 0 && !st.finished.IsZero() && time.Since(st.finished) >= tb.retention {
		delete(tb.byID, id)
		return nil
	}
	return st
}

// Flush does nothing: every write is committed at once.
func (s *Store) Flush() {}

// Task returns task id's record, or task.ErrNotFound.
func (s *Store) Task(id string) (*task.Task, error) {
	s.mu.Lock()
	st := s.tasks.live(id)
	var record []byte
	if st != nil {
		record = st.record
	}
	s.mu.Unlock()
	if record == nil {
		return nil, task.ErrNotFound
	}
	var t task.Task
	if err := json.Unmarshal(record, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Tasks returns the tasks keep accepts, newest first, at most limit (0: all).
func (s *Store) Tasks(keep func(*task.Task) bool, limit int) ([]*task.Task, error) {
	s.mu.Lock()
	var records [][]byte
	for id := range s.tasks.byID {
		if st := s.tasks.live(id); st != nil && st.record != nil {
			records = append(records, st.record)
		}
	}
	s.mu.Unlock()
	var out []*task.Task
	for _, b := range records {
		var t task.Task
		if err := json.Unmarshal(b, &t); err != nil {
			return nil, err
		}
		if keep == nil || keep(&t) {
			out = append(out, &t)
		}
	}
	slices.SortFunc(out, func(a, b *task.Task) int { return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID)) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// TaskIDs returns the ids of the stored tasks that part names, in order, at
// most limit (0: all), scanning every id.
func (s *Store) TaskIDs(part string, limit int) ([]string, error) {
	s.mu.Lock()
	var out []string
	for id := range s.tasks.byID {
		if st := s.tasks.live(id); st != nil && st.record != nil && task.MatchesID(id, part) {
			out = append(out, id)
		}
	}
	s.mu.Unlock()
	slices.Sort(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Unfinished returns the tasks not in a final state, oldest first.
func (s *Store) Unfinished() ([]*task.Task, error) {
	tasks, err := s.Tasks(func(t *task.Task) bool { return !t.State.Final() }, 0)
	slices.Reverse(tasks)
	return tasks, err
}

// Events calls fn for each event of task id with Seq > after, in order.
func (s *Store) Events(id string, after int64, fn func(*task.Event) error) error {
	s.mu.Lock()
	var evs [][]byte
	if st := s.tasks.live(id); st != nil {
		for _, seq := range slices.Sorted(maps.Keys(st.events)) {
			if seq > after {
				evs = append(evs, st.events[seq])
			}
		}
	}
	s.mu.Unlock()
	for _, b := range evs {
		var ev task.Event
		if err := json.Unmarshal(b, &ev); err != nil {
			return err
		}
		if err := fn(&ev); err != nil {
			return err
		}
	}
	return nil
}

// pieces returns task id's output pieces in offset order.
func (s *Store) pieces(id string) []task.Piece {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.tasks.live(id)
	if st == nil {
		return nil
	}
	out := make([]task.Piece, 0, len(st.output))
	for _, off := range slices.Sorted(maps.Keys(st.output)) {
		out = append(out, task.Piece{Offset: off, Data: st.output[off]})
	}
	return out
}

// OutputSpans lists the ranges of task id's output pieces.
func (s *Store) OutputSpans(id string) ([]task.Span, error) {
	var out []task.Span
	for _, p := range s.pieces(id) {
		out = append(out, task.Span{Start: p.Offset, End: p.Offset + int64(len(p.Data))})
	}
	return out, nil
}

// WriteOutput writes task id's output from byte 0 to w, up to the first gap.
func (s *Store) WriteOutput(id string, w io.Writer) (int64, error) {
	var n int64
	for _, p := range s.pieces(id) {
		if p.Offset > n {
			break // a gap
		}
		if end := p.Offset + int64(len(p.Data)); end > n {
			if _, err := io.WriteString(w, p.Data[n-p.Offset:]); err != nil {
				return n, err
			}
			n = end
		}
	}
	return n, nil
}

// ReplaceOutput makes data the whole output of task id, in pieces as a work_status
// carries them.
func (s *Store) ReplaceOutput(id, data string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.broken != nil {
		return s.broken
	}
	st := s.tasks.live(id)
	if st == nil {
		st = &stored{events: map[int64][]byte{}}
		s.tasks.byID[id] = st
	}
	st.output = map[int64]string{}
	for _, c := range output.Split(data, envelope.MaxChunkSize) {
		if c.Data != "" {
			st.output[c.Range.Start] = c.Data
		}
	}
	return nil
}

// PutRecord stores a copy of data as the record id of kind, or with nil data
// deletes it, at once.
func (s *Store) PutRecord(kind, id string, data []byte) error {
	if err := checkKeys(kind, id); err != nil {
		return err
	}
	if data != nil && len(data) == 0 {
		return fmt.Errorf("%w %s/%s", task.ErrEmptyRecord, kind, id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.broken != nil {
		return s.broken
	}
	if data == nil {
		delete(s.records[kind], id)
		return nil
	}
	byID := s.records[kind]
	if byID == nil {
		byID = map[string][]byte{}
		s.records[kind] = byID
	}
	byID[id] = slices.Clone(data)
	return nil
}

// Record returns a copy of the record id of kind, or task.ErrNotFound.
func (s *Store) Record(kind, id string) ([]byte, error) {
	if err := checkKeys(kind, id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.records[kind][id]
	if !ok {
		return nil, task.ErrNotFound
	}
	return slices.Clone(data), nil
}

// Records returns a copy of every record of kind, by id.
func (s *Store) Records(kind string) (map[string][]byte, error) {
	if err := task.CheckKey(kind); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]byte, len(s.records[kind]))
	for id, data := range s.records[kind] {
		out[id] = slices.Clone(data)
	}
	return out, nil
}

// checkKeys checks a record's kind and id with task.CheckKey.
func checkKeys(kind, id string) error {
	if err := task.CheckKey(kind); err != nil {
		return err
	}
	return task.CheckKey(id)
}

// Close runs the done functions of the writes made and refuses later writes.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.stopped
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.stopped
	return nil
}

func (s *Store) loop() {
	defer close(s.stopped)
	for {
		<-s.wake
		s.mu.Lock()
		dones, closed := s.dones, s.closed
		s.dones = nil
		s.mu.Unlock()
		for _, done := range dones {
			done()
		}
		if closed {
			return
		}
	}
}
