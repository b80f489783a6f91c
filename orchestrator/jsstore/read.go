package jsstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go/jetstream"
)

// Task returns task id's record, or task.ErrNotFound: for an id never saved, an
// id that cannot be stored, or a finished task past the retention.
func (s *Store) Task(id string) (*task.Task, error) {
	if !validID(id) {
		return nil, task.ErrNotFound
	}
	data, err := s.last(s.taskSubject(id))
	if err != nil || data == nil {
		return nil, err
	}
	var t task.Task
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("jsstore: decode task %s: %w", id, err)
	}
	expired, err := s.expired(&t, func() (time.Time, bool, error) { return s.markerTime(id) })
	if err != nil {
		return nil, err
	}
	if expired {
		return nil, task.ErrNotFound
	}
	return &t, nil
}

// last returns the last message of subject, or task.ErrNotFound with nil data.
func (s *Store) last(subject string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if s.leaderReads {
		return s.lastFromLeader(ctx, subject)
	}
	m, err := s.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, task.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("jsstore: get %s: %w", subject, err)
	}
	if m.Data == nil {
		m.Data = []byte{}
	}
	return m.Data, nil
}

// lastFromLeader is last, answered by the stream's leader through the JetStream
// API (the stream's message get) rather than by any replica.
func (s *Store) lastFromLeader(ctx context.Context, subject string) ([]byte, error) {
	req, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return nil, err
	}
	msg, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+s.name, req)
	if err != nil {
		return nil, fmt.Errorf("jsstore: get %s: %w", subject, s.explain(err))
	}
	var resp struct {
		Message *struct {
			Data []byte `json:"data"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("jsstore: get %s: %w", subject, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, task.ErrNotFound
	case resp.Error != nil:
		return nil, fmt.Errorf("jsstore: get %s: %w", subject, resp.Error)
	case resp.Message == nil:
		return nil, fmt.Errorf("jsstore: get %s: an answer without the message", subject)
	case resp.Message.Data == nil:
		return []byte{}, nil
	}
	return resp.Message.Data, nil
}

// markerTime returns when task id finished, from its finish marker.
func (s *Store) markerTime(id string) (time.Time, bool, error) {
	data, err := s.last(s.markerSubject(id))
	if errors.Is(err, task.ErrNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	at, err := time.Parse(time.RFC3339Nano, string(data))
	return at, err == nil, nil
}

// expired reports whether t is finished and past the retention: from its
// FinishedAt or, without one, from the time marker returns.
func (s *Store) expired(t *task.Task, marker func() (time.Time, bool, error)) (bool, error) {
	if s.retention <= 0 || !t.State.Final() {
		return false, nil
	}
	var at time.Time
	if t.FinishedAt != nil {
		at = *t.FinishedAt
	} else {
		var ok bool
		var err error
		if at, ok, err = marker(); err != nil || !ok {
			return false, err
		}
	}
	return time.Since(at) >= s.retention, nil
}

// Tasks returns the tasks keep accepts, newest first, at most limit (0: all).
func (s *Store) Tasks(keep func(*task.Task) bool, limit int) ([]*task.Task, error) {
	records, err := s.lastValues(context.Background(), s.prefix+".t.*")
	if err != nil {
		return nil, err
	}
	var markers map[string]time.Time // by id, read at the first need
	markerOf := func(id string) func() (time.Time, bool, error) {
		return func() (time.Time, bool, error) {
			if markers == nil {
				var err error
				if markers, err = s.markers(context.Background()); err != nil {
					return time.Time{}, false, err
				}
			}
			at, ok := markers[id]
			return at, ok, nil
		}
	}
	var out []*task.Task
	for subj, data := range records {
		var t task.Task
		if err := json.Unmarshal(data, &t); err != nil {
			return nil, fmt.Errorf("jsstore: decode %s: %w", subj, err)
		}
		expired, err := s.expired(&t, markerOf(lastToken(subj)))
		if err != nil {
			return nil, err
		}
		if !expired && (keep == nil || keep(&t)) {
			out = append(out, &t)
		}
	}
	slices.SortFunc(out, func(a, b *task.Task) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// TaskIDs returns the ids of the stored tasks that part names, in order, at
// most limit (0: all). It reads every record, as Tasks does.
func (s *Store) TaskIDs(part string, limit int) ([]string, error) {
	tasks, err := s.Tasks(func(t *task.Task) bool { return task.MatchesID(t.ID, part) }, 0)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, t.ID)
	}
	slices.Sort(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// markers returns the time of every finish marker, by task id.
func (s *Store) markers(ctx context.Context) (map[string]time.Time, error) {
	vals, err := s.lastValues(ctx, s.prefix+".f.*")
	if err != nil {
		return nil, err
	}
	out := make(map[string]time.Time, len(vals))
	for subj, data := range vals {
		if at, err := time.Parse(time.RFC3339Nano, string(data)); err == nil {
			out[lastToken(subj)] = at
		}
	}
	return out, nil
}

// Unfinished returns the tasks not in a final state, oldest first.
func (s *Store) Unfinished() ([]*task.Task, error) {
	tasks, err := s.Tasks(func(t *task.Task) bool { return !t.State.Final() }, 0)
	slices.Reverse(tasks)
	return tasks, err
}

// Events calls fn with each stored event of task id with Seq > after, in Seq
// order, until fn returns an error, which Events returns.
func (s *Store) Events(id string, after int64, fn func(*task.Event) error) error {
	if !validID(id) {
		return nil
	}
	vals, err := s.lastValues(context.Background(), s.eventsFilter(id))
	if err != nil {
		return err
	}
	evs := make([]task.StoredEvent, 0, len(vals))
	withOutput := false
	for subj, data := range vals {
		se := task.StoredEvent{Event: &task.Event{}}
		if err := json.Unmarshal(data, &se); err != nil {
			return fmt.Errorf("jsstore: decode %s: %w", subj, err)
		}
		if se.Seq > after {
			evs = append(evs, se)
			withOutput = withOutput || se.OutputLen > 0
		}
	}
	slices.SortFunc(evs, func(a, b task.StoredEvent) int { return cmp.Compare(a.Seq, b.Seq) })
	var ps []task.StoredPiece
	if withOutput {
		if ps, err = s.pieces(id); err != nil {
			return err
		}
	}
	for _, se := range evs {
		if ev := se.Event; se.OutputLen > 0 && ev.Status != nil && ev.OutputOffset != nil {
			ev.Status.Step.Output = task.SliceOutput(ps, *ev.OutputOffset, se.OutputLen)
		}
		if err := fn(se.Event); err != nil {
			return err
		}
	}
	return nil
}

// pieces returns the non-empty output pieces of task id, in offset order.
func (s *Store) pieces(id string) ([]task.StoredPiece, error) {
	if !validID(id) {
		return nil, nil
	}
	vals, err := s.lastValues(context.Background(), s.outputFilter(id))
	if err != nil {
		return nil, err
	}
	out := make([]task.StoredPiece, 0, len(vals))
	for subj, data := range vals {
		if len(data) == 0 {
			continue // a tombstone of ReplaceOutput
		}
		off, err := strconv.ParseInt(lastToken(subj), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("jsstore: output piece %s: %w", subj, err)
		}
		out = append(out, task.StoredPiece{Start: off, Data: data})
	}
	slices.SortFunc(out, func(a, b task.StoredPiece) int { return cmp.Compare(a.Start, b.Start) })
	return out, nil
}

// OutputSpans lists the [start, end) ranges of the stored pieces of task id, in
// offset order.
func (s *Store) OutputSpans(id string) ([]task.Span, error) {
	ps, err := s.pieces(id)
	if err != nil {
		return nil, err
	}
	var out []task.Span
	for _, p := range ps {
		out = append(out, task.Span{Start: p.Start, End: p.Start + int64(len(p.Data))})
	}
	return out, nil
}

// WriteOutput writes the output of task id from byte 0 to w, up to the first
// gap, and returns the number of bytes written. Overlapping pieces are written
// once.
func (s *Store) WriteOutput(id string, w io.Writer) (int64, error) {
	ps, err := s.pieces(id)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range ps {
		if p.Start > n {
			break // a gap
		}
		if end := p.Start + int64(len(p.Data)); end > n {
			if _, err := w.Write(p.Data[n-p.Start:]); err != nil {
				return n, err
			}
			n = end
		}
	}
	return n, nil
}
