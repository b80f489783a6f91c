package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
)

// agentState waits until agent id is in state.
func agentState(t *testing.T, o *orchestrator.Orchestrator, id, state string) {
	t.Helper()
	waitFor(t, id+" "+state, func() bool {
		for _, a := range o.Agents() {
			if a.ID == id {
				return a.State == state
			}
		}
		return false
	})
}

// waitBatch waits until batch id's end is stored and returns it.
func waitBatch(t *testing.T, o *orchestrator.Orchestrator, id string) *api.Batch {
	t.Helper()
	var b *api.Batch
	waitFor(t, "batch "+id+" to finish", func() bool {
		var err error
		b, err = o.GetBatch(id)
		return err == nil && b.FinishedAt != nil
	})
	return b
}

func targetStates(b *api.Batch) map[string]string {
	out := map[string]string{}
	for _, t := range b.Targets {
		out[t.AgentID] = t.State
	}
	return out
}

// noWork fails if agent a gets a work_request within d.
func noWork(t *testing.T, a *fakeAgent, d time.Duration) {
	t.Helper()
	select {
	case w := <-a.work:
		t.Fatalf("agent %s got work_request %s", a.id, w.req.TaskID)
	case <-time.After(d):
	}
}

// TestBatchRunsOnEveryMatchingAgent: a batch over the code agents makes one task
// for each online one, pinned to it, and lists the one that went offline and the
// configured one never heard from, without tasks (that one unknown once the
// register grace is over); it ends failed (not every agent
// ran it), and a batch.finished receiver gets it. A label selector keeps the
// agents that carry the label.
func TestBatchRunsOnEveryMatchingAgent(t *testing.T) {
	got := make(chan api.Batch, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var d struct {
			Event string
			Data  api.Batch
		}
		if err := json.Unmarshal(body, &d); err != nil || d.Event != webhook.BatchFinished {
			t.Errorf("delivery %s: %v", body, err)
		}
		got <- d.Data
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t, "code-1", "code-2", "code-3", "code-4")
	e.cfg.Webhooks = []orchestrator.WebhookConfig{{URL: srv.URL, Events: []string{webhook.BatchFinished}, Secret: "s"}}
	e.cfg.Batches.RegisterGrace = 300 * time.Millisecond // code-4 is waited for that long
	o := e.open()
	a1, a2, a3 := e.fakeAgent("code-1"), e.fakeAgent("code-2"), e.fakeAgent("code-3")
	a1.labels = map[string]string{"site": "attic"}
	a3.hbInterval = 50 * time.Millisecond // it stops sending heartbeats: offline soon
	for _, a := range []*fakeAgent{a1, a2, a3} {
		a.listen()
		a.register(2)
	}
	agentState(t, o, "code-3", "offline")

	b, err := o.CreateBatch(context.Background(), api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo",
		Parameters: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"code-1": api.TargetWaiting, "code-2": api.TargetWaiting,
		"code-3": api.TargetOffline, "code-4": api.TargetRegistering}
	if got := targetStates(b); len(got) != 4 || got["code-3"] != want["code-3"] || got["code-4"] != want["code-4"] {
		t.Fatalf("targets %v, want %v", got, want)
	}
	for _, a := range []*fakeAgent{a1, a2} {
		w := a.next()
		if w.req.Hints == nil || w.req.Hints.AgentID != a.id {
			t.Fatalf("%s got a task not pinned to it: %+v", a.id, w.req.Hints)
		}
		a.ack(w)
		a.result(w, envelope.ResultSuccess, 0, "ok", nil)
	}
	noWork(t, a3, 100*time.Millisecond)
	end := waitBatch(t, o, b.ID)
	if end.State != api.BatchFailed || end.Counts["succeeded"] != 2 || end.Counts["offline"] != 1 || end.Counts["unknown"] != 1 {
		t.Fatalf("batch ended %s %v, want failed with 2 succeeded, 1 offline, 1 unknown", end.State, end.Counts)
	}
	tasks, err := o.Tasks(api.ListOptions{Limit: 100})
	if err != nil || len(tasks) != 2 {
		t.Fatalf("%d tasks (%v), want 2", len(tasks), err)
	}
	for _, tk := range tasks {
		if tk.BatchID != b.ID {
			t.Fatalf("task %s has batch %q, want %s", tk.ID, tk.BatchID, b.ID)
		}
	}
	select {
	case d := <-got:
		if d.ID != b.ID || d.State != api.BatchFailed {
			t.Fatalf("batch.finished for %s %s", d.ID, d.State)
		}
	case <-time.After(wait):
		t.Fatal("no batch.finished delivery")
	}

	// Labels select: only code-1 is at the attic.
	b, err = o.CreateBatch(context.Background(), api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo",
		Labels: map[string]string{"site": "attic"}})
	if err != nil {
		t.Fatal(err)
	}
	// The batch's answer shows its targets as they are once its runner started:
	// code-1's task may be sent already.
	if got := targetStates(b); len(got) != 1 || (got["code-1"] != api.TargetWaiting && got["code-1"] != string(task.StateDispatched)) {
		t.Fatalf("targets of site=attic: %v, want code-1 only, waiting or dispatched", got)
	}
	w := a1.next()
	a1.result(w, envelope.ResultSuccess, 0, "", nil)
	if end := waitBatch(t, o, b.ID); end.State != api.BatchSucceeded {
		t.Fatalf("labelled batch ended %s %v", end.State, end.Counts)
	}
	noWork(t, a2, 100*time.Millisecond)

	if _, err := o.CreateBatch(context.Background(), api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo",
		Labels: map[string]string{"site": "cellar"}}); !errors.Is(err, orchestrator.ErrBatchNoTargets) {
		t.Fatalf("a batch no agent matches: %v", err)
	}
}

