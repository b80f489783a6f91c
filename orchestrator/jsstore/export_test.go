package jsstore

import (
	"context"
	"time"
)

// SetNoRespondersFor sets how long a write no server answers for is tried again, until the test ends.
func SetNoRespondersFor(t interface{ Cleanup(func()) }, d time.Duration) {
	old := noRespondersFor
	noRespondersFor = d
	t.Cleanup(func() { noRespondersFor = old })
}

// StoredMsg is where a message sits in the stream: its sequence and the atomic
// batch it was committed in ("" for none).
type StoredMsg struct {
	Seq   uint64
	Batch string
	Err   error
}

// Stored reads the last message on the store's subject prefix.tail.
func (s *Store) Stored(tail string) StoredMsg {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	m, err := s.stream.GetLastMsgForSubject(ctx, s.prefix+"."+tail)
	if err != nil {
		return StoredMsg{Err: err}
	}
	return StoredMsg{Seq: m.Sequence, Batch: m.Header.Get(hdrBatchID)}
}

// Replicas is the stream's number of replicas.
func (s *Store) Replicas() int { return s.stream.CachedInfo().Config.Replicas }

// DeleteStream deletes the store's stream.
func (s *Store) DeleteStream() error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return s.js.DeleteStream(ctx, s.name)
}

// SaveOutside queues, held or not, a write of one message on a subject no
// stream takes: the server answers it with no responders.
func (s *Store) SaveOutside(hold bool, done func(error)) {
	s.enqueue(newPending([]message{{subject: "jsstore-test.nowhere", data: []byte("x")}}, nil, done), hold)
}
