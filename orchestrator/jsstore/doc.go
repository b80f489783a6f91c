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
//	P.r.<kind>.<id>    a record (task.Store.PutRecord): its raw bytes (empty: a
//	                   deleted record's tombstone)
//	P.leader           the leadership record (see Elect): JSON of Leader
//
// Numbers in subjects are 20-digit zero-padded decimals, so that they sort as
// they count. A task id is one subject token: an id with '.', '*', '>' or white
// space is refused by the writes and unknown to the reads. A record's kind and id
// are each one token too (task.CheckKey); anything else is refused.
//
// # Why so
//
// The stream keeps one message per subject (MaxMsgsPerSubject 1), which makes it
// a key-value table: saving a record, or an event with a Seq already stored,
// publishes on its subject and replaces what was there. Reading a task is a
// direct get of the last message of its subject.
//
// Save queues writes for a single writer goroutine, which commits every queued
// write in Save order and then runs the writes' done functions in order with
// their outcomes. A write saved with MoreComing waits, unpublished, for the next
// Save without it, Flush or Close. How the writer commits depends on the
// stream's replicas:
//
//   - On replicas a write is whole: the queued writes travel as one JetStream
//     atomic batch (AllowAtomicPublish; several in order, never splitting a
//     write, past the server's 1000 messages or jsstore's byte bound), which
//     the server stages and stores all or none, so a reader never sees half of
//     one, and every write of a batch gets the batch's outcome.
//   - On one replica the server stages an atomic batch in a store on disk of
//     its own, about 2 ms a commit, so the writer publishes instead in two
//     rounds of plain publishes, gathering each round's acknowledgements: the
//     events and output first, the records after (see ordered.go). A reader
//     that sees a record sees the events and output saved with it; a write
//     whose message the server refuses fails alone, without its record.
//
// ReplaceOutput cannot delete the pieces it replaces in the same batch (a purge
// is no message), so it overwrites each one not among its new chunks with an
// empty message, a tombstone, which readers skip. PutRecord deletes a record the
// same way, so that the delete is a fenced write in order with the others; an
// empty record therefore cannot be stored (ErrEmptyRecord).
//
// Retention: JetStream's per-message TTLs would expire a task's events and output
// from when each was written, not from when the task ended. So the write that
// saves a record in a final state also publishes the finish marker, and a
// goroutine sweeps every Retention/4 (at most a minute, at least 100 ms): it
// purges the subjects of every task whose marker is older than the retention.
// Until the sweep comes, reads hide such a task: its record reads as absent.
// Records (P.r.) have no marker: they never expire, and the sweep leaves them.
//
// # Leadership and fencing
//
// Several orchestrators may share the stream, one leading (Elect). The record
// on P.leader is a lease: its writer leads while it keeps rewriting it, each
// rewrite conditional on the record's last stream sequence being the one it
// wrote before (Nats-Expected-Last-Subject-Sequence), which is compare-and-set
// as a JetStream KV bucket does it, on the stream's own subject. The leader
// rewrites it every quarter of the lease and stops leading, by its own clock, a
// lease after the last rewrite it sent. A standby reads it every quarter lease
// (at least every second) and, when it has not changed for a whole lease of the
// standby's clock since it first saw it, writes a new term's record conditional
// on that sequence: of several standbys one wins. The standby measures from
// when it saw the record, after the leader sent it, so the leader's own lease
// ends first unless their clocks run at different rates.
//
// That alone does not stop a leader that stalled (SIGSTOP, a long pause, a
// partition) from writing when it comes back and before it reads its clock. So
// every batch the writer commits is fenced: its first message (on one replica,
// every message) expects the leadership record's last sequence to be the term's
// (the header Nats-Expected-Last-Subject-Sequence-Subject names P.leader), and
// the server refuses it once another term began. The writer learns it was
// deposed from the refusal, calls OnLose before the writes' done functions, and
// fails them and every later write with ErrNotLeader. The renewals go through
// the writer too, so a batch is never fenced by a sequence its own renewal has
// just moved; a renewal that landed unanswered is found by reading the record
// back (its term is still the store's).
//
// A write that fails because the server is out of reach is committed again,
// with backoff, until it lands: the batch rewrites the same subjects with the
// same messages, so a commit that landed unanswered changes nothing when made
// again. On one replica the write is published again with every write after it
// in its commit, so that a later write of the same task is stored last again.
// In an election the retries stop when the lease lapses.
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
//   - On one replica a write that fails after its first round (a message
//     refused, or a leader deposed between the rounds) may leave its events
//     stored without its record. They read as the status events do, which are
//     saved without a record: in the task's history, and a core that recovers
//     the task numbers its next events after them.
//   - The store speaks the JetStream API under its default prefix ($JS.API): no
//     domain or custom API prefix.
package jsstore
