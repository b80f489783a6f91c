package jsstore_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/orchestrator/jsstore"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// candidate is a store in an election, with what it was told.
type candidate struct {
	*jsstore.Store
	led  chan struct{}
	lost chan error
}

// elect opens a store on opts over its own connection and makes it a candidate
// named name.
func elect(t *testing.T, url string, opts jsstore.Options, name string, lease time.Duration) *candidate {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c := &candidate{Store: open(t, nc, opts), led: make(chan struct{}, 8), lost: make(chan error, 8)}
	err = c.Elect(jsstore.ElectOptions{Name: name, API: "http://" + name, Lease: lease,
		OnLead: func() { c.led <- struct{}{} },
		OnLose: func(err error) { c.lost <- err }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *candidate) waitLead(t *testing.T) {
	t.Helper()
	select {
	case <-c.led:
	case <-time.After(wait):
		t.Fatalf("not leading within %s", wait)
	}
}

func (c *candidate) waitLost(t *testing.T) error {
	t.Helper()
	select {
	case err := <-c.lost:
		return err
	case <-time.After(wait):
		t.Fatalf("still leading after %s", wait)
		return nil
	}
}

// One of two candidates leads; the other's writes are refused, and it names the
// leader.
func TestOneCandidateLeads(t *testing.T) {
	srv, _ := startServer(t, "")
	opts := freshOptions(0)
	a := elect(t, srv.ClientURL(), opts, "a", time.Second)
	a.waitLead(t)
	b := elect(t, srv.ClientURL(), opts, "b", time.Second)
	waitFor(t, "b sees a lead", func() bool { l, ok := b.Leader(); return ok && l.Name == "a" })
	if l, _ := b.Leader(); l.API != "http://a" {
		t.Errorf("leader's API = %q, want http://a", l.API)
	}
	if !a.Leading() || b.Leading() {
		t.Fatalf("leading: a %v, b %v", a.Leading(), b.Leading())
	}
	mustSave(t, a, fullWrite("t1", "out"))
	if err := save(t, b, fullWrite("t2", "out")); !errors.Is(err, jsstore.ErrNotLeader) {
		t.Fatalf("standby's write: %v, want ErrNotLeader", err)
	}
	if _, err := b.Task("t2"); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("standby's write stored: %v", err)
	}
	if got, err := b.Task("t1"); err != nil || got.ID != "t1" {
		t.Fatalf("the standby reads the leader's write: %v, %v", got, err)
	}
	// Renewals go on: a stays the leader for several leases.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-b.led:
			t.Fatal("b took over from a live leader")
		case err := <-a.lost:
			t.Fatalf("a lost the lead: %v", err)
		case <-time.After(100 * time.Millisecond): // watching for three leases
		}
	}
}

// takeOver writes a leadership record of a new term over the one at sequence
// seq, as a standby that found the lease lapsed does.
func takeOver(t *testing.T, nc *nats.Conn, opts jsstore.Options, seq uint64) {
	t.Helper()
	data, _ := json.Marshal(jsstore.Leader{Name: "usurper", Term: "t-new", Since: time.Now(), LeaseMS: 1000})
	msg := &nats.Msg{Subject: opts.Prefix + ".leader", Data: data,
		Header: nats.Header{jetstream.ExpectedLastSubjSeqHeader: {strconv.FormatUint(seq, 10)}}}
	resp, err := nc.RequestMsg(msg, wait)
	if err != nil {
		t.Fatal(err)
	}
	var ack struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &ack); err != nil || ack.Error != nil {
		t.Fatalf("take over: %s", resp.Data)
	}
}

// lastLeaderSeq returns the stream sequence of the leadership record.
func lastLeaderSeq(t *testing.T, nc *nats.Conn, opts jsstore.Options) uint64 {
	t.Helper()
	ctx, _, st := streamOf(t, nc, opts.Stream)
	m, err := st.GetLastMsgForSubject(ctx, opts.Prefix+".leader")
	if err != nil {
		t.Fatal(err)
	}
	return m.Sequence
}

// Fencing: a leader whose term was taken over without its knowing (it stalled)
// has its next write refused by the stream, learns it is deposed, and writes
// nothing more.
func TestDeposedLeaderWritesAreRefusedByTheStream(t *testing.T) {
	srv, _ := startServer(t, "")
	opts := freshOptions(0)
	// A long lease: the leader believes it leads for the whole test.
	a := elect(t, srv.ClientURL(), opts, "a", time.Minute)
	a.waitLead(t)
	mustSave(t, a, fullWrite("before", "x"))
	nc := connect(t, srv)
	takeOver(t, nc, opts, lastLeaderSeq(t, nc, opts))
	if !a.Leading() {
		t.Fatal("a should still believe it leads: nothing told it")
	}
	err := save(t, a, fullWrite("after", "y"))
	if !errors.Is(err, jsstore.ErrNotLeader) || !errors.Is(err, jsstore.ErrDeposed) {
		t.Fatalf("deposed leader's write: %v, want ErrNotLeader (ErrDeposed)", err)
	}
	if why := a.waitLost(t); !errors.Is(why, jsstore.ErrDeposed) {
		t.Fatalf("OnLose: %v, want ErrDeposed", why)
	}
	if a.Leading() {
		t.Fatal("a still says it leads")
	}
	if subj := subjectsOf(subjectCounts(t, nc, opts), "after"); len(subj) != 0 {
		t.Fatalf("the deposed leader's write is in the stream: %v", subj)
	}
	if err := a.ReplaceOutput("before", "replaced"); !errors.Is(err, jsstore.ErrNotLeader) {
		t.Fatalf("deposed leader's ReplaceOutput: %v, want ErrNotLeader", err)
	}
	if got := outputOf(t, a, "before"); got != "x" {
		t.Fatalf("output after the deposed leader's ReplaceOutput = %q, want x", got)
	}
}