// TestBatchMaxParallelAndStopOnFailure: with max_parallel 1 one task runs at a
// time, in agent order; with stop_on_failure the first failure leaves the rest
// unstarted (skipped) and the batch failed.
func TestBatchMaxParallelAndStopOnFailure(t *testing.T) {
	e := newEnv(t, "code-1", "code-2", "code-3")
	o := e.open()
	var agents []*fakeAgent
	for _, id := range []string{"code-1", "code-2", "code-3"} {
		a := e.fakeAgent(id)
		a.listen()
		a.register(4)
		agents = append(agents, a)
	}
	req := api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo", MaxParallel: 1}
	b, err := o.CreateBatch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range agents {
		w := a.next()
		for _, other := range agents[i+1:] {
			noWork(t, other, 50*time.Millisecond) // one at a time
		}
		a.result(w, envelope.ResultSuccess, 0, "", nil)
	}
	if end := waitBatch(t, o, b.ID); end.State != api.BatchSucceeded || end.Counts["succeeded"] != 3 {
		t.Fatalf("batch ended %s %v", end.State, end.Counts)
	}

	req.StopOnFailure = true
	b, err = o.CreateBatch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	w := agents[0].next()
	agents[0].result(w, envelope.ResultFailed, 2, "boom", nil)
	end := waitBatch(t, o, b.ID)
	want := map[string]string{"code-1": "failed", "code-2": api.TargetSkipped, "code-3": api.TargetSkipped}
	if got := targetStates(end); got["code-1"] != want["code-1"] || got["code-2"] != want["code-2"] || got["code-3"] != want["code-3"] {
		t.Fatalf("targets %v, want %v", got, want)
	}
	if end.State != api.BatchFailed {
		t.Fatalf("batch %s, want failed", end.State)
	}
	noWork(t, agents[1], 100*time.Millisecond)
	noWork(t, agents[2], 10*time.Millisecond)
}

// TestBatchGoesOnAfterARestart: a batch whose first task is running when the
// orchestrator stops goes on when it opens again: the running task is resumed
// (same request_id), the next one made once, the batch ends with one task per
// agent.
func TestBatchGoesOnAfterARestart(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		e := newStoreEnv(t, kind, "code-1", "code-2")
		o := e.open()
		a1, a2 := e.fakeAgent("code-1"), e.fakeAgent("code-2")
		for _, a := range []*fakeAgent{a1, a2} {
			a.listen()
			a.register(2)
		}
		b, err := o.CreateBatch(context.Background(), api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo", MaxParallel: 1})
		if err != nil {
			t.Fatal(err)
		}
		first := a1.next()
		a1.ack(first)
		o.Close()

		o = e.open()
		a1.register(2)
		a2.register(2)
		again := a1.next() // resumed
		if again.req.TaskID != first.req.TaskID || again.env.RequestID != first.env.RequestID {
			t.Fatalf("resumed task %s request %s, want %s %s", again.req.TaskID, again.env.RequestID, first.req.TaskID, first.env.RequestID)
		}
		noWork(t, a2, 100*time.Millisecond) // max_parallel still holds
		a1.result(again, envelope.ResultSuccess, 0, "", nil)
		second := a2.next()
		a2.result(second, envelope.ResultSuccess, 0, "", nil)
		if end := waitBatch(t, o, b.ID); end.State != api.BatchSucceeded {
			t.Fatalf("batch ended %s %v", end.State, end.Counts)
		}
		tasks, err := o.Tasks(api.ListOptions{})
		if err != nil || len(tasks) != 2 {
			t.Fatalf("%d tasks (%v), want 2", len(tasks), err)
		}
		noWork(t, a1, 50*time.Millisecond)
	})
}

