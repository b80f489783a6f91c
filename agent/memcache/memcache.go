// Package memcache keeps an agent's dedupe entries in memory: a dedupe.Cache for
// tests that want to make its writes fail. It keeps the contract badgercache keeps
// (the shared tests in dedupe/cachetest prove both) and commits each write at once.
// An agent given one does not close it, so a test can hand the same Cache to the
// agent it restarts, as a disk outlives a process.
package memcache

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/agent/dedupe"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/output"
)

// ErrClosed is the error of a write to a closed Cache.
var ErrClosed = errors.New("memcache: cache closed")

// Cache is a dedupe.Cache in memory. Entries are kept encoded, so that a caller
// changing what it stored changes nothing stored.
type Cache struct {
	ttl time.Duration

	mu      sync.Mutex
	entries map[string]*stored
	closed  bool
	broken  error // FailWrites' error
}

var _ dedupe.Cache = (*Cache)(nil)

// stored is one request's entry and output pieces.
type stored struct {
	entry   []byte
	pieces  []string
	expires time.Time // zero: never
}

// New returns an empty Cache whose entries expire ttl after their last write (0:
// never).
func New(ttl time.Duration) *Cache {
	return &Cache{ttl: ttl, entries: map[string]*stored{}}
}

// FailWrites makes every later write fail with err, as a broken disk would; reads
// still work. A nil err makes writes work again.
func (c *Cache) FailWrites(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.broken = err
}

// Get returns the entry for requestID, or nil when there is none.
func (c *Cache) Get(requestID string) (*dedupe.Entry, error) {
	c.mu.Lock()
	s := c.liveLocked(requestID)
	c.mu.Unlock()
	if s == nil {
		return nil, nil
	}
	e := new(dedupe.Entry)
	if err := json.Unmarshal(s.entry, e); err != nil {
		return nil, fmt.Errorf("memcache: read %s: %w", requestID, err)
	}
	return e, nil
}

// liveLocked returns the unexpired entry of requestID, or nil.
func (c *Cache) liveLocked(requestID string) *stored {
	s := c.entries[requestID]
	if s == nil {
		return nil
	}
	if !s.expires.IsZero() && !time.Now().Before(s.expires) {
		delete(c.entries, requestID)
		return nil
	}
	return s
}

// Start stores e as running and calls done before it returns.
func (c *Cache) Start(requestID string, e *dedupe.Entry, done func(error)) {
	e.State = dedupe.Running
	done(c.put(requestID, e, nil))
}

// Finish stores e as finished with out split as badgercache splits it.
func (c *Cache) Finish(requestID string, e *dedupe.Entry, out string) error {
	split := output.Split(out, envelope.MaxChunkSize)
	pieces := make([]string, len(split))
	for i, p := range split {
		pieces[i] = p.Data
	}
	e.State = dedupe.Finished
	e.OutputLen = int64(len(out))
	e.OutputPieces = len(pieces)
	return c.put(requestID, e, pieces)
}

func (c *Cache) put(requestID string, e *dedupe.Entry, pieces []string) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("memcache: encode %s: %w", requestID, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return ErrClosed
	case c.broken != nil:
		return fmt.Errorf("memcache: write %s: %w", requestID, c.broken)
	}
	s := &stored{entry: b, pieces: pieces}
	if c.ttl > 0 {
		s.expires = time.Now().Add(c.ttl)
	}
	c.entries[requestID] = s
	return nil
}

// EachPiece calls fn with each output piece of a finished entry, in order.
func (c *Cache) EachPiece(requestID string, e *dedupe.Entry, fn func(offset int64, data string) error) error {
	c.mu.Lock()
	var pieces []string
	if s := c.liveLocked(requestID); s != nil {
		pieces = s.pieces
	}
	c.mu.Unlock()
	if len(pieces) < e.OutputPieces {
		return fmt.Errorf("memcache: read output of %s: %d pieces held, the entry has %d", requestID, len(pieces), e.OutputPieces)
	}
	var off int64
	for _, p := range pieces[:e.OutputPieces] {
		if err := fn(off, p); err != nil {
			return err
		}
		off += int64(len(p))
	}
	return nil
}

// Close makes later writes fail.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}