// A leader that stalls past its lease (its writer blocked, as a SIGSTOP or a long
// pause would) is replaced by a standby; when it resumes it stops leading before
// it writes, and its queued write is refused.
func TestStalledLeaderIsReplacedAndStepsDown(t *testing.T) {
	srv, _ := startServer(t, "")
	opts := freshOptions(0)
	const lease = 300 * time.Millisecond
	a := elect(t, srv.ClientURL(), opts, "a", lease)
	a.waitLead(t)
	b := elect(t, srv.ClientURL(), opts, "b", lease)
	waitFor(t, "b sees a lead", func() bool { l, ok := b.Leader(); return ok && l.Name == "a" })

	release := make(chan struct{})
	stalled := make(chan struct{})
	a.Save(fullWrite("stall", "s"), func(error) { close(stalled); <-release }) // blocks a's writer
	<-stalled
	errc := make(chan error, 1)
	a.Save(fullWrite("late", "l"), func(err error) { errc <- err }) // queued behind the stall
	b.waitLead(t)
	mustSave(t, b, fullWrite("by-b", "b"))
	close(release)

	why := a.waitLost(t)
	if !errors.Is(why, jsstore.ErrDeposed) && !errors.Is(why, jsstore.ErrLeaseLapsed) {
		t.Fatalf("OnLose: %v", why)
	}
	if err := <-errc; !errors.Is(err, jsstore.ErrNotLeader) {
		t.Fatalf("the stalled leader's queued write: %v, want ErrNotLeader", err)
	}
	if _, err := b.Task("late"); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("the stalled leader's write was stored: %v", err)
	}
	if l, _ := a.Leader(); l.Name == "a" && a.Leading() {
		t.Fatal("a still leads")
	}
	waitFor(t, "a sees b lead", func() bool { l, ok := a.Leader(); return ok && l.Name == "b" })
}

// A leader that closes resigns: a standby takes over without waiting for the
// lease (a minute here).
func TestClosingLeaderResigns(t *testing.T) {
	srv, _ := startServer(t, "")
	opts := freshOptions(0)
	a := elect(t, srv.ClientURL(), opts, "a", time.Minute)
	a.waitLead(t)
	b := elect(t, srv.ClientURL(), opts, "b", time.Minute)
	waitFor(t, "b sees a lead", func() bool { l, ok := b.Leader(); return ok && l.Name == "a" })
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b.waitLead(t)
}

// A write saved while the server is down is committed once it is back, and so is
// a replacement of a task's output: the writer tries again rather than failing
// the write. The connection buffers
// nothing while it reconnects, so that every try fails at once.
func TestWriteWaitsForTheServerToComeBack(t *testing.T) {
	srv, cfg := startServer(t, "")
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.ReconnectBufSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	opts := freshOptions(0)
	s := open(t, nc, opts)
	mustSave(t, s, fullWrite("first", "1"))
	cfg.Port = srv.Port()
	srv.Shutdown()
	errc, replaced := make(chan error, 1), make(chan error, 1)
	s.Save(fullWrite("second", "2"), func(err error) { errc <- err })
	go func() { replaced <- s.ReplaceOutput("first", "replaced") }()
	select {
	case err := <-errc:
		t.Fatalf("the write ended with the server down: %v", err)
	case err := <-replaced:
		t.Fatalf("the output's replacement ended with the server down: %v", err)
	case <-time.After(300 * time.Millisecond): // a few of the writer's tries
	}
	testnats.Start(t, cfg)
	for _, c := range []chan error{errc, replaced} {
		select {
		case err := <-c:
			if err != nil {
				t.Fatalf("write after the restart: %v", err)
			}
		case <-time.After(3 * wait):
			t.Fatal("a write did not commit after the server came back")
		}
	}
	if got := outputOf(t, s, "second"); got != "2" {
		t.Fatalf("output = %q", got)
	}
	if got := outputOf(t, s, "first"); got != "replaced" {
		t.Fatalf("output replaced = %q", got)
	}
}

// Elect refuses a lease too short and a second election.
func TestElectRefusesBadOptions(t *testing.T) {
	srv, _ := startServer(t, "")
	s := open(t, connect(t, srv), freshOptions(0))
	if err := s.Elect(jsstore.ElectOptions{Name: "a", Lease: time.Millisecond}); err == nil {
		t.Fatal("1ms lease taken")
	}
	if err := s.Elect(jsstore.ElectOptions{Lease: time.Second}); err == nil {
		t.Fatal("nameless candidate taken")
	}
	if err := s.Elect(jsstore.ElectOptions{Name: "a", Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := s.Elect(jsstore.ElectOptions{Name: "a", Lease: time.Second}); err == nil {
		t.Fatal("second election taken")
	}
}
