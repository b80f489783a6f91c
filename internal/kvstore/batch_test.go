package kvstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openTestDB opens a Badger store with 1 MiB memtables: a transaction then holds at
// most ~150 KiB.
func openTestDB(t *testing.T) *DB {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := Open(SmallOptions(t.TempDir(), log).WithMemTableSize(1 << 20).WithValueThreshold(64 << 10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func get(t *testing.T, db *DB, key string) (string, bool) {
	t.Helper()
	var v []byte
	err := db.View(func(txn *badger.Txn) error {
		it, err := txn.Get([]byte(key))
		if err != nil {
			return err
		}
		v, err = it.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(v), true
}

func entry(key, value string) *badger.Entry {
	return badger.NewEntry([]byte(key), []byte(value))
}

// Writes from many goroutines all commit, each done runs once, and each goroutine's
// writes commit in its order: the last value of its key wins.
func TestBatcherCommitsInOrder(t *testing.T) {
	db := openTestDB(t)
	b := NewBatcher(db)
	const writers, each = 16, 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	calls := map[string]int{}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last chan error
			for i := range each {
				id := fmt.Sprintf("w%d/%d", w, i)
				errc := make(chan error, 1)
				b.Write([]*badger.Entry{entry(fmt.Sprintf("w%d", w), fmt.Sprint(i)), entry(id, "x")}, func(err error) {
					mu.Lock()
					calls[id]++
					mu.Unlock()
					errc <- err
				})
				last = errc
			}
			if err := <-last; err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	b.Close()
	mu.Lock()
	defer mu.Unlock()
	for w := range writers {
		if v, _ := get(t, db, fmt.Sprintf("w%d", w)); v != fmt.Sprint(each-1) {
			t.Errorf("writer %d: last value %q, want %d", w, v, each-1)
		}
		for i := range each {
			id := fmt.Sprintf("w%d/%d", w, i)
			if _, ok := get(t, db, id); !ok {
				t.Errorf("%s not stored", id)
			}
			if calls[id] > 1 {
				t.Errorf("%s: done ran %d times", id, calls[id])
			}
		}
	}
}

// Writes made one after another, many transactions of them handed to Badger
// before the first is written, each run their done in the order they were made,
// and only once they are stored.
func TestBatcherRunsDonesInOrderOnceStored(t *testing.T) {
	db := openTestDB(t)
	b := NewBatcher(db)
	const n = 3000
	value := strings.Repeat("v", 4<<10) // a memtable of 1 MiB fills every ~250 writes
	var order []int
	var unstored []string
	finished := make(chan struct{})
	for i := range n {
		key := fmt.Sprintf("k%d", i)
		b.Write([]*badger.Entry{entry(key, value)}, func(err error) {
			if err != nil {
				t.Errorf("%s: %v", key, err)
			}
			if _, ok := get(t, db, key); !ok {
				unstored = append(unstored, key)
			}
			order = append(order, i) // dones run on one goroutine
			if i == n-1 {
				close(finished)
			}
		})
	}
	<-finished
	b.Close()
	if len(unstored) > 0 {
		t.Errorf("%d writes done before they were stored, first %s", len(unstored), unstored[0])
	}
	for i, got := range order {
		if got != i {
			t.Fatalf("done %d ran for write %d: dones out of order", i, got)
		}
	}
	if len(order) != n {
		t.Errorf("%d dones ran, want %d", len(order), n)
	}
}

// A write that no transaction can hold, or with a bad entry, fails alone: the writes
// around it in the same batch commit.
func TestBatcherFailsABadWriteAlone(t *testing.T) {
	db := openTestDB(t)
	b := NewBatcher(db)
	defer b.Close()
	var huge []*badger.Entry
	for i := range 64 {
		huge = append(huge, entry(fmt.Sprintf("huge/%d", i), strings.Repeat("h", 8<<10)))
	}
	ws := []pendingWrite{
		{entries: []*badger.Entry{entry("a", "1")}},
		{entries: huge},
		{entries: []*badger.Entry{entry("b", "2")}},
		{entries: []*badger.Entry{entry("c", "3"), entry("", "empty key")}},
		{entries: []*badger.Entry{entry("d", "4")}},
	}
	results := make([]error, len(ws))
	var wg sync.WaitGroup
	for i := range ws {
		wg.Add(1)
		ws[i].done = func(err error) { results[i] = err; wg.Done() }
	}
	b.commit(ws) // one batch, as the loop would take it
	wg.Wait()
	if results[0] != nil || results[2] != nil || results[4] != nil {
		t.Errorf("the good writes failed: %v", results)
	}
	if !errors.Is(results[1], badger.ErrTxnTooBig) {
		t.Errorf("huge write: %v, want ErrTxnTooBig", results[1])
	}
	if !errors.Is(results[3], badger.ErrEmptyKey) {
		t.Errorf("write with an empty key: %v, want ErrEmptyKey", results[3])
	}
	for _, k := range []string{"a", "b", "d"} {
		if _, ok := get(t, db, k); !ok {
			t.Errorf("%s not stored", k)
		}
	}
	for _, k := range []string{"c", "huge/0"} {
		if _, ok := get(t, db, k); ok {
			t.Errorf("%s stored, from a write that failed", k)
		}
	}
}

// Close commits what was queued; a write after it fails with ErrBatcherClosed.
func TestBatcherClose(t *testing.T) {
	db := openTestDB(t)
	b := NewBatcher(db)
	errs := make(chan error, 100)
	for i := range 100 {
		b.Write([]*badger.Entry{entry(fmt.Sprint(i), "v")}, func(err error) { errs <- err })
	}
	b.Close()
	for range 100 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		if _, ok := get(t, db, fmt.Sprint(i)); !ok {
			t.Fatalf("%d not stored", i)
		}
	}
	if err := b.WriteWait(entry("late", "v")); !errors.Is(err, ErrBatcherClosed) {
		t.Fatalf("write after Close: %v, want ErrBatcherClosed", err)
	}
	b.Close() // a second Close is a no-op
}

// version is the commit timestamp of key: writes in one transaction share it.
func version(t *testing.T, db *DB, key string) uint64 {
	t.Helper()
	var v uint64
	if err := db.View(func(txn *badger.Txn) error {
		it, err := txn.Get([]byte(key))
		if err == nil {
			v = it.Version()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// Held writes go in one transaction with the Write or Kick that follows them, in
// order, and each done runs once.
func TestBatcherHoldJoinsTheNextCommit(t *testing.T) {
	db := openTestDB(t)
	b := NewBatcher(db)
	defer b.Close()
	var wg sync.WaitGroup
	done := func(err error) {
		if err != nil {
			t.Error(err)
		}
		wg.Done()
	}
	wg.Add(4)
	b.Hold([]*badger.Entry{entry("a", "1")}, done)
	b.Hold([]*badger.Entry{entry("b", "1")}, done)
	b.Hold([]*badger.Entry{entry("a", "2")}, done)
	b.Write([]*badger.Entry{entry("c", "1")}, done)
	wg.Wait()
	if v, _ := get(t, db, "a"); v != "2" {
		t.Fatalf("a = %q, want the later held value", v)
	}
	if va, vb, vc := version(t, db, "a"), version(t, db, "b"), version(t, db, "c"); va != vb || vb != vc {
		t.Fatalf("versions %d %d %d: the held writes did not share the Write's transaction", va, vb, vc)
	}

	wg.Add(2)
	b.Hold([]*badger.Entry{entry("d", "1")}, done)
	b.Hold([]*badger.Entry{entry("e", "1")}, done)
	b.Kick()
	wg.Wait()
	if vd, ve := version(t, db, "d"), version(t, db, "e"); vd != ve || vd == version(t, db, "c") {
		t.Fatalf("versions d %d, e %d: Kick did not commit the held writes together", vd, ve)
	}
}

// A write held when the Batcher closes is committed by Close.
func TestBatcherCloseCommitsHeldWrites(t *testing.T) {
	db := openTestDB(t)
	b := NewBatcher(db)
	errc := make(chan error, 1)
	b.Hold([]*badger.Entry{entry("held", "1")}, func(err error) { errc <- err })
	b.Close()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if v, ok := get(t, db, "held"); !ok || v != "1" {
		t.Fatalf("held = %q %v", v, ok)
	}
}
