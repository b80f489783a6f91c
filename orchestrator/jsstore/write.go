package jsstore

import (
	"context"
	"encoding/json"
	"errors"
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

// HeaderWriter is the header that names, on every message a store in an
// election (Elect) writes, the candidate that wrote it: who wrote what stays
// in the stream.
const HeaderWriter = "Chiffon-Writer"

// message is one message of a batch. last marks a task's record or finish
// marker, which a commit on one replica publishes after the other messages
// (ordered.go).
type message struct {
	subject string
	data    []byte
	last    bool
}

// pending is a write Save queued: its messages, or the error that keeps it out.
type pending struct {
	msgs []message
	size int // bytes of the messages' bodies
	err  error
	done func(error)
}

// newPending is a write of msgs, or of the error err, to be answered by done.
func newPending(msgs []message, err error, done func(error)) *pending {
	p := &pending{msgs: msgs, err: err, done: done}
	for _, m := range msgs {
		p.size += len(m.data)
	}
	return p
}

// enqueue queues p for the writer, held for the next write when hold is set,
// and reports false, queuing nothing, once the store is closed.
func (s *Store) enqueue(p *pending, hold bool) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	if hold {
		s.held = append(s.held, p)
		s.mu.Unlock()
		return true
	}
	s.queue = append(append(s.queue, s.held...), p)
	s.held = nil
	s.mu.Unlock()
	s.signal()
	return true
}

