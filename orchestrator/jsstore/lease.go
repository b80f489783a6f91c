package jsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Leadership: see "Leadership and fencing" in doc.go.

// ErrNotLeader is the error of a write by a store that has joined an election
// (Elect) and does not lead: the write was not stored.
var ErrNotLeader = fmt.Errorf("jsstore: %w", task.ErrNotLeader)

// Why a store stops leading, as OnLose is told.
var (
	// ErrDeposed says another store took the lead: the stream refused a write or
	// a renewal fenced by this store's term.
	ErrDeposed = errors.New("jsstore: another orchestrator took the lead")
	// ErrLeaseLapsed says this store could not renew its lease in time (the
	// server out of reach, or the process stalled).
	ErrLeaseLapsed = errors.New("jsstore: the lease lapsed before it could be renewed")
)

// MinLease is the shortest lease Elect takes.
const MinLease = 100 * time.Millisecond

// leaderToken is the last token of the leadership record's subject.
const leaderToken = "leader"

// Leader is a leadership record: who leads, since when, for which term.
type Leader struct {
	// Name is the leading store's ElectOptions.Name.
	Name string `json:"name"`
	// API is its ElectOptions.API: where its HTTP API is reached.
	API string `json:"api,omitempty"`
	// Term is new at every takeover.
	Term string `json:"term"`
	// Since is when the term began.
	Since time.Time `json:"since"`
	// LeaseMS is the lease the leader renews within, in milliseconds.
	LeaseMS int64 `json:"lease_ms"`
	// Resigned says the leader left (closed its store): a standby takes over at
	// once instead of waiting for the lease.
	Resigned bool `json:"resigned,omitempty"`
}

// ElectOptions configures Elect.
type ElectOptions struct {
	// Name says which orchestrator this is (its process); it should differ from
	// one orchestrator to the next.
	Name string
	// API is where this orchestrator's HTTP API is reached, for the others to
	// tell their clients.
	API string
	// Lease is how long a leader leads without renewing (at least MinLease). The
	// leader renews every quarter of it; a standby takes over when the record has
	// not changed for a whole lease.
	Lease time.Duration
	// OnLead is called when this store starts leading, before any write of the
	// term is committed. OnLose is called, with ErrDeposed or ErrLeaseLapsed,
	// when it stops, before the write that found out fails. Both run on the
	// store's writer goroutine: they must not block, nor call the store.
	OnLead func()
	OnLose func(error)
}

// election is a store's part in the election. The writer goroutine alone runs
// it; Leading and Leader read what it publishes under Store.mu.
type election struct {
	opts    ElectOptions
	subject string
	// While leading: the term, the stream sequence of the term's last record,
	// and when the renewal that wrote it was sent.
	term      string
	rec       Leader
	seq       uint64
	renewedAt time.Time
	// While not leading: the record's sequence last seen, since when, and when
	// it was last read.
	seenSeq  uint64
	seenAt   time.Time
	lastPoll time.Time
}

// poll is how often a standby reads the leadership record: every quarter
// lease, and at least every second so that a resignation is seen soon.
func (el *election) poll() time.Duration { return min(el.opts.Lease/4, time.Second) }

// tick is how often the writer wakes for the election: a renewal that failed
// is tried again at the next tick, so that one is sent soon after the stream
// has a leader again.
func (el *election) tick() time.Duration {
	return min(max(el.opts.Lease/10, 10*time.Millisecond), 250*time.Millisecond)
}

// renewEvery is how often the leader renews: the lease less the wait of a
// renewal whose stream lost its leader (see "What a lease costs" in
// docs/operations.md) must outlast the stream's election.
func (el *election) renewEvery() time.Duration { return el.opts.Lease / 4 }

// attempt bounds the wait for the answer to one write in the election (a
// commit, a renewal): a write sent while the stream has no leader is never
// answered, and the writer must get back to renewing the lease. A write that
// landed unanswered and is sent again changes nothing.
func (el *election) attempt() time.Duration {
	return min(opTimeout, max(el.opts.Lease/8, 500*time.Millisecond))
}

