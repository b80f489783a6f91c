package jsstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/output"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// The headers of an atomic batch (see nats-server's stream.go).
const (
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
)

const (
	// maxBatchMsgs is the most messages the server takes in one atomic batch
	// (its default max_batch_size).
	maxBatchMsgs = 1000
	// maxBatchBytes bounds the bytes of writes grouped into one batch; a write
	// larger than this goes alone.
	maxBatchBytes = 8 << 20
	// batchHeaderRoom is what a message's batch headers may take of the server's
	// max payload.
	batchHeaderRoom = 256
)

// message is one message of a batch.
type message struct {
	subject string
	data    []byte
}

// pending is a write Save queued: its messages, or the error that keeps it out.
type pending struct {
	msgs []message
	size int // bytes of the messages' bodies
	err  error
	done func(error)
}

// Save encodes w now and queues it behind the earlier writes; done runs on the
// writer goroutine once w is committed, or with the error that kept it out. A
// write with MoreComing is held until the next Save without it, Flush or Close.
func (s *Store) Save(w *task.Write, done func(error)) {
	p := &pending{done: done}
	p.msgs, p.err = s.encode(w)
	for _, m := range p.msgs {
		p.size += len(m.data)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		go done(ErrClosed) // not on the caller's goroutine: it may hold what done takes
		return
	}
	if w.MoreComing {
		s.held = append(s.held, p)
		s.mu.Unlock()
		return
	}
	s.queue = append(append(s.queue, s.held...), p)
	s.held = nil
	s.mu.Unlock()
	s.signal()
}

// Flush queues the held writes for the writer; it does not wait for the commit.
func (s *Store) Flush() {
	s.mu.Lock()
	n := len(s.held)
	s.queue = append(s.queue, s.held...)
	s.held = nil
	s.mu.Unlock()
	if n > 0 {
		s.signal()
	}
}

// encode returns the messages of w: its record (and, for a record in a final
// state, the finish marker), its events, its piece of output.
func (s *Store) encode(w *task.Write) ([]message, error) {
	if err := checkID(w.ID); err != nil {
		return nil, err
	}
	var msgs []message
	if w.Task != nil {
		b, err := marshal(w.Task)
		if err != nil {
			return nil, fmt.Errorf("jsstore: encode task %s: %w", w.ID, err)
		}
		msgs = append(msgs, message{s.taskSubject(w.ID), b})
		if w.Task.State.Final() {
			at := time.Now()
			if w.Task.FinishedAt != nil {
				at = *w.Task.FinishedAt
			}
			msgs = append(msgs, message{s.markerSubject(w.ID), []byte(at.Format(time.RFC3339Nano))})
		}
	}
	for _, ev := range w.Events {
		if ev == nil {
			continue
		}
		b, err := marshal(task.StoredForm(ev))
		if err != nil {
			return nil, fmt.Errorf("jsstore: encode event %d of task %s: %w", ev.Seq, w.ID, err)
		}
		msgs = append(msgs, message{s.eventSubject(w.ID, ev.Seq), b})
	}
	if w.Output.Data != "" {
		msgs = append(msgs, message{s.pieceSubject(w.ID, w.Output.Offset), []byte(w.Output.Data)})
	}
	if len(msgs) > maxBatchMsgs {
		return nil, fmt.Errorf("jsstore: write of task %s: %d messages, more than one atomic batch takes (%d)", w.ID, len(msgs), maxBatchMsgs)
	}
	for _, m := range msgs {
		if len(m.data) > s.maxData {
			return nil, fmt.Errorf("jsstore: write of task %s: %s is %d bytes, more than the server's max payload allows (%d)", w.ID, m.subject, len(m.data), s.maxData)
		}
	}
	return msgs, nil
}

// marshal is json.Marshal without HTML escaping: output such as "<3>" is stored
// as written.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// writer commits the queued writes until the store is closed and its queue
// drained.
func (s *Store) writer() {
	defer close(s.writerDone)
	for range s.wake {
		s.mu.Lock()
		batch, closed := s.queue, s.closed
		s.queue = nil
		s.mu.Unlock()
		s.commit(batch)
		if closed {
			return
		}
	}
}

