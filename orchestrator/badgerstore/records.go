package badgerstore

import (
	"errors"
	"fmt"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/dgraph-io/badger/v4"
)

// Records (task.Store.PutRecord) are kept under r/<kind>/<id>, without a TTL: they
// never expire. kind and id hold no '/' (task.CheckKey), so the prefix r/<kind>/
// holds the records of kind and no other's.
func recordKey(kind, id string) []byte { return []byte("r/" + kind + "/" + id) }

func recordPrefix(kind string) []byte { return []byte("r/" + kind + "/") }

// PutRecord stores data as the record id of kind, or with nil data deletes it, and
// waits for the commit. Both go through the store's Batcher, so they commit in
// order with the task writes saved before and the PutRecords made before: a delete
// is a Batcher write of its own (kvstore.Batcher.Delete) rather than a separate
// transaction or write batch, which could commit before a put of the same record
// still queued.
func (s *Store) PutRecord(kind, id string, data []byte) error {
	if err := checkKeys(kind, id); err != nil {
		return err
	}
	if data != nil && len(data) == 0 {
		return fmt.Errorf("%w %s/%s", task.ErrEmptyRecord, kind, id)
	}
	if data == nil {
		return s.w.DeleteWait(recordKey(kind, id))
	}
	// Badger copies the value into its memtable or value log at the commit, which
	// WriteWait waits for: the caller may change data once PutRecord returns.
	return s.w.WriteWait(badger.NewEntry(recordKey(kind, id), data))
}

// Record returns the record id of kind, or task.ErrNotFound.
func (s *Store) Record(kind, id string) ([]byte, error) {
	if err := checkKeys(kind, id); err != nil {
		return nil, err
	}
	var data []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(recordKey(kind, id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return task.ErrNotFound
		}
		if err != nil {
			return err
		}
		data, err = item.ValueCopy([]byte{}) // an empty record reads as empty, not nil
		return err
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// Records returns every record of kind, by id.
func (s *Store) Records(kind string) (map[string][]byte, error) {
	if err := task.CheckKey(kind); err != nil {
		return nil, err
	}
	prefix := recordPrefix(kind)
	out := map[string][]byte{}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy([]byte{})
			if err != nil {
				return err
			}
			out[string(it.Item().Key()[len(prefix):])] = v
		}
		return nil
	})
	if err != nil {
		return nil, err
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
