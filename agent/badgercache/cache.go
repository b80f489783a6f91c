// Package badgercache keeps an agent's dedupe entries in Badger: the dedupe.Cache an
// agent opens in its data directory. It is the only part of the agent that knows
// Badger, and it owns what tuning Badger takes: small tables and caches, the group
// commit of entries written together (a Batcher), the TTLs that make expiry, the
// hand-written JSON of entries and the value log's garbage collection.
package badgercache

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/agent/dedupe"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/kvstore"
	"github.com/chiffon-dev/chiffon/output"
	"github.com/dgraph-io/badger/v4"
)

// Options configures a Cache.
type Options struct {
	// TTL is how long an entry is kept after its last write; 0 keeps entries forever.
	TTL time.Duration
	// Logger receives Badger's warnings and errors; nil means slog.Default().
	Logger *slog.Logger
}

// Cache keeps dedupe entries and the output of finished requests in Badger. It
// implements dedupe.Cache.
type Cache struct {
	db  *kvstore.DB
	w   *kvstore.Batcher // every write: requests arriving together commit together
	ttl time.Duration

	closeOnce sync.Once
	wg        sync.WaitGroup // the garbage collection
	done      chan struct{}
}

var _ dedupe.Cache = (*Cache)(nil)

// gcInterval is how often the value log's space is reclaimed.
const gcInterval = 10 * time.Minute

// Open opens (or creates) the cache in dir, tuned to stay small. Close it.
func Open(dir string, opts Options) (*Cache, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	// An agent's cache is small: small tables and caches on top of kvstore's.
	bopts := kvstore.SmallOptions(dir, log).
		WithBaseTableSize(1 << 20).
		WithBaseLevelSize(4 << 20).
		// Badger msyncs a value log file when it fills up, in the write path: the
		// larger the file, the rarer that stall (the mapping is virtual until written).
		WithValueLogFileSize(64 << 20).
		WithBlockCacheSize(1 << 20).
		WithIndexCacheSize(1 << 20).
		WithNumGoroutines(2).
		WithMetricsEnabled(false)
	db, err := kvstore.Open(bopts)
	if err != nil {
		return nil, fmt.Errorf("dedupe cache: %w", err)
	}
	c := &Cache{db: db, w: kvstore.NewBatcher(db), ttl: opts.TTL, done: make(chan struct{})}
	c.wg.Add(1)
	go func() { defer c.wg.Done(); kvstore.RunGC(db.DB, gcInterval, c.done) }()
	return c, nil
}

// Close stops the garbage collection and closes the cache once the writes handed to
// it are committed. Closing it again does nothing.
func (c *Cache) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.done)
		c.wg.Wait()
		c.w.Close()
		err = c.db.Close()
	})
	return err
}

func entryKey(requestID string) []byte { return []byte("r/" + requestID) }

func pieceKey(requestID string, i int) []byte {
	return fmt.Appendf(nil, "o/%s/%08d", requestID, i)
}

// newEntry is a write of key and value with the cache's TTL.
func (c *Cache) newEntry(key, value []byte) *badger.Entry {
	e := badger.NewEntry(key, value)
	if c.ttl > 0 {
		e = e.WithTTL(c.ttl)
	}
	return e
}

// Get returns the entry for requestID, or nil when there is none.
func (c *Cache) Get(requestID string) (*dedupe.Entry, error) {
	var e *dedupe.Entry
	err := c.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(entryKey(requestID))
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error {
			e = new(dedupe.Entry)
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
func (c *Cache) entry(requestID string, e *dedupe.Entry) (*badger.Entry, error) {
	b, err := encodeEntry(e)
	if err != nil {
		return nil, fmt.Errorf("dedupe cache: encode %s: %w", requestID, err)
	}
	return c.newEntry(entryKey(requestID), b), nil
}

// Start writes e as running without waiting: done runs once the entry is committed
// or the write has failed, on the committing goroutine. The agent's one
// subscription thus goes on to the next request while this one's entry commits,
// together with the others pending.
func (c *Cache) Start(requestID string, e *dedupe.Entry, done func(error)) {
	e.State = dedupe.Running
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

// Finish stores the output, in rune-aligned pieces of at most 256 KiB, and the
// finished entry, so a finished entry always has its whole output. They commit in
// one transaction, shared with other writes pending; output too large for one goes
// first in a write batch, which splits itself where Badger bounds a transaction's
// size and commits the parts without waiting for each in turn, and the entry after.
func (c *Cache) Finish(requestID string, e *dedupe.Entry, out string) error {
	pieces := output.Split(out, envelope.MaxChunkSize)
	e.State = dedupe.Finished
	e.OutputLen = int64(len(out))
	e.OutputPieces = len(pieces)
	ent, err := c.entry(requestID, e)
	if err != nil {
		return err
	}
	entries := make([]*badger.Entry, 0, len(pieces)+1)
	for i, p := range pieces {
		entries = append(entries, c.newEntry(pieceKey(requestID, i), kvstore.StringValue(p.Data)))
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
func (c *Cache) finishLarge(pieces []*badger.Entry, entry *badger.Entry) error {
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

// EachPiece calls fn with each cached output piece of a finished entry, in order.
func (c *Cache) EachPiece(requestID string, e *dedupe.Entry, fn func(offset int64, data string) error) error {
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