// Elect makes the store one candidate of the election among the stores of its
// stream: from now on it writes only while it leads, every write fenced by its
// term, so that a store that has lost the lead, even one that does not know it
// yet, has its writes refused by the stream. Reads are not affected.
func (s *Store) Elect(opts ElectOptions) error {
	if opts.Lease < MinLease {
		return fmt.Errorf("jsstore: lease %s shorter than %s", opts.Lease, MinLease)
	}
	if opts.Name == "" {
		return errors.New("jsstore: an election needs a name")
	}
	if opts.OnLead == nil {
		opts.OnLead = func() {}
	}
	if opts.OnLose == nil {
		opts.OnLose = func(error) {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.el != nil {
		return errors.New("jsstore: already in an election")
	}
	if s.closed {
		return ErrClosed
	}
	s.el = &election{opts: opts, subject: s.prefix + "." + leaderToken}
	s.signal()
	return nil
}

// Leading reports whether the store leads now: it has joined an election, won
// it, and its lease has not lapsed by its own clock.
func (s *Store) Leading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.el != nil && time.Now().Before(s.validUntil)
}

// Leader returns the leadership record last seen (by a standby) or written (by
// the leader); ok is false before one has been.
func (s *Store) Leader() (l Leader, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leader, s.leaderKnown
}

// campaign does what the election asks now: the leader renews its lease when a
// quarter of it has passed and stops leading once it lapses; a standby reads the
// record every quarter lease (at least every second) and takes over once it has stayed the same for a
// whole lease (at once when there is none, or it says its leader resigned).
func (s *Store) campaign(el *election) {
	now := time.Now()
	lease := el.opts.Lease
	if el.term != "" {
		if now.Sub(el.renewedAt) >= el.renewEvery() {
			s.renew(el)
		}
		if el.term != "" && !time.Now().Before(el.renewedAt.Add(lease)) {
			s.lose(el, ErrLeaseLapsed)
		}
		return
	}
	if now.Sub(el.lastPoll) < el.poll() {
		return
	}
	el.lastPoll = now
	rec, seq, err := s.readLeader(el)
	if err != nil {
		s.log.Debug("jsstore: read the leadership record", "stream", s.name, "err", err)
		return
	}
	if seq != el.seenSeq || el.seenAt.IsZero() {
		el.seenSeq, el.seenAt = seq, now
		s.publishLeader(rec, seq != 0, time.Time{})
	}
	if seq == 0 || rec.Resigned || now.Sub(el.seenAt) >= lease {
		s.takeOver(el, seq)
	}
}

// takeOver writes a new term's record if the record is still at sequence
// expected (0: none), and leads if it is.
func (s *Store) takeOver(el *election, expected uint64) {
	rec := Leader{Name: el.opts.Name, API: el.opts.API, Term: nuid.Next(), Since: time.Now().UTC(),
		LeaseMS: el.opts.Lease.Milliseconds()}
	sent := time.Now()
	seq, err := s.putLeader(el, rec, expected)
	if err != nil {
		if !wrongSequence(err) {
			s.log.Warn("jsstore: take the lead", "stream", s.name, "err", err)
		}
		el.lastPoll = time.Time{} // read again at the next tick
		return
	}
	el.term, el.rec, el.seq, el.renewedAt = rec.Term, rec, seq, sent
	s.publishLeader(rec, true, sent.Add(el.opts.Lease))
	s.log.Info("jsstore: leading", "stream", s.name, "name", rec.Name, "term", rec.Term)
	el.opts.OnLead()
}

// renew writes the term's record again, fenced by its last sequence.
func (s *Store) renew(el *election) {
	sent := time.Now()
	seq, err := s.putLeader(el, el.rec, el.seq)
	switch {
	case err == nil:
		el.seq, el.renewedAt = seq, sent
		s.publishLeader(el.rec, true, sent.Add(el.opts.Lease))
	case wrongSequence(err):
		if !s.stillOurs(el) {
			s.lose(el, ErrDeposed)
		}
	default:
		s.log.Warn("jsstore: renew the lease", "stream", s.name, "err", err)
	}
}

// stillOurs reads the record after a fenced write was refused: when it still
// holds this store's term (a renewal that landed unanswered moved its sequence,
// or a standby's takeover attempt was in flight), it takes the sequence and
// reports true.
func (s *Store) stillOurs(el *election) bool {
	rec, seq, err := s.readLeader(el)
	if err != nil {
		return true // unknown: the writes stay fenced, and the lease bounds the wait
	}
	if rec.Term == el.term && !rec.Resigned {
		el.seq = seq
		return true
	}
	return false
}

// lose ends the term.
func (s *Store) lose(el *election, why error) {
	s.log.Warn("jsstore: no longer leading", "stream", s.name, "term", el.term, "why", why)
	el.term, el.seq = "", 0
	el.seenSeq, el.seenAt, el.lastPoll = 0, time.Time{}, time.Time{}
	s.mu.Lock()
	s.validUntil = time.Time{}
	s.mu.Unlock()
	el.opts.OnLose(why)
}

// resign, at Close, tells the standbys the leader has left, so that one takes
// over without waiting for the lease.
func (s *Store) resign(el *election) {
	if el.term == "" {
		return
	}
	rec := el.rec
	rec.Resigned = true
	if _, err := s.putLeader(el, rec, el.seq); err != nil {
		s.log.Warn("jsstore: resign the lead", "stream", s.name, "err", err)
	}
	el.term = ""
	s.mu.Lock()
	s.validUntil = time.Time{}
	s.mu.Unlock()
}

// publishLeader makes rec what Leader returns, and until when Leading is true.
func (s *Store) publishLeader(rec Leader, known bool, validUntil time.Time) {
	s.mu.Lock()
	s.leader, s.leaderKnown, s.validUntil = rec, known, validUntil
	s.mu.Unlock()
}

// readLeader returns the leadership record and its stream sequence; sequence 0
// when there is none.
func (s *Store) readLeader(el *election) (Leader, uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	m, err := s.stream.GetLastMsgForSubject(ctx, el.subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Leader{}, 0, nil
	}
	if err != nil {
		return Leader{}, 0, err
	}
	var rec Leader
	if err := json.Unmarshal(m.Data, &rec); err != nil {
		return Leader{}, 0, fmt.Errorf("jsstore: decode the leadership record: %w", err)
	}
	return rec, m.Sequence, nil
}

// putLeader writes rec if the record's last sequence is expected (0: none), and
// returns its sequence.
func (s *Store) putLeader(el *election, rec Leader, expected uint64) (uint64, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	msg := &nats.Msg{Subject: el.subject, Data: data, Header: nats.Header{
		jetstream.ExpectedLastSubjSeqHeader: {strconv.FormatUint(expected, 10)},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), el.attempt())
	defer cancel()
	resp, err := s.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return 0, s.explain(fmt.Errorf("jsstore: write the leadership record: %w", err))
	}
	var ack batchAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, fmt.Errorf("jsstore: write the leadership record: unreadable answer %q: %w", resp.Data, err)
	}
	if ack.Error != nil {
		return 0, fmt.Errorf("jsstore: write the leadership record: %w", ack.Error)
	}
	return ack.Seq, nil
}

// wrongSequence reports whether err is the stream's refusal of a write whose
// expected last sequence did not hold.
func wrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
