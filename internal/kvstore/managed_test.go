package kvstore

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

func smallOpts(dir string) badger.Options {
	return SmallOptions(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// Timestamps continue from what is stored, whichever mode wrote it: a store written
// by Badger's own transactions (before Chiffon used managed mode) and then by this
// one, closed and opened again, always reads the last value written.
func TestTimestampsContinueAcrossOpens(t *testing.T) {
	dir := t.TempDir()
	plain, err := badger.Open(smallOpts(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1", "2", "3"} {
		if err := plain.Update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte(v)) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := plain.Close(); err != nil {
		t.Fatal(err)
	}

	last := "3"
	for _, v := range []string{"4", "5"} {
		db, err := Open(smallOpts(dir))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := get(t, db, "k"); got != last {
			t.Fatalf("after reopening, k = %q, want %q, the last value written", got, last)
		}
		b := NewBatcher(db)
		if err := b.WriteWait(entry("k", v)); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if got, _ := get(t, db, "k"); got != v {
			t.Fatalf("k = %q after writing %q", got, v)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		last = v
	}
}

// A write batch and the Batcher share the clock: the later write wins.
func TestWriteBatchAndBatcherShareTheClock(t *testing.T) {
	db := openTestDB(t)
	b := NewBatcher(db)
	defer b.Close()
	if err := b.WriteWait(entry("k", "batcher")); err != nil {
		t.Fatal(err)
	}
	wb := db.NewWriteBatch()
	if err := wb.SetEntry(entry("k", "batch")); err != nil {
		t.Fatal(err)
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, _ := get(t, db, "k"); got != "batch" {
		t.Fatalf("k = %q, want the write batch's later value", got)
	}
	if err := b.WriteWait(entry("k", "batcher again")); err != nil {
		t.Fatal(err)
	}
	if got, _ := get(t, db, "k"); got != "batcher again" {
		t.Fatalf("k = %q, want the Batcher's later value", got)
	}
}

// BenchmarkCommit is one three-entry transaction at a time with Badger's own
// timestamps and with DB's (managed mode), and BenchmarkLookup a miss in each: the
// figures behind choosing managed mode.
func BenchmarkCommit(b *testing.B) {
	val := make([]byte, 400)
	entries := func(i int) []*badger.Entry {
		out := make([]*badger.Entry, 3)
		for j := range out {
			out[j] = badger.NewEntry([]byte(fmt.Sprintf("t/%08d/%d", i, j)), val)
		}
		return out
	}
	b.Run("badger_txn", func(b *testing.B) {
		db, err := badger.Open(smallOpts(b.TempDir()).WithDetectConflicts(false))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		i := 0
		for b.Loop() {
			txn := db.NewTransaction(true)
			for _, e := range entries(i) {
				_ = txn.SetEntry(e)
			}
			if err := txn.Commit(); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("managed", func(b *testing.B) {
		db, err := Open(smallOpts(b.TempDir()))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		i := 0
		for b.Loop() {
			txn := db.newTxn()
			for _, e := range entries(i) {
				_ = txn.SetEntry(e)
			}
			if err := db.commit(txn); err != nil {
				b.Fatal(err)
			}
			txn.Discard()
			i++
		}
	})
}

func BenchmarkLookup(b *testing.B) {
	miss := func(b *testing.B, db *badger.DB) {
		i := 0
		for b.Loop() {
			_ = db.View(func(txn *badger.Txn) error {
				_, err := txn.Get([]byte(fmt.Sprintf("r/%08d", i)))
				return err
			})
			i++
		}
	}
	b.Run("badger_txn", func(b *testing.B) {
		db, err := badger.Open(smallOpts(b.TempDir()))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		miss(b, db)
	})
	b.Run("managed", func(b *testing.B) {
		db, err := Open(smallOpts(b.TempDir()))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		miss(b, db.DB)
	})
}

// commit commits txn at a new timestamp and waits for it, as the Batcher did
// before it handed transactions over without waiting (BenchmarkCommit's cost of
// one commit).
func (d *DB) commit(txn *badger.Txn) error { return txn.CommitAt(d.nextTs(), nil) }