// Save encodes w now and queues it behind the earlier writes; done runs on the
// writer goroutine once w is committed, or with the error that kept it out. A
// write with MoreComing is held until the next Save without it, Flush or Close.
func (s *Store) Save(w *task.Write, done func(error)) {
	msgs, err := s.encode(w)
	if !s.enqueue(newPending(msgs, err, done), w.MoreComing) {
		go done(ErrClosed) // not on the caller's goroutine: it may hold what done takes
	}
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
		b, err := task.MarshalStored(w.Task)
		if err != nil {
			return nil, fmt.Errorf("jsstore: encode task %s: %w", w.ID, err)
		}
		msgs = append(msgs, message{s.taskSubject(w.ID), b, true})
		if w.Task.State.Final() {
			at := time.Now()
			if w.Task.FinishedAt != nil {
				at = *w.Task.FinishedAt
			}
			msgs = append(msgs, message{s.markerSubject(w.ID), []byte(at.Format(time.RFC3339Nano)), true})
		}
	}
	for _, ev := range w.Events {
		if ev == nil {
			continue
		}
		b, err := task.MarshalStored(task.StoredForm(ev))
		if err != nil {
			return nil, fmt.Errorf("jsstore: encode event %d of task %s: %w", ev.Seq, w.ID, err)
		}
		msgs = append(msgs, message{s.eventSubject(w.ID, ev.Seq), b, false})
	}
	if w.Output.Data != "" {
		msgs = append(msgs, message{s.pieceSubject(w.ID, w.Output.Offset), []byte(w.Output.Data), false})
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

// writer commits the queued writes, and runs the election once the store has
// joined one, until the store is closed and its queue drained.
func (s *Store) writer() {
	defer close(s.writerDone)
	var tick *time.Ticker
	var ticks <-chan time.Time
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	for {
		select {
		case <-s.wake:
		case <-ticks:
		}
		s.mu.Lock()
		batch, closed, el := s.queue, s.closed, s.el
		s.queue = nil
		s.mu.Unlock()
		if el != nil && tick == nil {
			tick = time.NewTicker(el.tick())
			ticks = tick.C
		}
		if el != nil && !closed {
			s.campaign(el)
		}
		s.commit(batch, el)
		if closed {
			if el != nil {
				s.resign(el)
			}
			return
		}
	}
}

// commit publishes the writes of batch, in order, in groups as large as the
// limits allow, never splitting a write, and runs each write's done in order
// with its outcome: on replicas a group is one atomic batch, whose outcome is
// every write's; on one replica a group is committed in order (commitOrdered).
// In an election (el not nil) every message is fenced by the term, and a store
// that does not lead fails the writes with ErrNotLeader.
func (s *Store) commit(batch []*pending, el *election) {
	var (
		group      []*pending
		msgs, size int
	)
	flush := func() {
		if len(group) > 0 {
			s.commitGroup(group, msgs, el)
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

// commitGroup commits the writes of group, of msgs messages in all, and runs
// their done functions in order.
func (s *Store) commitGroup(group []*pending, msgs int, el *election) {
	if s.ordered {
		s.commitOrdered(group, el)
		return
	}
	all := make([]message, 0, msgs)
	for _, p := range group {
		all = append(all, p.msgs...)
	}
	var err error
	if len(all) > 0 {
		err = s.publishRetrying(all, el)
	}
	for _, p := range group {
		p.done(err)
	}
}

// ackWait is how long a commit waits for the server's answer: in an election
// briefly, so that the writer gets back to renewing the lease.
func ackWait(el *election) time.Duration {
	if el != nil {
		return el.attempt()
	}
	return opTimeout
}

// Retries of a commit the server could not take (out of reach, no stream
// leader yet): from retryFirst, doubling to retryMax. An answer that may as
// well last is tried again for a while only: no responders (the stream may be
// gone) for noRespondersFor, long enough for a stream of replicas to elect a
// new leader after the node that led it crashed (up to about 10 s, during which
// no server answers for the stream); a batch incomplete (the server may have
// refused one of its messages) for incompleteFor.
const (
	retryFirst    = 50 * time.Millisecond
	retryMax      = time.Second
	incompleteFor = 5 * time.Second
)

var noRespondersFor = 30 * time.Second // a variable for the tests of a stream gone

// publishRetrying publishes msgs as one atomic batch, fenced by el's term when
// el is not nil, and tries again while the failure is one that passes (the
// server restarting, a stream leader being elected): the batch overwrites the
// same subjects with the same messages, so a commit that landed unanswered and
// is made again changes nothing. It gives up as retries.again says.
func (s *Store) publishRetrying(msgs []message, el *election) error {
	r := s.retries(el)
	for {
		fence, err := r.fence()
		if err != nil {
			return err
		}
		if err = s.publish(msgs, el, fence); err == nil {
			return nil
		}
		if err = r.again(err); err != nil {
			return err
		}
	}
}

// retries is the state of one commit's tries: see again.
type retries struct {
	s         *Store
	el        *election
	attempt   int
	wait      time.Duration
	firstSoft time.Time // the first answer that may as well last (see noRespondersFor)
}

// retries starts the tries of one commit, in el's term when el is not nil.
func (s *Store) retries(el *election) *retries {
	return &retries{s: s, el: el, attempt: 1, wait: retryFirst}
}

// fence is the leadership record's sequence that the next try's writes expect,
// or ErrNotLeader once the store's term has ended; 0 outside an election.
func (r *retries) fence() (uint64, error) {
	if r.el == nil {
		return 0, nil
	}
	if r.el.term == "" {
		return 0, ErrNotLeader
	}
	return r.el.seq, nil
}

// again decides, after a try failed with err, whether to try again: it returns
// nil after the pause before the next try, or the error to give up with. It gives
// up on an error that does not pass, once the store has been closed for
// opTimeout, when the store stops leading (a refusal for a later term), and on an
// answer that may as well last once it has lasted its while.
func (r *retries) again(err error) error {
	s, el := r.s, r.el
	switch {
	case el != nil && wrongSequence(err):
		if !s.stillOurs(el) {
			s.lose(el, ErrDeposed)
			return fmt.Errorf("%w (%w)", ErrNotLeader, ErrDeposed)
		}
	case !transient(err):
		return err
	case errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse):
		if r.firstSoft.IsZero() {
			r.firstSoft = time.Now()
		} else if time.Since(r.firstSoft) > noRespondersFor {
			return fmt.Errorf("%w: %w", task.ErrUnavailable, err)
		}
	case incomplete(err):
		if r.firstSoft.IsZero() {
			r.firstSoft = time.Now()
		} else if time.Since(r.firstSoft) > incompleteFor {
			return err
		}
	}
	if !s.pause("commit", r.attempt, &r.wait, err) {
		return err
	}
	r.attempt++
	if el != nil {
		s.campaign(el) // renew the lease, or find it lapsed
	}
	return nil
}

// transient reports whether err is a failure that passes: the server out of
// reach or restarting, JetStream or the stream's leader not ready, a batch cut
// short by a reconnection.
func transient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code == 503 || apiErr.ErrorCode == errCodeIncompleteBatch
	}
	if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrPermissionViolation) {
		return false
	}
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, jetstream.ErrAsyncPublishTimeout) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrReconnectBufExceeded)
}

// incomplete reports whether err is the server's refusal of a batch as
// incomplete: it may have refused one of its messages, which it does not answer.
func incomplete(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeIncompleteBatch
}

// errCodeIncompleteBatch is the server's refusal of an atomic batch a message of
// which it did not get (JSAtomicPublishIncompleteBatchErr).
const errCodeIncompleteBatch = 10176