// commit publishes the writes of batch, in order, as few atomic batches as the
// limits allow, never splitting a write, and runs each write's done in order with
// the outcome of its batch.
func (s *Store) commit(batch []*pending) {
	var (
		group      []*pending
		msgs, size int
	)
	flush := func() {
		if len(group) == 0 {
			return
		}
		all := make([]message, 0, msgs)
		for _, p := range group {
			all = append(all, p.msgs...)
		}
		var err error
		if len(all) > 0 {
			err = s.publish(all)
		}
		for _, p := range group {
			p.done(err)
		}
		group, msgs, size = nil, 0, 0
	}
	for _, p := range batch {
		if p.err != nil {
			flush() // the done of every earlier write runs first
			p.done(p.err)
			continue
		}
		if len(group) > 0 && (msgs+len(p.msgs) > maxBatchMsgs || size+p.size > maxBatchBytes) {
			flush()
		}
		group = append(group, p)
		msgs += len(p.msgs)
		size += p.size
	}
	flush()
}

// publish publishes msgs as one atomic batch and waits for the server's answer
// to its commit: the server stores all of them, or none and says why.
func (s *Store) publish(msgs []message) error {
	id := nuid.Next()
	last := len(msgs) - 1
	for i, m := range msgs[:last] {
		nm := &nats.Msg{Subject: m.subject, Data: m.data, Header: nats.Header{
			hdrBatchID: {id}, hdrBatchSeq: {strconv.Itoa(i + 1)},
		}}
		if err := s.nc.PublishMsg(nm); err != nil {
			return fmt.Errorf("jsstore: publish batch: %w", err)
		}
	}
	m := msgs[last]
	nm := &nats.Msg{Subject: m.subject, Data: m.data, Header: nats.Header{
		hdrBatchID: {id}, hdrBatchSeq: {strconv.Itoa(last + 1)}, hdrBatchCommit: {"1"},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	resp, err := s.nc.RequestMsgWithContext(ctx, nm)
	if err != nil {
		return fmt.Errorf("jsstore: commit batch to stream %s: %w", s.name, err)
	}
	return checkAck(resp.Data, id, len(msgs))
}

// batchAck is the server's answer to the commit of an atomic batch.
type batchAck struct {
	Stream string              `json:"stream"`
	Seq    uint64              `json:"seq"`
	Batch  string              `json:"batch"`
	Count  int                 `json:"count"`
	Error  *jetstream.APIError `json:"error"`
}

// checkAck returns the error the answer data to the commit of batch id, of n
// messages, says, or one if it does not acknowledge that batch whole.
func checkAck(data []byte, id string, n int) error {
	var ack batchAck
	if err := json.Unmarshal(data, &ack); err != nil {
		return fmt.Errorf("jsstore: commit batch: unreadable answer %q: %w", data, err)
	}
	if ack.Error != nil {
		return fmt.Errorf("jsstore: commit batch: %w", ack.Error)
	}
	if ack.Batch != id || ack.Count != n {
		return fmt.Errorf("jsstore: commit batch %s of %d messages: answered for batch %q of %d", id, n, ack.Batch, ack.Count)
	}
	return nil
}

// ReplaceOutput makes data the whole output of task id, in chunks as a
// work_status carries them, and waits for the commit: one atomic batch writes the
// chunks and a tombstone (an empty message) on every stored piece that is not
// among them. Output of more than 1000 chunks takes several batches, in order.
func (s *Store) ReplaceOutput(id, data string) error {
	if err := checkID(id); err != nil {
		return err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	old, err := s.subjects(s.outputFilter(id))
	if err != nil {
		return err
	}
	var msgs []message
	keep := map[string]bool{}
	for _, c := range output.Split(data, envelope.MaxChunkSize) {
		subj := s.pieceSubject(id, c.Range.Start)
		keep[subj] = true
		msgs = append(msgs, message{subj, []byte(c.Data)})
	}
	for _, subj := range old {
		if !keep[subj] {
			msgs = append(msgs, message{subj, nil})
		}
	}
	for m := range slices.Chunk(msgs, maxBatchMsgs) {
		if err := s.publish(m); err != nil {
			return err
		}
	}
	return nil
}

// subjects lists the stored subjects filter matches, in order, from the stream's
// subject counts.
func (s *Store) subjects(filter string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	info, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("jsstore: subjects of %s: %w", filter, err)
	}
	out := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		out = append(out, subj)
	}
	slices.Sort(out)
	return out, nil
}
