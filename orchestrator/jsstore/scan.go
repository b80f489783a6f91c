package jsstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// Direct get batches: one request asks for up to pageMsgs messages (pageBytes)
// on a filter from a stream sequence on; the server answers with the messages
// and an end-of-batch status that says how many more match.
const (
	pageMsgs  = 1000
	pageBytes = 4 << 20
)

// directGetRequest is the body of a direct get (nats-server's
// JSApiMsgGetRequest).
type directGetRequest struct {
	Seq      uint64 `json:"seq,omitempty"`
	NextFor  string `json:"next_by_subj,omitempty"`
	Batch    int    `json:"batch,omitempty"`
	MaxBytes int    `json:"max_bytes,omitempty"`
}

// Headers and statuses of direct get answers.
const (
	hdrStatus     = "Status"
	hdrDesc       = "Description"
	hdrSubject    = "Nats-Subject"
	hdrSequence   = "Nats-Sequence"
	hdrNumPending = "Nats-Num-Pending"
	statusEOB     = "204"
	statusNone    = "404"
	statusNoResp  = "503"
)

// lastValues returns the message of every subject filter matches, by subject.
// With one message kept per subject, every stored message is its subject's last,
// so it reads them all, a page at a time; a subject replaced between pages is
// read again, and the later message kept.
func (s *Store) lastValues(ctx context.Context, filter string) (map[string][]byte, error) {
	inbox := s.nc.NewInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("jsstore: read %s: %w", filter, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	out := map[string][]byte{}
	seqs := map[string]uint64{}
	var start uint64
	for {
		req, err := json.Marshal(directGetRequest{Seq: start, NextFor: filter, Batch: pageMsgs, MaxBytes: pageBytes})
		if err != nil {
			return nil, err
		}
		if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+s.name, inbox, req); err != nil {
			return nil, fmt.Errorf("jsstore: read %s: %w", filter, err)
		}
		more, last, err := s.page(ctx, sub, func(subj string, seq uint64, data []byte) {
			if seq >= seqs[subj] {
				seqs[subj], out[subj] = seq, data
			}
		})
		if err != nil {
			return nil, fmt.Errorf("jsstore: read %s: %w", filter, err)
		}
		if !more {
			return out, nil
		}
		start = last + 1
	}
}

// page reads the answer to one direct get batch request from sub, calling fn
// with each message, and returns whether more messages match and the sequence of
// the last message read.
func (s *Store) page(ctx context.Context, sub *nats.Subscription, fn func(subject string, seq uint64, data []byte)) (more bool, last uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return false, 0, err
		}
		switch status := m.Header.Get(hdrStatus); status {
		case "":
			seq, err := strconv.ParseUint(m.Header.Get(hdrSequence), 10, 64)
			if err != nil {
				return false, 0, fmt.Errorf("direct get answer without a sequence: %w", err)
			}
			fn(m.Header.Get(hdrSubject), seq, m.Data)
			last = seq
		case statusEOB:
			np, _ := strconv.ParseUint(m.Header.Get(hdrNumPending), 10, 64)
			return np > 0 && last > 0, last, nil
		case statusNone:
			return false, last, nil
		case statusNoResp:
			return false, 0, fmt.Errorf("stream %s: %w", s.name, nats.ErrNoResponders)
		default:
			return false, 0, fmt.Errorf("stream %s: direct get: %s %s", s.name, status, m.Header.Get(hdrDesc))
		}
	}
}
