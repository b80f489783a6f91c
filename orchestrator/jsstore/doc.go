// Package jsstore keeps an orchestrator's tasks, their events and their output in
// a NATS JetStream stream: a task.Store for an orchestrator that should keep no
// state on its own disk. It keeps the contract badgerstore and memstore keep (the
// shared tests in task/storetest prove all three).
//
// # Layout
//
// One stream (Options.Stream, file storage) holds every subject under
// Options.Prefix (P below):
//
//	P.t.<id>           the task's record: JSON of task.Task
//	P.e.<id>.<seq>     an event: JSON of task.Event; a status without its output,
//	                   which its piece holds (read back from it)
//	P.o.<id>.<offset>  a piece of output: its raw bytes (empty: no piece)
//	P.f.<id>           the finish marker: when the task ended (RFC 3339)
//
// Numbers in subjects are 20-digit zero-padded decimals, so that they sort as
// they count. A task id is one subject token: an id with '.', '*', '>' or white
// space is refused by the writes and unknown to the reads.
//
// # Why so
//
// The stream keeps one message per subject (MaxMsgsPerSubject 1), which makes it
// a key-value table: saving a record, or an event with a Seq already stored,
// publishes on its subject and replaces what was there. Reading a task is a
// direct get of the last message of its subject.
//
// A write is whole because its messages travel as one JetStream atomic batch
// (AllowAtomicPublish): the server stages them and stores all of them or none,
// and a reader never sees half of one. Save queues writes for a single writer
// goroutine, which publishes every queued write, in Save order, as one batch (or
// several in order, never splitting a write, when they pass the server's 1000
// messages or jsstore's byte bound), waits for the server's answer to the
// commit, and then runs the writes' done functions in order with it. A write
// saved with MoreComing waits, unpublished, for the next Save without it, Flush
// or Close.
//
// ReplaceOutput cannot delete the pieces it replaces in the same batch (a purge
// is no message), so it overwrites each one not among its new chunks with an
// empty message, a tombstone, which readers skip.
//
// Retention: JetStream's per-message TTLs would expire a task's events and output
// from when each was written, not from when the task ended. So the write that
// saves a record in a final state also publishes the finish marker, and a
// goroutine sweeps every Retention/4 (at most a minute, at least 100 ms): it
// purges the subjects of every task whose marker is older than the retention.
// Until the sweep comes, reads hide such a task: its record reads as absent.
//
// # Reads
//
// The lists (Tasks, Unfinished, Events, the output) read their subjects with
// batched direct gets (next_by_subj with a wildcard, paged by stream sequence)
// rather than with an ordered consumer: with one message per subject every
// stored message is its subject's last, a direct get needs no consumer to be
// made and removed, answers an empty filter at once with a 404, and is isolated
// from atomic batch commits (a page holds all of a batch or none of it).
//
// # Limits
//
//   - The finish marker is published with every save of a record in a final
//     state, not only the first: the store cannot tell the first without a read
//     on the writer's path. Its value is the record's FinishedAt, so the rewrite
//     changes nothing; for a record without FinishedAt it is the time of the
//     save, and the retention then counts from the last final save, as
//     badgerstore's TTLs do.
//   - With Replicas > 1 a direct get may be answered by a follower that has not
//     applied the latest commit yet, so a read right after a done may miss that
//     write for a moment. With one replica (the default) reads see every
//     committed write.
//   - The store speaks the JetStream API under its default prefix ($JS.API): no
//     domain or custom API prefix.
package jsstore
