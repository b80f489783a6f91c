package jsstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/orchestrator/jsstore"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go/jetstream"
)

// The two ways a store commits: on one replica in order, in two rounds of
// plain publishes; on three replicas as atomic batches.

// replicated opens a store of three replicas on a three-node cluster, and
// returns it with its options and a connection to the cluster.
func replicated(t *testing.T) (*jsstore.Store, jsstore.Options, *testnats.Cluster) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := testnats.StartCluster(t, broker.LocalClusterConfig{})
	opts := freshOptions(0)
	opts.Replicas = 3
	return open(t, c.ConnectNode(0), opts), opts, c
}

// eachCommit runs test on a store of one replica and on one of three.
func eachCommit(t *testing.T, test func(t *testing.T, s *jsstore.Store)) {
	t.Run("OneReplica", func(t *testing.T) {
		srv, _ := startServer(t, "")
		test(t, open(t, connect(t, srv), freshOptions(0)))
	})
	t.Run("ThreeReplicas", func(t *testing.T) {
		s, _, _ := replicated(t)
		test(t, s)
	})
}

func TestACommittedWriteIsStoredWhole(t *testing.T) {
	eachCommit(t, func(t *testing.T, s *jsstore.Store) {
		mustSave(t, s, fullWrite("task-1", "out"))
		if _, err := s.Task("task-1"); err != nil || eventCount(t, s, "task-1") != 3 || outputOf(t, s, "task-1") != "out" {
			t.Fatalf("after a committed write: %v, %d events, output %q", err, eventCount(t, s, "task-1"), outputOf(t, s, "task-1"))
		}
	})
}

// A reader that sees a record also sees the events saved with it: the write of
// attempt i carries event i, so a record of attempt i comes with i events.
func TestAReaderThatSeesARecordSeesItsEvents(t *testing.T) {
	eachCommit(t, func(t *testing.T, s *jsstore.Store) {
		const writes = 200
		done := make(chan struct{})
		errc := make(chan error, writes)
		go func() {
			defer close(done)
			for i := 1; i <= writes; i++ {
				tk := newTask("task-1", task.StateRunning)
				tk.Attempts = i
				s.Save(&task.Write{ID: tk.ID, Task: tk, Events: []*task.Event{event(int64(i), "e")}, MoreComing: i%4 != 0},
					func(err error) { errc <- err })
			}
			s.Flush()
		}()
		checked := 0
		for got := 0; got < writes; {
			select {
			case err := <-errc:
				if err != nil {
					t.Fatal(err)
				}
				got++
			default:
			}
			tk, err := s.Task("task-1")
			if errors.Is(err, task.ErrNotFound) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := eventCount(t, s, "task-1"); n < tk.Attempts {
				t.Fatalf("record of attempt %d read with %d events", tk.Attempts, n)
			}
			checked++
		}
		<-done
		if checked == 0 {
			t.Fatal("the reader never saw the record")
		}
	})
}

