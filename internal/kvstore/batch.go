package kvstore

import (
	"errors"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// Batcher is a group commit in front of a Badger database: writes handed to it by
// many goroutines share transactions. A Badger transaction costs ~10 µs before it
// stores anything (oracle timestamps, the write channel, watermarks); under load a
// batch of many writes pays that once.
//
// Writes commit in the order Write was called, each one whole in one transaction.
// A lone write goes at once. The goroutine that builds transactions does not wait
// for Badger to write them: it hands up to maxCommitting to Badger's write
// channel (which writes them in that order) and gathers the next batch, while a
// second goroutine waits for each in turn and runs its writes' done functions.
// Waiting for each commit instead made every write of the process go through
// one goroutine's wait on Badger (measured: 3% more CPU per parallel dispatch).
type Batcher struct {
	db *DB

	mu      sync.Mutex
	queue   []pendingWrite
	held    bool // the queue may hold a write that no Write or Kick has started
	closed  bool
	wake    chan struct{}
	stopped chan struct{}

	// committing takes each transaction handed to Badger, in order, to the
	// goroutine that waits for it and runs its writes' done functions.
	committing chan commitGroup
}

// commitGroup is consecutive writes that commit or fail together: err is known
// at once, or comes on result when Badger has written them.
type commitGroup struct {
	ws     []pendingWrite
	err    error
	result chan error
}

// maxCommitting bounds the transactions handed to Badger and not yet written,
// besides the one whose write is being waited for.
const maxCommitting = 4

type pendingWrite struct {
	entries []*badger.Entry
	deletes [][]byte // keys deleted after the entries are set
	done    func(error)
}

// ErrBatcherClosed is the error of a write handed to a closed Batcher.
var ErrBatcherClosed = errors.New("kvstore: store closed")

// maxBatchWrites bounds the writes of one transaction, so that one batch's callbacks
// do not wait for an arbitrarily long one.
const maxBatchWrites = 256

// NewBatcher starts a Batcher on db. Close it before db.
func NewBatcher(db *DB) *Batcher {
	b := &Batcher{db: db, wake: make(chan struct{}, 1), stopped: make(chan struct{}),
		committing: make(chan commitGroup, maxCommitting)}
	go b.loop()
	go b.complete()
	return b
}

// Write queues entries to be committed together, and returns at once. done runs once
// they are committed, or with the error that kept them out. It runs on the
// goroutine that waits for commits, in order with the other writes' done
// functions, and must not block: a done that needs a lock starts a goroutine to
// take it.
func (b *Batcher) Write(entries []*badger.Entry, done func(error)) {
	if b.add(pendingWrite{entries: entries, done: done}, false) {
		b.Kick()
	}
}

// Delete queues the deletion of keys, committed together and ordered with the
// writes as Write's entries are (a badger.Entry cannot say "delete": its meta bits
// are Badger's own). done is as Write's.
func (b *Batcher) Delete(keys [][]byte, done func(error)) {
	if b.add(pendingWrite{deletes: keys, done: done}, false) {
		b.Kick()
	}
}

// Hold is Write that does not start the commit: the write waits in the queue for the
// next Write or Kick, and then goes in one transaction with the writes made after it.
// A caller that knows more writes follow at once (the next messages of a
// subscription already read, say) holds all but the last. Whoever holds a write must
// make sure a Write or Kick follows; Close commits what is still held.
func (b *Batcher) Hold(entries []*badger.Entry, done func(error)) {
	b.add(pendingWrite{entries: entries, done: done}, true)
}

// Flush is Kick when a held write may wait in the queue, and nothing otherwise: a
// caller that held writes for a burst ends it with Flush, without waking the
// goroutine that builds transactions for nothing when no write was held.
func (b *Batcher) Flush() {
	b.mu.Lock()
	held := b.held
	b.held = false
	b.mu.Unlock()
	if held {
		b.Kick()
	}
}

// Kick starts committing the writes queued so far.
func (b *Batcher) Kick() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// add queues a write, held or to be kicked, and reports whether it did: a closed
// Batcher refuses it.
func (b *Batcher) add(w pendingWrite, hold bool) bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		go w.done(ErrBatcherClosed)
		return false
	}
	b.queue = append(b.queue, w)
	b.held = hold // a write kicked takes the held ones along
	b.mu.Unlock()
	return true
}

// WriteWait is Write that waits for the commit.
func (b *Batcher) WriteWait(entries ...*badger.Entry) error {
	errc := make(chan error, 1)
	b.Write(entries, func(err error) { errc <- err })
	return <-errc
}

// DeleteWait is Delete that waits for the commit.
func (b *Batcher) DeleteWait(keys ...[]byte) error {
	errc := make(chan error, 1)
	b.Delete(keys, func(err error) { errc <- err })
	return <-errc
}

// Close commits what is queued, refuses later writes and waits for the last commit.
func (b *Batcher) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		<-b.stopped
		return
	}
	b.closed = true
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	<-b.stopped
}

func (b *Batcher) loop() {
	defer close(b.committing)
	for {
		<-b.wake // only a Write, Kick or Close starts a commit: held writes wait
		b.mu.Lock()
		batch, closed := b.queue, b.closed
		b.queue, b.held = nil, false
		b.mu.Unlock()
		for len(batch) > 0 {
			n := min(len(batch), maxBatchWrites)
			b.commit(batch[:n])
			batch = batch[n:]
		}
		if closed {
			return // nothing is queued once closed is seen
		}
	}
}

// complete waits for each group's commit, in the order they were handed to
// Badger, and runs its writes' done functions.
func (b *Batcher) complete() {
	defer close(b.stopped)
	for g := range b.committing {
		err := g.err
		if g.result != nil {
			err = <-g.result
		}
		for _, w := range g.ws {
			w.done(err)
		}
	}
}

// commit hands ws to Badger in as few transactions as its size bounds allow,
// without waiting for them to be written.
func (b *Batcher) commit(ws []pendingWrite) {
	for start := 0; start < len(ws); {
		g := b.commitFrom(ws, start)
		b.committing <- g
		start += len(g.ws)
	}
}

// commitFrom hands ws[start:end] to Badger in one transaction, for the largest end
// that fits. A write refused in a transaction of its own (too large for one, or
// with a bad entry) fails alone.
func (b *Batcher) commitFrom(ws []pendingWrite, start int) commitGroup {
	txn := b.db.newTxn()
	defer func() { txn.Discard() }()
	end := start
	for ; end < len(ws); end++ {
		err := ws[end].apply(txn)
		if err == nil {
			continue
		}
		if end == start {
			return commitGroup{ws: ws[start : end+1], err: err}
		}
		// ws[end] is partly in txn: the writes before it commit without it, and it
		// starts the next transaction.
		txn.Discard()
		txn = b.db.newTxn()
		for _, w := range ws[start:end] {
			if err := w.apply(txn); err != nil {
				return commitGroup{ws: ws[start:end], err: err}
			}
		}
		break
	}
	result := make(chan error, 1)
	b.db.commitAsync(txn, func(err error) { result <- err })
	return commitGroup{ws: ws[start:end], result: result}
}

// apply sets w's entries in txn, then deletes its keys.
func (w pendingWrite) apply(txn *badger.Txn) error {
	for _, e := range w.entries {
		if err := txn.SetEntry(e); err != nil {
			return err
		}
	}
	for _, k := range w.deletes {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
