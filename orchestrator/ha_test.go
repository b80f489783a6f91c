package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
)

// haLease is the lease of the groups of these tests.
const haLease = 400 * time.Millisecond

// newHAEnv is a JetStream env whose orchestrators form a group.
func newHAEnv(t *testing.T, agentIDs ...string) *env {
	e := newStoreEnv(t, orchestrator.StoreJetStream, agentIDs...)
	e.cfg.ID = "orch-group"
	e.cfg.HA = orchestrator.HAConfig{Enabled: true, Lease: haLease}
	return e
}

// openMember opens one orchestrator of e's group, with a data dir of its own.
func (e *env) openMember(name string) *orchestrator.Orchestrator {
	e.t.Helper()
	cfg := e.cfg
	cfg.DataDir = e.t.TempDir()
	cfg.HA.AdvertiseURL = "http://" + name
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("member", name)
	o, err := orchestrator.Open(cfg, orchestrator.Options{Logger: log})
	if err != nil {
		e.t.Fatalf("Open %s: %v", name, err)
	}
	e.t.Cleanup(func() { o.Close() })
	return o
}

func waitRole(t *testing.T, o *orchestrator.Orchestrator, role string) {
	t.Helper()
	waitFor(t, "role "+role, func() bool { return o.Role().Role == role })
}

// readiness returns o's /readyz answer.
func readiness(t *testing.T, e *env, o *orchestrator.Orchestrator) orchestrator.Readiness {
	t.Helper()
	c := e.client(o)
	resp, err := c.HTTP.Get(c.BaseURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r orchestrator.Readiness
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

// One orchestrator of a group leads; the other serves reads, forwards a submit
// (which creates its task once) and the agent list to the leader, follows the
// task's events in the store, and says who leads.
func TestGroupStandbyServesAndForwards(t *testing.T) {
	e := newHAEnv(t, "code-1")
	a := e.openMember("a")
	waitRole(t, a, "leader")
	b := e.openMember("b")
	waitFor(t, "b sees a lead", func() bool { l := b.Role().Leader; return l != nil && l.API == "http://a" })
	if got := b.Role().Role; got != "standby" {
		t.Fatalf("b is %q, want standby", got)
	}
	if r := readiness(t, e, b); r.Status != "ready" || r.Role.Role != "standby" || r.Leader == nil || r.Leader.API != "http://a" {
		t.Fatalf("b's /readyz: %+v", r)
	}
	if r := readiness(t, e, a); r.Role.Role != "leader" {
		t.Fatalf("a's /readyz: %+v", r)
	}
	e.o = a
	ag := e.fakeAgent("code-1")
	ag.listen()
	ag.register(2)

	cb := e.client(b)
	ctx := context.Background()
	agents, err := cb.Agents(ctx)
	if err != nil || len(agents) != 1 || agents[0].ID != "code-1" {
		t.Fatalf("agents through the standby: %+v, %v", agents, err)
	}
	tk, err := cb.Submit(ctx, orchestrator.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"})
	if err != nil {
		t.Fatalf("submit through the standby: %v", err)
	}
	w := ag.next()
	if w.req.TaskID != tk.ID {
		t.Fatalf("work_request for %s, want %s", w.req.TaskID, tk.ID)
	}
	list, err := e.client(a).List(ctx, orchestrator.ListOptions{})
	if err != nil || len(list) != 1 {
		t.Fatalf("the leader lists %d tasks (%v), want the one submitted through the standby", len(list), err)
	}

	// The standby's SSE stream follows the store to the task's end.
	var mu sync.Mutex
	var seen []orchestrator.State
	streamed := make(chan error, 1)
	go func() {
		streamed <- cb.Events(ctx, tk.ID, func(ev *orchestrator.Event) error {
			mu.Lock()
			seen = append(seen, ev.State)
			mu.Unlock()
			return nil
		})
	}()
	ag.ack(w)
	ag.status(w, 50, 1, "half", "", -1)
	ag.result(w, envelope.ResultSuccess, 0, "done", nil)
	select {
	case err := <-streamed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("the standby's event stream did not end with the task")
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(seen, orchestrator.StateSucceeded) {
		t.Fatalf("the standby streamed %v, without the end", seen)
	}
	got, err := cb.Get(ctx, tk.ID)
	if err != nil || got.State != orchestrator.StateSucceeded {
		t.Fatalf("read through the standby: %+v, %v", got, err)
	}
	select {
	case extra := <-ag.work:
		t.Fatalf("a second work_request: %+v", extra.req)
	default:
	}
}

// When the leader leaves, the standby takes over and re-sends the unfinished task
// with its request_id; a cancel through the old leader's address is refused
// (it is closed) and through the new leader works.
func TestGroupStandbyTakesOverAndResends(t *testing.T) {
	e := newHAEnv(t, "code-1")
	a := e.openMember("a")
	waitRole(t, a, "leader")
	b := e.openMember("b")
	waitRole(t, b, "standby")
	e.o = a
	ag := e.fakeAgent("code-1")
	ag.listen()
	ag.register(2)
	tk := submit(t, a, nil)
	first := ag.next()
	ag.ack(first)

	a.Close() // resigns: b need not wait for the lease
	waitRole(t, b, "leader")
	e.o = b
	// b asks every agent to register again; this one does.
	ag.register(2)
	again := ag.next()
	if again.req.TaskID != tk.ID || again.env.RequestID != first.env.RequestID {
		t.Fatalf("re-sent task %s request %s, want %s %s", again.req.TaskID, again.env.RequestID, tk.ID, first.env.RequestID)
	}
	ag.result(again, envelope.ResultSuccess, 0, "done", nil)
	if got := waitFinal(t, b, tk.ID); got.State != orchestrator.StateSucceeded {
		t.Fatalf("task %s after the takeover", got.State)
	}
}

// A standby with no leader to forward to answers 503, and says so.
func TestGroupForwardWithoutLeaderIs503(t *testing.T) {
	e := newHAEnv(t)
	a := e.openMember("a")
	waitRole(t, a, "leader")
	b := e.openMember("b")
	waitRole(t, b, "standby")
	// a's core stops answering forwarded requests while it stays leader in the
	// store: the forward finds nobody.
	orchestrator.StopServingForwarded(t, a)
	_, err := e.client(b).Submit(context.Background(), orchestrator.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"})
	var ae *orchestrator.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("submit with no leader to forward to: %v, want 503", err)
	}
}

// The group's config is checked: ha needs the JetStream store and an id.
func TestGroupConfigIsChecked(t *testing.T) {
	cfg := orchestrator.Config{DataDir: "d", APIToken: "x", HA: orchestrator.HAConfig{Enabled: true}}
	if err := cfg.Validate(); err == nil {
		t.Fatal("ha without the JetStream store taken")
	}
	cfg.Store.Kind = orchestrator.StoreJetStream
	if err := cfg.Validate(); err == nil {
		t.Fatal("ha without an id taken")
	}
	cfg.ID = "group"
	cfg.HA.Lease = time.Millisecond
	if err := cfg.Validate(); err == nil {
		t.Fatal("a 1ms lease taken")
	}
	cfg.HA.Lease = time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}
