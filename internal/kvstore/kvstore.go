// Package kvstore holds what the agent's dedupe cache and the orchestrator's task store
// share about Badger: options that keep an idle daemon small in memory, a logger that
// goes through slog, and the value log's garbage collection.
package kvstore

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unsafe"

	"github.com/dgraph-io/badger/v4"
)

// SmallOptions returns Badger options for dir sized for a daemon's state rather than a
// database server. Badger's defaults take ~450 MiB of RSS (64 MiB memtables, a 256 MiB
// block cache, 1 GiB value log files); these keep it to a few MiB. Callers tune the
// table, cache and value sizes of their own data on top.
func SmallOptions(dir string, log *slog.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(Logger{Log: log}).
		// A level-0 table overlaps much of level 1 (the orchestrator's keys take
		// three prefixes; before UUIDv7 ids they were random), so each compaction
		// rewrites much of it: fewer, larger level-0 tables mean fewer rewrites.
		// 8 MiB memtables and 4 level-0 tables before compacting took 40,000
		// parallel dispatches (random ids then) from 85 to 66-72 µs each (4 MiB and
		// 2 before). Memtables fill lazily: an idle daemon does not hold them.
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithNumLevelZeroTables(4).
		WithNumLevelZeroTablesStall(8).
		WithNumCompactors(2).
		// Every value but the smallest goes to the value log, written once, and the
		// tree holds a pointer: records are written often and read rarely, and
		// memtable flushes and compactions then move pointers, not records. 100,000
		// parallel dispatches took 90-98 µs each, against 97-131 µs with the
		// records in the tree (a threshold of 4 KiB). With UUIDv7 ids, 150,000
		// took 50-56 µs each at 128 bytes, 54-58 at 512, 59-75 at 1 KiB and 60-78
		// at 4 KiB.
		WithValueThreshold(128)
	// Block compression stays on (Snappy): it costs ~5% of a busy daemon's CPU,
	// but without it every table Badger writes is larger, and writing and
	// msyncing tables made 40,000 dispatches 50% slower.
}

// Logger sends Badger's warnings and errors to slog and drops its chatter.
type Logger struct{ Log *slog.Logger }

// Errorf logs at error level.
func (l Logger) Errorf(f string, a ...any) {
	l.Log.Error("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}

// Warningf logs at warn level.
func (l Logger) Warningf(f string, a ...any) {
	l.Log.Warn("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}

// Infof drops Badger's informational messages.
func (Logger) Infof(string, ...any) {}

// Debugf drops Badger's debug messages.
func (Logger) Debugf(string, ...any) {}

// RunGC reclaims value log space every interval until done is closed.
func RunGC(db *badger.DB, interval time.Duration, done <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			for db.RunValueLogGC(0.5) == nil {
			}
		}
	}
}

// StringValue is s as an entry value, without a copy. Badger only reads a value it
// is given (it copies it into its value log or memtable), and a string's bytes never
// change, so a large output piece need not be duplicated to be stored.
func StringValue(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