// refuseLargeMessages makes the stream of opts refuse messages over 1 KiB.
func refuseLargeMessages(t *testing.T, js jetstream.JetStream, st jetstream.Stream) {
	t.Helper()
	cfg := st.CachedInfo().Config
	cfg.MaxMsgSize = 1024
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// outcomes is a done function for each of n writes and a function that waits
// for their outcomes, in order.
func outcomes(t *testing.T, n int) ([]func(error), func() []error) {
	chans := make([]chan error, n)
	dones := make([]func(error), n)
	for i := range chans {
		c := make(chan error, 1)
		chans[i], dones[i] = c, func(err error) { c <- err }
	}
	return dones, func() []error {
		t.Helper()
		out := make([]error, n)
		for i, c := range chans {
			select {
			case out[i] = <-c:
			case <-time.After(wait):
				t.Fatalf("write %d never answered", i+1)
			}
		}
		return out
	}
}

// saveBoth saves first, held, and second in one commit, and returns their
// outcomes.
func saveBoth(t *testing.T, s *jsstore.Store, first, second *task.Write) (error, error) {
	t.Helper()
	first.MoreComing = true
	dones, wait := outcomes(t, 2)
	s.Save(first, dones[0])
	s.Save(second, dones[1])
	out := wait()
	return out[0], out[1]
}

// On three replicas a write is whole: when the server refuses one message of
// an atomic batch, it stores none, and every write of the batch fails.
func TestARefusedBatchStoresNothing(t *testing.T) {
	s, opts, c := replicated(t)
	nc := c.ConnectNode(0)
	t.Cleanup(nc.Close)
	_, js, st := streamOf(t, nc, opts.Stream)
	refuseLargeMessages(t, js, st)
	err1, err2 := saveBoth(t, s, fullWrite("task-1", strings.Repeat("x", 2000)), fullWrite("task-2", "small"))
	if err1 == nil || err2 == nil {
		t.Fatalf("writes of a refused batch: %v, %v; want both refused", err1, err2)
	}
	t.Logf("refused: %v", err1)
	for _, id := range []string{"task-1", "task-2"} {
		if _, err := s.Task(id); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("record of %s after a refused batch: %v", id, err)
		}
		if n, out := eventCount(t, s, id), outputOf(t, s, id); n != 0 || out != "" {
			t.Errorf("%s after a refused batch: %d events, output %q", id, n, out)
		}
	}
	if counts := subjectCounts(t, nc, opts); len(counts) != 0 {
		t.Errorf("stream holds %v after a refused batch", counts)
	}
}

// On one replica a write whose message the server refuses fails, and its
// record is not stored (its events, published first, may be); the write
// committed with it is stored whole.
func TestOneReplicaStoresNoRecordOfARefusedWrite(t *testing.T) {
	srv, _ := startServer(t, "")
	nc := connect(t, srv)
	opts := freshOptions(0)
	s := open(t, nc, opts)
	_, js, st := streamOf(t, nc, opts.Stream)
	refuseLargeMessages(t, js, st)
	err1, err2 := saveBoth(t, s, fullWrite("task-1", strings.Repeat("x", 2000)), fullWrite("task-2", "small"))
	if err1 == nil {
		t.Fatal("a write with a refused message succeeded")
	}
	t.Logf("refused: %v", err1)
	if err2 != nil {
		t.Fatalf("the write committed with a refused one: %v", err2)
	}
	if _, err := s.Task("task-1"); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("record of a refused write: %v, want none", err)
	}
	if out := outputOf(t, s, "task-1"); out != "" {
		t.Errorf("output of a refused write: %q", out)
	}
	if _, err := s.Task("task-2"); err != nil || eventCount(t, s, "task-2") != 3 || outputOf(t, s, "task-2") != "small" {
		t.Errorf("the other write: %v, %d events, output %q", err, eventCount(t, s, "task-2"), outputOf(t, s, "task-2"))
	}
}

// A write to a stream that is gone fails, after a while, as unavailable: the
// API answers 503.
func TestAWriteToAGoneStreamIsUnavailable(t *testing.T) {
	jsstore.SetNoRespondersFor(t, time.Second)
	eachCommit(t, func(t *testing.T, s *jsstore.Store) {
		if err := s.DeleteStream(); err != nil {
			t.Fatal(err)
		}
		err := save(t, s, fullWrite("task-1", "out"))
		if !errors.Is(err, task.ErrUnavailable) {
			t.Fatalf("write to a deleted stream: %v, want task.ErrUnavailable (the API's 503)", err)
		}
		t.Logf("refused: %v", err)
		if _, err := s.Task("task-1"); err == nil {
			t.Fatal("Task read from a deleted stream")
		}
	})
}

