package jsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// ErrEmptyRecord is task.ErrEmptyRecord: an empty message is a deleted record's
// tombstone, so the stream cannot hold an empty record.
var ErrEmptyRecord = task.ErrEmptyRecord

func (s *Store) recordSubject(kind, id string) string { return s.prefix + ".r." + kind + "." + id }
func (s *Store) recordsFilter(kind string) string     { return s.prefix + ".r." + kind + ".*" }

// PutRecord publishes data on the record's subject, or with nil data a tombstone
// (an empty message, which the reads take for no record), and waits for the
// commit. It goes through the writer as one write of its own, behind the writes
// saved before, fenced by the term and retried as they are. Empty, non-nil data
// is refused with ErrEmptyRecord.
func (s *Store) PutRecord(kind, id string, data []byte) error {
	if err := checkKeys(kind, id); err != nil {
		return err
	}
	if data != nil && len(data) == 0 {
		return fmt.Errorf("jsstore: %w %s/%s: nil data deletes a record, empty data cannot be stored", ErrEmptyRecord, kind, id)
	}
	if len(data) > s.maxData {
		return fmt.Errorf("jsstore: record %s/%s is %d bytes, more than the server's max payload allows (%d)", kind, id, len(data), s.maxData)
	}
	return s.commitAlone([]message{{s.recordSubject(kind, id), data, false}})
}

// Record returns the record id of kind, read as Task reads a task's record (from
// the stream's leader with replicas), or task.ErrNotFound for a record never put
// or deleted (a tombstone).
func (s *Store) Record(kind, id string) ([]byte, error) {
	if err := checkKeys(kind, id); err != nil {
		return nil, err
	}
	var data []byte
	err := s.readRetrying("reading a record", func() (err error) {
		data, err = s.last(s.recordSubject(kind, id))
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, task.ErrNotFound // a tombstone
	}
	return data, nil
}

// Records returns every record of kind by id, skipping tombstones. With replicas
// it reads with direct gets, as Tasks does (see the package's Limits).
func (s *Store) Records(kind string) (map[string][]byte, error) {
	if err := task.CheckKey(kind); err != nil {
		return nil, err
	}
	var vals map[string][]byte
	err := s.readRetrying("reading records", func() (err error) {
		vals, err = s.lastValues(context.Background(), s.recordsFilter(kind))
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(vals))
	for subj, data := range vals {
		if len(data) > 0 {
			out[lastToken(subj)] = data
		}
	}
	return out, nil
}

// readRetryFor bounds readRetrying's tries.
const readRetryFor = 5 * time.Second

// readRetrying runs read, and again while it fails with an error that passes
// (transient), for at most readRetryFor: a stream just created with replicas
// answers its first direct gets with no responders for a moment, and records are
// read as an orchestrator starts.
func (s *Store) readRetrying(what string, read func() error) error {
	wait := retryFirst
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := read()
		if err == nil || errors.Is(err, task.ErrNotFound) || !transient(err) || time.Since(start) > readRetryFor {
			return err
		}
		if !s.pause(what, attempt, &wait, err) {
			return err
		}
	}
}

// checkKeys checks a record's kind and id with task.CheckKey: each is then one
// subject token.
func checkKeys(kind, id string) error {
	if err := task.CheckKey(kind); err != nil {
		return err
	}
	return task.CheckKey(id)
}
