package orchestrator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
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

// newGroup opens orchestrator a, which leads, then b, a standby, and registers
// agent code-1 with a.
func newGroup(t *testing.T) (e *env, a, b *orchestrator.Orchestrator, ag *fakeAgent) {
	t.Helper()
	e = newHAEnv(t, "code-1")
	a = e.openMember("a")
	waitRole(t, a, "leader")
	b = e.openMember("b")
	waitRole(t, b, "standby")
	e.o = a
	ag = e.fakeAgent("code-1")
	ag.listen()
	ag.register(2)
	return e, a, b, ag
}

func waitRole(t *testing.T, o *orchestrator.Orchestrator, role string) {
	t.Helper()
	waitFor(t, "role "+role, func() bool { return o.Role().Role == role })
}

// readiness returns o's /readyz answer.
func readiness(t *testing.T, e *env, o *orchestrator.Orchestrator) api.Readiness {
	t.Helper()
	c := e.client(o)
	resp, err := c.HTTP.Get(c.BaseURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r api.Readiness
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

// One orchestrator of a group leads; the other serves reads, forwards a submit
// (which creates its task once), the agent list and the work types to the leader, follows the
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
	if wts, err := cb.WorkTypes(ctx); err != nil || len(wts) != 1 || wts[0].Name != "echo" || wts[0].Agents[0] != "code-1" {
		t.Fatalf("work types through the standby: %+v, %v", wts, err)
	}
	tk, err := cb.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"})
	if err != nil {
		t.Fatalf("submit through the standby: %v", err)
	}
	w := ag.next()
	if w.req.TaskID != tk.ID {
		t.Fatalf("work_request for %s, want %s", w.req.TaskID, tk.ID)
	}
	list, err := e.client(a).List(ctx, api.ListOptions{})
	if err != nil || len(list) != 1 {
		t.Fatalf("the leader lists %d tasks (%v), want the one submitted through the standby", len(list), err)
	}

	// The standby's SSE stream, one connection, follows the store to the task's
	// end.
	stream := openStream(t, e, b, tk.ID)
	ag.ack(w)
	ag.status(w, 50, 1, "half", "", -1)
	ag.result(w, envelope.ResultSuccess, 0, "done", nil)
	if states := stream.untilEnd(t); !slices.Contains(states, string(task.StateSucceeded)) {
		t.Fatalf("the standby streamed %v, without the end", states)
	}
	got, err := cb.Get(ctx, tk.ID)
	if err != nil || got.State != task.StateSucceeded {
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
	e, a, b, ag := newGroup(t)
	tk := submit(t, a, nil)
	first := ag.next()
	ag.ack(first)
	// Two SSE clients: one on the standby, which follows the store through the
	// takeover; one on the leader, whose stream ends with it and resumes on the
	// standby with Last-Event-ID.
	onB := openStream(t, e, b, tk.ID)
	onA := openStream(t, e, a, tk.ID)
	ag.status(first, 10, 1, "one", "", -1)
	waitFor(t, "the status stored", func() bool { got, _ := b.Task(tk.ID); return got.ProgressPercent == 10 })

	a.Close() // resigns: b need not wait for the lease
	seenOnA := onA.untilEndSeqs(t)
	waitRole(t, b, "leader")
	e.o = b
	// b asks every agent to register again; this one does.
	ag.register(2)
	again := ag.next()
	if again.req.TaskID != tk.ID || again.env.RequestID != first.env.RequestID {
		t.Fatalf("re-sent task %s request %s, want %s %s", again.req.TaskID, again.env.RequestID, tk.ID, first.env.RequestID)
	}
	ag.result(again, envelope.ResultSuccess, 0, "done", nil)
	if got := waitFinal(t, b, tk.ID); got.State != task.StateSucceeded {
		t.Fatalf("task %s after the takeover", got.State)
	}
	if states := onB.untilEnd(t); !slices.Contains(states, string(task.StateSucceeded)) {
		t.Fatalf("the stream on b through the takeover: %v, without the end", states)
	}
	if len(seenOnA) == 0 {
		t.Fatal("the stream on a got no event before a closed")
	}
	resumed := openStreamAfter(t, e, b, tk.ID, seenOnA[len(seenOnA)-1]).untilEndSeqs(t)
	all := append(seenOnA, resumed...)
	for i, seq := range all {
		if seq != int64(i+1) {
			t.Fatalf("events on a, then on b from Last-Event-ID: %v, want 1..n once each", all)
		}
	}
}

// sseStream is one SSE connection to an orchestrator.
type sseStream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
}

// openStream opens task id's event stream on o.
func openStream(t *testing.T, e *env, o *orchestrator.Orchestrator, id string) *sseStream {
	t.Helper()
	return openStreamAfter(t, e, o, id, 0)
}

// openStreamAfter opens task id's event stream on o after event last (0: from
// the first).
func openStreamAfter(t *testing.T, e *env, o *orchestrator.Orchestrator, id string, last int64) *sseStream {
	t.Helper()
	c := e.client(o)
	req, _ := http.NewRequest(http.MethodGet, c.BaseURL+"/api/v1/tasks/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	}
	resp, err := c.HTTP.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("open the event stream: %v %v", resp, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseStream{body: resp.Body, sc: bufio.NewScanner(resp.Body)}
}

// untilEnd reads the stream until it ends, failing t if that takes longer than
// wait, and returns the states of its events.
func (s *sseStream) untilEnd(t *testing.T) []string {
	t.Helper()
	var states []string
	for _, ev := range s.read(t) {
		states = append(states, string(ev.State))
	}
	return states
}

// untilEndSeqs is untilEnd returning the events' numbers.
func (s *sseStream) untilEndSeqs(t *testing.T) []int64 {
	t.Helper()
	var seqs []int64
	for _, ev := range s.read(t) {
		seqs = append(seqs, ev.Seq)
	}
	return seqs
}

func (s *sseStream) read(t *testing.T) []task.Event {
	t.Helper()
	timer := time.AfterFunc(wait, func() { s.body.Close() })
	defer timer.Stop()
	var evs []task.Event
	for s.sc.Scan() {
		if data, ok := strings.CutPrefix(s.sc.Text(), "data: "); ok {
			var ev task.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			evs = append(evs, ev)
		}
	}
	if !timer.Stop() {
		t.Fatalf("the stream did not end within %s; %d events", wait, len(evs))
	}
	return evs
}

// A leader that stalls past its lease (its store's writer blocked, so that it
// cannot renew) sends nothing to an agent once the lease has lapsed by its own
// clock, even before it learns it lost the lead; when it goes on it steps down,
// and a submit that met the lapsed lease is answered 503 with Retry-After
// (nothing stored: try again), not 500.
func TestGroupStalledLeaderSendsNothing(t *testing.T) {
	e, a, b, ag := newGroup(t)
	ca := e.client(a)
	tk := submit(t, a, nil)
	w := ag.next()
	ag.ack(w)
	waitFor(t, "running", func() bool { got, _ := a.Task(tk.ID); return got.State == task.StateRunning })

	release := orchestrator.StallStoreWriter(a)
	defer release()
	waitRole(t, b, "leader")
	submitted := make(chan *http.Response, 1)
	go func() {
		resp, err := rawPost(ca, "/api/v1/tasks", `{"to_agent":"code","work_type":"echo"}`)
		if err != nil {
			t.Errorf("submit to the stalled leader: %v", err)
		}
		submitted <- resp
	}()
	// a still runs its core: it has not been told. A cancel would go to the
	// agent at once; it must not.
	go func() { _, _ = a.Cancel(context.Background(), tk.ID, "from a stalled leader") }()
	waitFor(t, "a's cancel refused", func() bool {
		for line := range strings.Lines(e.logs.String()) {
			if strings.Contains(line, `msg="cancel not delivered"`) && strings.Contains(line, `err="this orchestrator does not lead"`) {
				return true
			}
		}
		return false
	})
	for len(ag.control) > 0 {
		if c := <-ag.control; c.Type == envelope.TypeCancel {
			t.Fatalf("the stalled leader sent a cancel: %+v", c.Payload)
		}
	}
	release()
	waitRole(t, a, "standby")
	select {
	case resp := <-submitted:
		if resp == nil {
			return
		}
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("a submit that met the lapsed lease: %s, Retry-After %q; want 503 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
		}
	case <-time.After(wait):
		t.Fatal("the submit to the stalled leader got no answer")
	}
}

// rawPost posts body to path of c's server and returns the answer, its body
// read.
func rawPost(c *client.Client, path, body string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, c.BaseURL+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp, resp.Body.Close()
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
	_, err := e.client(b).Submit(context.Background(), api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("submit with no leader to forward to: %v, want 503", err)
	}
	resp, err := rawPost(e.client(b), "/api/v1/tasks", `{"to_agent":"code","work_type":"echo"}`)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the standby's 503: %v %v, Retry-After %q; want it", resp, err, resp.Header.Get("Retry-After"))
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