// explain adds to a request that got no answer what the connection's last
// error says when it is a permissions violation: the broker refused the
// publish, and the request would otherwise only time out.
func (s *Store) explain(err error) error {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
		return err
	}
	if last := s.nc.LastError(); last != nil && errors.Is(last, nats.ErrPermissionViolation) {
		return fmt.Errorf("%w: the broker refused this identity: %w (it needs to publish to %s.> and $JS.API.>)", err, last, s.prefix)
	}
	return err
}

// publish publishes msgs as one atomic batch and waits for the server's answer
// to its commit: the server stores all of them, or none and says why. With el
// not nil the first message makes the batch conditional on the leadership
// record's last sequence being fence: a batch of a term that has ended is
// refused.
func (s *Store) publish(msgs []message, el *election, fence uint64) error {
	id := nuid.Next()
	last := len(msgs) - 1
	for i, m := range msgs {
		nm := &nats.Msg{Subject: m.subject, Data: m.data, Header: nats.Header{
			hdrBatchID: {id}, hdrBatchSeq: {strconv.Itoa(i + 1)},
		}}
		if el != nil {
			nm.Header[HeaderWriter] = []string{el.opts.Name}
			if i == 0 {
				nm.Header[jetstream.ExpectedLastSubjSeqSubjHeader] = []string{el.subject}
				nm.Header[jetstream.ExpectedLastSubjSeqHeader] = []string{strconv.FormatUint(fence, 10)}
			}
		}
		if i < last {
			if err := s.nc.PublishMsg(nm); err != nil {
				return fmt.Errorf("jsstore: publish batch: %w", err)
			}
			continue
		}
		nm.Header[hdrBatchCommit] = []string{"1"}
		ctx, cancel := context.WithTimeout(context.Background(), ackWait(el))
		defer cancel()
		resp, err := s.nc.RequestMsgWithContext(ctx, nm)
		if err != nil {
			return s.explain(fmt.Errorf("jsstore: commit batch to stream %s: %w", s.name, err))
		}
		return checkAck(resp.Data, id, len(msgs))
	}
	return nil
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
// The batches go through the writer, behind the writes saved before, fenced as
// they are.
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
	old, err := s.outputSubjects(id)
	if err != nil {
		return err
	}
	var msgs []message
	keep := map[string]bool{}
	for _, c := range output.Split(data, envelope.MaxChunkSize) {
		subj := s.pieceSubject(id, c.Range.Start)
		keep[subj] = true
		msgs = append(msgs, message{subj, []byte(c.Data), false})
	}
	for _, subj := range old {
		if !keep[subj] {
			msgs = append(msgs, message{subj, nil, false})
		}
	}
	for m := range slices.Chunk(msgs, maxBatchMsgs) {
		if err := s.commitAlone(m); err != nil {
			return err
		}
	}
	return nil
}

// commitAlone queues msgs as one write for the writer and waits for its commit.
func (s *Store) commitAlone(msgs []message) error {
	done := make(chan error, 1)
	if !s.enqueue(newPending(msgs, nil, func(err error) { done <- err }), false) {
		return ErrClosed
	}
	return <-done
}

// outputSubjects lists the stored pieces of task id's output, asking again while
// the server is out of reach as a commit does (see publishRetrying): the
// replacement of a result's output must not be dropped for a slow server, or the
// task would end with the pieces streamed before it.
func (s *Store) outputSubjects(id string) ([]string, error) {
	wait := retryFirst
	for attempt := 1; ; attempt++ {
		out, err := s.subjects(s.outputFilter(id))
		if err == nil || !transient(err) {
			return out, err
		}
		if !s.pause("reading the output", attempt, &wait, err) {
			return nil, err
		}
	}
}

// pause waits before the next try of what failed with err, doubling *wait up to
// retryMax and logging the first failure and every 20th; it reports false, at
// once, when the store has been closed for more than opTimeout: give up.
func (s *Store) pause(what string, attempt int, wait *time.Duration, err error) bool {
	s.mu.Lock()
	closedAt := s.closedAt
	s.mu.Unlock()
	if !closedAt.IsZero() && time.Since(closedAt) > opTimeout {
		return false
	}
	if attempt == 1 || attempt%20 == 0 {
		s.log.Warn("jsstore: "+what+" failed; trying again", "stream", s.name, "attempt", attempt, "err", err)
	}
	time.Sleep(*wait) // the caller's own pace: nothing else waits on it but its own work
	*wait = min(2**wait, retryMax)
	return true
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
