package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/kvstore"
	"github.com/chiffon-dev/chiffon/output"
	"github.com/dgraph-io/badger/v4"
)

// Entry states in the dedupe cache.
const (
	stateRunning  = "running"
	stateFinished = "finished"
)

// cacheEntry is what the dedupe cache holds for one request_id.
type cacheEntry struct {
	State     string    `json:"state"`
	TaskID    string    `json:"task_id"`
	WorkType  string    `json:"work_type"`
	StartedAt time.Time `json:"started_at"`
	// Result and ResultFields are the work_result's payload and x_custom_fields.
	Result       *envelope.WorkResult `json:"result,omitempty"`
	ResultFields map[string]any       `json:"result_fields,omitempty"`
	// OutputLen and OutputPieces describe the cached output.
	OutputLen    int64 `json:"output_len"`
	OutputPieces int   `json:"output_pieces"`
}

// DedupeCache remembers, by request_id, whether a request is running or finished, and
// a finished request's output and result. It lives in Badger, tuned to stay small.
type DedupeCache struct {
	db  *kvstore.DB
	w   *kvstore.Batcher // every write: requests arriving together commit together
	ttl time.Duration
}

// OpenDedupeCache opens (or creates) the cache in dir/dedupe. Entries expire after ttl.
func OpenDedupeCache(dir string, ttl time.Duration, log *slog.Logger) (*DedupeCache, error) {
	if log == nil {
		log = slog.Default()
	}
	// An agent's cache is small: small tables and caches on top of kvstore's.
	opts := kvstore.SmallOptions(filepath.Join(dir, "dedupe"), log).
		WithBaseTableSize(1 << 20).
		WithBaseLevelSize(4 << 20).
		// Badger msyncs a value log file when it fills up, in the write path: the
		// larger the file, the rarer that stall (the mapping is virtual until written).
		WithValueLogFileSize(64 << 20).
		WithBlockCacheSize(1 << 20).
		WithIndexCacheSize(1 << 20).
		WithNumGoroutines(2).
		WithMetricsEnabled(false)
	db, err := kvstore.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("dedupe cache: %w", err)
	}
	return &DedupeCache{db: db, w: kvstore.NewBatcher(db), ttl: ttl}, nil
}

// Close closes the cache once the writes handed to it are committed.
func (c *DedupeCache) Close() error {
	c.w.Close()
	return c.db.Close()
}

func entryKey(requestID string) []byte { return []byte("r/" + requestID) }

func pieceKey(requestID string, i int) []byte {
	return fmt.Appendf(nil, "o/%s/%08d", requestID, i)
}

// get returns the entry for requestID, or nil when there is none.
func (c *DedupeCache) get(requestID string) (*cacheEntry, error) {
	var e *cacheEntry
	err := c.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(entryKey(requestID))
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error {
			e = new(cacheEntry)
			return json.Unmarshal(v, e)
		})
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dedupe cache: read %s: %w", requestID, err)
	}
	return e, nil
}

// entry is the store entry of e, encoded by encodeEntry (HTML escaping off).
func (c *DedupeCache) entry(requestID string, e *cacheEntry) (*badger.Entry, error) {
	b, err := encodeEntry(e)
	if err != nil {
		return nil, fmt.Errorf("dedupe cache: encode %s: %w", requestID, err)
	}
	return badger.NewEntry(entryKey(requestID), b).WithTTL(c.ttl), nil
}

// putAsync writes e for requestID without waiting: done runs once the entry is
// committed or the write has failed, on the committing goroutine, so it must not
// block. The agent's one subscription thus goes on to the next request while this
// one's entry commits, together with the others pending.
func (c *DedupeCache) putAsync(requestID string, e *cacheEntry, done func(error)) {
	ent, err := c.entry(requestID, e)
	if err != nil {
		go done(err)
		return
	}
	c.w.Write([]*badger.Entry{ent}, func(err error) {
		if err != nil {
			err = fmt.Errorf("dedupe cache: write %s: %w", requestID, err)
		}
		done(err)
	})
}

// finish stores the output, in rune-aligned pieces of at most 256 KiB, and the
// finished entry, so a finished entry always has its whole output. They commit in
// one transaction, shared with other writes pending; output too large for one goes
// first in a write batch, which splits itself where Badger bounds a transaction's
// size and commits the parts without waiting for each in turn, and the entry after.
func (c *DedupeCache) finish(requestID string, e *cacheEntry, out string) error {
	pieces := output.Split(out, envelope.MaxChunkSize)
	e.State = stateFinished
	e.OutputLen = int64(len(out))
	e.OutputPieces = len(pieces)
	ent, err := c.entry(requestID, e)
	if err != nil {
		return err
	}
	entries := make([]*badger.Entry, 0, len(pieces)+1)
	for i, p := range pieces {
		entries = append(entries, badger.NewEntry(pieceKey(requestID, i), kvstore.StringValue(p.Data)).WithTTL(c.ttl))
	}
	err = c.w.WriteWait(append(entries, ent)...)
	if errors.Is(err, badger.ErrTxnTooBig) {
		err = c.finishLarge(entries, ent)
	}
	if err != nil {
		return fmt.Errorf("dedupe cache: write result of %s: %w", requestID, err)
	}
	return nil
}

// finishLarge writes output pieces too large for one transaction in a write batch,
// then the entry.
func (c *DedupeCache) finishLarge(pieces []*badger.Entry, entry *badger.Entry) error {
	wb := c.db.NewWriteBatch()
	defer wb.Cancel()
	for _, p := range pieces {
		if err := wb.SetEntry(p); err != nil {
			return err
		}
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	return c.w.WriteWait(entry)
}

// eachPiece calls fn with each cached output piece of a finished entry, in order.
func (c *DedupeCache) eachPiece(requestID string, e *cacheEntry, fn func(offset int64, data string) error) error {
	var off int64
	for i := 0; i < e.OutputPieces; i++ {
		var data string
		err := c.db.View(func(txn *badger.Txn) error {
			it, err := txn.Get(pieceKey(requestID, i))
			if err != nil {
				return err
			}
			v, err := it.ValueCopy(nil)
			data = string(v)
			return err
		})
		if err != nil {
			return fmt.Errorf("dedupe cache: read output of %s: %w", requestID, err)
		}
		if err := fn(off, data); err != nil {
			return err
		}
		off += int64(len(data))
	}
	return nil
}

// badgerLogger routes Badger's logs to slog: errors and warnings only.