// TestBatchAPI: the API makes a batch, refuses bad ones naming the field, lists
// it, and streams it to its end.
func TestBatchAPI(t *testing.T) {
	e := newEnv(t, "code-1")
	o, a := e.openWithAgent("code-1", 2)
	c := e.client(o)
	ctx := context.Background()
	for _, tc := range []struct {
		req   api.BatchRequest
		field string
	}{
		{api.BatchRequest{ToAgent: "nope", WorkType: "echo"}, "to_agent"},
		{api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo", Hints: &task.Hints{AgentID: "code-1"}}, "hints.agent_id"},
		{api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo", Labels: map[string]string{"Bad Key": "x"}}, "labels"},
		{api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo", Agents: []string{"no such/agent"}}, "agents[0]"},
		{api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo", MaxParallel: -1}, "max_parallel"},
	} {
		_, err := c.CreateBatch(ctx, tc.req)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != tc.field {
			t.Fatalf("%+v: %v, want a 400 naming %s", tc.req, err, tc.field)
		}
	}
	_, err := c.CreateBatch(ctx, api.BatchRequest{ToAgent: envelope.Infra, WorkType: "echo"})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity || ae.Code != "no_agents" {
		t.Fatalf("a batch without agents: %v", err)
	}
	b, err := c.CreateBatch(ctx, api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []api.Batch
	done := make(chan error, 1)
	go func() {
		done <- c.BatchEvents(ctx, b.ID, func(b *api.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, *b)
			return nil
		})
	}()
	w := a.next()
	a.ack(w)
	a.status(w, 50, 1, "half", "", 0)
	waitFor(t, "the stream to show 50%", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0 && seen[len(seen)-1].Targets[0].ProgressPercent == 50
	})
	a.result(w, envelope.ResultSuccess, 0, "half", nil)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("the batch stream did not end")
	}
	if last := seen[len(seen)-1]; last.State != api.BatchSucceeded || last.FinishedAt == nil {
		t.Fatalf("last event %s finished %v", last.State, last.FinishedAt)
	}
	list, err := c.Batches(ctx, 10)
	if err != nil || len(list) != 1 || list[0].ID != b.ID || list[0].State != api.BatchSucceeded {
		t.Fatalf("list %+v %v", list, err)
	}
	if _, err := c.Batch(ctx, envelope.NewID()); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("an unknown batch: %v", err)
	}
}

// TestTaskOfADerivedIDIsMadeOnce: twenty submits of one derived task id at once
// (a batch runner and a schedule's clock making it again) make it once; the agent
// gets one work_request.
func TestTaskOfADerivedIDIsMadeOnce(t *testing.T) {
	e := newEnv(t, "code-1")
	o, a := e.openWithAgent("code-1", 4)
	id, rid := envelope.NewID(), envelope.NewID()
	var wg sync.WaitGroup
	var mu sync.Mutex
	made := 0
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, ok, err := orchestrator.SubmitAs(o, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"}, id, rid)
			if err != nil || tk.ID != id {
				t.Errorf("submit: %v %v", tk, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if ok {
				made++
			}
		}()
	}
	wg.Wait()
	if made != 1 {
		t.Fatalf("made %d times", made)
	}
	w := a.next()
	if w.req.TaskID != id || w.env.RequestID != rid {
		t.Fatalf("work_request %s %s, want %s %s", w.req.TaskID, w.env.RequestID, id, rid)
	}
	noWork(t, a, 100*time.Millisecond)
}

// TestBatchOfNamedAgentsHasThemAlone: a batch that names one agent of three
// online ones has that one alone, whatever order the registry is read in (it
// once let the agents read after the named one was found in).
func TestBatchOfNamedAgentsHasThemAlone(t *testing.T) {
	e := newEnv(t, "code-1", "code-2", "code-3")
	o := e.open()
	for _, id := range []string{"code-1", "code-2", "code-3"} {
		a := e.fakeAgent(id)
		a.listen()
		a.register(2)
		agentState(t, o, id, "online")
	}
	for range 20 { // the registry's order is a map's: try it often
		for _, id := range []string{"code-1", "code-2", "code-3"} {
			b, err := o.CreateBatch(context.Background(), api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo",
				Agents: []string{id}, Parameters: map[string]any{"text": "hi"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := targetStates(b); len(got) != 1 || got[id] == "" {
				t.Fatalf("a batch of %s has targets %v", id, got)
			}
		}
	}
}
