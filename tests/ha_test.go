package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The failover scenarios of a group of orchestrators (docs/operations.md, "More
// than one orchestrator"). Each runs "count" tasks, submitted through a standby,
// on a three-node cluster with the tasks in a stream of 3 replicas, breaks
// something mid-run, and checks what the reliability scenarios check: every task
// ends, none ran twice (the runs file), every output is whole, and the group
// holds exactly the tasks submitted.

// haLease is the lease the groups run with.
const haLease = time.Second

// sent is one message to an agent, as a monitor on the cluster saw it.
type sent struct {
	from    string    // the sending orchestrator's name (broker.HeaderInstance)
	created time.Time // the envelope's timestamp
	seen    time.Time
}

// monitor records every message sent to an agent's work and control subjects.
type monitor struct {
	mu   sync.Mutex
	msgs []sent
}

func watchAgents(t *testing.T, nc *nats.Conn) *monitor {
	t.Helper()
	m := &monitor{}
	for _, subj := range []string{"chiffon.agent.*.work", "chiffon.agent.*.control"} {
		if _, err := nc.Subscribe(subj, func(msg *nats.Msg) {
			var env struct {
				Timestamp time.Time `json:"timestamp"`
			}
			_ = json.Unmarshal(msg.Data, &env)
			m.mu.Lock()
			m.msgs = append(m.msgs, sent{from: broker.InstanceOf(msg), created: env.Timestamp, seen: time.Now()})
			m.mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return m
}

// first returns when the first message from orchestrator name was seen after
// since; ok is false when there was none.
func (m *monitor) first(name string, since time.Time) (at time.Time, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.msgs {
		if s.from == name && s.seen.After(since) {
			return s.seen, true
		}
	}
	return time.Time{}, false
}

// createdAfter counts the messages from orchestrator name made after since.
func (m *monitor) createdAfter(name string, since time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.msgs {
		if s.from == name && s.created.After(since) {
			n++
		}
	}
	return n
}

// submitThrough submits n count tasks through orchestrator i, task k sleeping
// sleep(k), and returns their parameter n by task id.
func (s *haSite) submitThrough(i, n int, sleep func(int) string) map[string]int {
	s.t.Helper()
	ids := map[string]int{}
	for k := range n {
		params := map[string]any{"n": k}
		if d := sleep(k); d != "" {
			params["sleep"] = d
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		task, err := s.orchs[i].client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "count", Parameters: params})
		cancel()
		if err != nil {
			s.t.Fatalf("submit task %d through %s: %v", k, s.orchs[i].name, err)
		}
		ids[task.ID] = k
	}
	return ids
}

// finished counts the tasks orchestrator i lists in a final state; -1 when it
// does not answer.
func (s *haSite) finished(i int) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tasks, err := s.orchs[i].client.List(ctx, api.ListOptions{Limit: 1000})
	if err != nil {
		return -1
	}
	n := 0
	for _, t := range tasks {
		if t.State.Final() {
			n++
		}
	}
	return n
}

// verify waits, reading through orchestrator i, until every task of ids has
// ended, and checks each succeeded once with its whole output, and that the
// group holds no other task.
func (s *haSite) verify(i int, ids map[string]int) {
	s.t.Helper()
	s.waitFor(fmt.Sprintf("%d tasks finished", len(ids)), 3*time.Minute, func() bool { return s.finished(i) >= len(ids) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all, err := s.orchs[i].client.List(ctx, api.ListOptions{Limit: 1000})
	if err != nil {
		s.t.Fatal(err)
	}
	if len(all) != len(ids) {
		s.t.Errorf("the group holds %d tasks, %d were submitted", len(all), len(ids))
	}
	runs := s.runs()
	for _, t := range all {
		n, ok := ids[t.ID]
		if !ok {
			s.t.Errorf("task %s was never submitted", t.ID)
			continue
		}
		if t.State != task.StateSucceeded {
			s.t.Errorf("task %d (%s) ended %s: %+v", n, t.ID, t.State, t.Error)
			continue
		}
		if runs[t.RequestID] != 1 {
			s.t.Errorf("task %d (%s) ran %d times", n, t.ID, runs[t.RequestID])
		}
		var out strings.Builder
		if _, err := s.orchs[i].client.Output(ctx, t.ID, &out); err != nil {
			s.t.Fatal(err)
		}
		if want := fmt.Sprintf("out %d %s\n", n, t.RequestID); out.String() != want {
			s.t.Errorf("task %d output %q, want %q", n, out.String(), want)
		}
	}
	if len(runs) != len(ids) {
		s.t.Errorf("%d requests ran, %d tasks were submitted", len(runs), len(ids))
	}
}

// startGroup starts orchestrator 0 (which leads), orchestrator 1 (a standby) and
// the agents.
func (s *haSite) startGroup() (lead, standby int) {
	s.t.Helper()
	s.startOrch(0)
	if got := s.leader(30 * time.Second); got != 0 {
		s.t.Fatalf("orchestrator %d leads, want the first one", got)
	}
	s.startOrch(1)
	if r := s.role(1); r != "standby" {
		s.t.Fatalf("the second orchestrator is %q, want standby", r)
	}
	for _, id := range s.agentIDs {
		s.startAgent(id)
	}
	return 0, 1
}

// The leader SIGKILLed mid-run: the standby takes over, resumes every task from
// the store and re-sends it with its request_id; every task ends once, whole.
// The tasks go in through the standby, forwarded, and are created once.
func TestHALeaderKilled(t *testing.T) {
	s := newHASite(t, 2, 2, haLease)
	mon := watchAgents(t, s.connect())
	lead, standby := s.startGroup()
	oldName := s.leaderName(standby)
	ids := s.submitThrough(standby, 40, sleepEvery(2, "1"))
	s.waitFor("a quarter of the tasks finished", time.Minute, func() bool { return s.finished(standby) >= len(ids)/4 })

	killed := time.Now()
	s.orchs[lead].p.kill(t)
	if got := s.leader(30 * time.Second); got != standby {
		t.Fatalf("orchestrator %d leads after the kill, want the standby", got)
	}
	tookOver := time.Since(killed)
	newName := s.leaderName(standby)
	if newName == oldName || newName == "" {
		t.Fatalf("leader after the kill: %q (before: %q)", newName, oldName)
	}
	s.verify(standby, ids)
	at, ok := mon.first(newName, killed)
	if !ok {
		t.Fatal("the new leader sent nothing to the agents")
	}
	t.Logf("leader SIGKILLed: the standby leads after %s and sends its first message to an agent %s after the kill (lease %s; target: within %s)",
		tookOver.Round(time.Millisecond), at.Sub(killed).Round(time.Millisecond), haLease, 2*haLease)
}

// One NATS node, the task stream's leader, killed mid-run and started again on
// its data: the stream elects another leader, the orchestrators reconnect, and
// every task ends once, whole.
func TestHANodeRestarted(t *testing.T) {
	// The default lease: a stream elects its new leader within a few seconds,
	// and the orchestrator's renewals wait for it.
	s := newHASite(t, 2, 2, orchestrator.DefaultLease)
	nc := s.connect()
	lead0, standby := s.startGroup()
	ids := s.submitThrough(standby, 40, sleepEvery(2, "1"))
	s.waitFor("a quarter of the tasks finished", time.Minute, func() bool { return s.finished(standby) >= len(ids)/4 })

	js := mustJetStream(t, nc)
	node := s.streamLeader(js)
	if node < 0 {
		t.Fatal("no stream leader")
	}
	s.killNode(node)
	time.Sleep(2 * time.Second) // the fault is the passing of time
	s.startNode(node)
	lead := s.leader(time.Minute)
	s.verify(lead, ids)
	t.Logf("node-%d (the stream's leader) was down 2s; orchestrator %d led before, %d after (lease %s)",
		node+1, lead0+1, lead+1, orchestrator.DefaultLease)
}

// The leader SIGSTOPped past its lease: the standby takes over. SIGCONTed, the old
// leader sends nothing to an agent and writes nothing to the store (the stream
// and a monitor of the agents' subjects say who sent what), and steps down.
func TestHALeaderStoppedPastItsLease(t *testing.T) {
	s := newHASite(t, 2, 2, haLease)
	nc := s.connect()
	mon := watchAgents(t, nc)
	lead, standby := s.startGroup()
	oldName := s.leaderName(lead)
	ids := s.submitThrough(lead, 30, sleepEvery(2, "1"))
	s.waitFor("a quarter of the tasks finished", time.Minute, func() bool { return s.finished(lead) >= len(ids)/4 })

	old := s.orchs[lead].p
	old.suspend(t)
	stopped := time.Now()
	if got := s.leader(30 * time.Second); got != standby { // the stopped one cannot answer
		t.Fatalf("orchestrator %d leads, want the standby", got)
	}
	tookOver := time.Now()
	t.Logf("the standby leads %s after the SIGSTOP (lease %s)", tookOver.Sub(stopped).Round(time.Millisecond), haLease)
	for id, n := range s.submitThrough(standby, 10, sleepEvery(3, "1")) {
		ids[id] = n
	}
	if err := old.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	s.waitFor("the old leader steps down", 30*time.Second, func() bool { return s.role(lead) == "standby" })
	s.verify(standby, ids)

	if n := mon.createdAfter(oldName, stopped); n > 0 {
		t.Errorf("the old leader sent %d messages to agents after its SIGSTOP", n)
	}
	writes := 0
	for _, w := range s.storedWriters(nc) {
		if w.name == oldName && w.at.After(tookOver) {
			writes++
		}
	}
	if writes > 0 {
		t.Errorf("the store holds %d messages the old leader wrote after the takeover", writes)
	}
}

func mustJetStream(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
