package jsstore

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A stream of one replica on file storage commits an atomic batch through a
// store of its own on disk that the server makes, syncs and removes for each
// batch: about 2 ms a commit, however small, against 0.2 ms on three replicas,
// which stage a batch in memory (nats-server's newBatchStore). So a store of
// one replica commits without atomic batches, in two rounds of plain
// publishes, each round's acknowledgements gathered at once:
//
//  1. every message of the writes but their records: events, output, records
//     (P.r.) and tombstones;
//  2. the task records and finish markers of the writes whose first round was
//     stored, and of no write after one whose first round must be tried again.
//
// One connection's messages to one stream are stored in the order sent, so a
// reader that sees a record sees the events and output saved with it, which
// is what readers rely on (a task read back, its history after its end). What
// an atomic batch adds, and this does not, is all-or-none: a write whose
// message the server refuses keeps what it stored of its first round (events,
// no record), and fails.

// commitOrdered stores the writes of group, in order, in the two rounds above,
// and hands each write's outcome to its done in order. A write that fails with
// an error that passes (the server out of reach) is published again with
// every write after it, so that a later write of the same task is stored last
// again; the messages are the same, so a write stored twice changes nothing.
// When the retries give up, that write and every write after it fail with the
// error, as the writes of an atomic batch fail together; those before it stand.
func (s *Store) commitOrdered(group []*pending, el *election) {
	results := make([]error, len(group))
	r := s.retries(el)
	for start := 0; start < len(group); {
		fence, err := r.fence()
		if err == nil {
			clear(results[start:])
			start += s.publishRounds(group[start:], results[start:], el, fence)
			if start == len(group) {
				break
			}
			if err = r.again(results[start]); err == nil {
				continue
			}
		}
		for i := start; i < len(group); i++ {
			results[i] = err
		}
		break
	}
	for i, p := range group {
		p.done(results[i])
	}
}

// publishRounds publishes ws in the two rounds and records each write's outcome
// in results. It returns how many writes, from the first, have their outcome:
// the rest, from the first write that failed with an error worth trying again,
// are to be published again.
func (s *Store) publishRounds(ws []*pending, results []error, el *election, fence uint64) int {
	firsts := make([][]message, len(ws))
	lasts := make([][]message, len(ws))
	for i, p := range ws {
		for _, m := range p.msgs {
			if m.last {
				lasts[i] = append(lasts[i], m)
			} else {
				firsts[i] = append(firsts[i], m)
			}
		}
	}
	cut := len(ws)
	s.publishRound(firsts, results, el, fence)
	for i, err := range results {
		if err != nil && retryable(err, el) {
			cut = i
			break
		}
	}
	s.publishRound(lasts[:cut], results[:cut], el, fence) // none of a write whose first round failed
	for i, err := range results[:cut] {
		if err != nil && retryable(err, el) {
			return i
		}
	}
	return cut
}

// retryable reports whether a write that failed with err is worth publishing
// again: a failure that passes, or a refusal for the fence, which the retries
// tell apart from a lost term.
func retryable(err error, el *election) bool {
	return transient(err) || (el != nil && wrongSequence(err))
}

// publishRound publishes the messages of every write of ws, all at once, then
// gathers the server's acknowledgements: results[i] is set to the first error
// of ws[i]'s messages, or left nil when they were all stored. A write with an
// error already (its first round's) publishes nothing.
func (s *Store) publishRound(ws [][]message, results []error, el *election, fence uint64) {
	type sent struct {
		write int
		ack   jetstream.PubAckFuture
	}
	var all []sent
	for i, msgs := range ws {
		if results[i] != nil {
			continue
		}
		for _, m := range msgs {
			ack, err := s.js.PublishMsgAsync(s.plainMsg(m, el, fence), noRetries)
			if err != nil {
				results[i] = err
				break
			}
			all = append(all, sent{i, ack})
		}
	}
	timeout := time.NewTimer(ackWait(el))
	defer timeout.Stop()
	late := false
	for _, a := range all {
		err := ackOf(a.ack, timeout.C, &late)
		if err != nil && results[a.write] == nil {
			results[a.write] = err
		}
	}
}

// ackOf waits for ack until timeout fires, and then no longer: once *late,
// only an acknowledgement already in counts.
func ackOf(ack jetstream.PubAckFuture, timeout <-chan time.Time, late *bool) error {
	if !*late {
		select {
		case <-ack.Ok():
			return nil
		case err := <-ack.Err():
			return err
		case <-timeout:
			*late = true
		}
	}
	select {
	case <-ack.Ok():
		return nil
	case err := <-ack.Err():
		return err
	default:
		return errors.Join(errAckLate, context.DeadlineExceeded)
	}
}

// noRetries keeps the client from publishing a message again by itself (on
// no responders), which could store it after the messages sent after it.
var noRetries = jetstream.WithRetryAttempts(0)

// errAckLate says that the server did not acknowledge a message in time.
var errAckLate = errors.New("jsstore: no acknowledgement from the stream in time")

// plainMsg is m as a plain publish, fenced by the term's record when el is not
// nil: the server refuses it once another term began.
func (s *Store) plainMsg(m message, el *election, fence uint64) *nats.Msg {
	nm := &nats.Msg{Subject: m.subject, Data: m.data}
	if el != nil {
		nm.Header = nats.Header{
			HeaderWriter:                            {el.opts.Name},
			jetstream.ExpectedLastSubjSeqSubjHeader: {el.subject},
			jetstream.ExpectedLastSubjSeqHeader:     {strconv.FormatUint(fence, 10)},
		}
	}
	return nm
}