// A write saved with MoreComing is held and committed with the next write,
// before it, and the later record wins. On three replicas both are in one
// atomic batch (the batch id the server stores with each message is the same);
// on one replica in one commit's two rounds: the held write's record is
// stored after the next write's event.
func TestHeldWriteCommitsWithTheNext(t *testing.T) {
	eachCommit(t, func(t *testing.T, s *jsstore.Store) {
		for i := int64(1); i <= 40; i += 2 {
			held, next := newTask("task-1", task.StateRunning), newTask("task-1", task.StateRunning)
			held.Attempts, next.Attempts = int(i), int(i+1)
			other := newTask("task-2", task.StateRunning)
			other.Attempts = int(i)
			// task-2's write is held, then task-1's two.
			s.Save(&task.Write{ID: "task-2", Task: other, MoreComing: true}, func(error) {})
			err1, err2 := saveBoth(t, s,
				&task.Write{ID: "task-1", Task: held, Events: []*task.Event{event(i, "held")}},
				&task.Write{ID: "task-1", Task: next, Events: []*task.Event{event(i+1, "next")}})
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if got, err := s.Task("task-1"); err != nil || got.Attempts != int(i+1) {
				t.Fatalf("record after a held write and the next: %+v %v, want attempt %d", got, err, i+1)
			}
			heldEv, nextEv, heldRec := s.Stored(fmt.Sprintf("e.task-1.%020d", i)), s.Stored(fmt.Sprintf("e.task-1.%020d", i+1)), s.Stored("t.task-2")
			if heldEv.Err != nil || nextEv.Err != nil || heldRec.Err != nil {
				t.Fatal(heldEv.Err, nextEv.Err, heldRec.Err)
			}
			if s.Replicas() > 1 {
				if heldEv.Batch == "" || heldEv.Batch != nextEv.Batch || heldRec.Batch != nextEv.Batch {
					t.Fatalf("held writes in batches %q and %q, the next in %q: want one batch", heldRec.Batch, heldEv.Batch, nextEv.Batch)
				}
				continue
			}
			if !(heldEv.Seq < nextEv.Seq && nextEv.Seq < heldRec.Seq) {
				t.Fatalf("held event at %d, next event at %d, held record at %d: want the records after every event", heldEv.Seq, nextEv.Seq, heldRec.Seq)
			}
		}
	})
}

// On one replica a write that fails with an error that passes is published
// again with every write after it in its commit, so that a later write of the
// same task is stored last again; when the retries give up, it and the writes
// after it fail, as the writes of an atomic batch do together, and the writes
// before it stand.
func TestOneReplicaRetriesAWriteWithTheWritesAfterIt(t *testing.T) {
	jsstore.SetNoRespondersFor(t, 500*time.Millisecond)
	srv, _ := startServer(t, "")
	s := open(t, connect(t, srv), freshOptions(0))
	dones, waitAll := outcomes(t, 3)
	before := fullWrite("task-1", "one")
	before.MoreComing = true
	s.Save(before, dones[0])
	s.SaveOutside(true, dones[1])
	s.Save(fullWrite("task-2", "two"), dones[2])
	got := waitAll()
	if got[0] != nil || !errors.Is(got[1], task.ErrUnavailable) || !errors.Is(got[2], task.ErrUnavailable) {
		t.Fatalf("outcomes %v; want nil, then unavailable for the failing write and the one after it", got)
	}
	if _, err := s.Task("task-2"); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("record of the failed write after the failing one: %v, want none", err)
	}
	first, after := s.Stored("t.task-1"), s.Stored(fmt.Sprintf("e.task-2.%020d", 3))
	if first.Err != nil || after.Err != nil {
		t.Fatal(first.Err, after.Err)
	}
	// The first try stored the events of both writes, then the first one's
	// record: events of the write after the failing one stored after that
	// record were published again.
	if after.Seq <= first.Seq {
		t.Fatalf("the write after the failing one stored at %d, the record before it at %d: published once only", after.Seq, first.Seq)
	}
}
