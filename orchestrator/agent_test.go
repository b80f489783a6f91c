package orchestrator_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// realAgent runs an agent.Agent of type code against e's broker until the test ends.
func (e *env) realAgent(id string, h agent.Handler) { e.realAgentWith(id, 4, h) }

// realAgentWith is realAgent with room for capacity tasks at once.
func (e *env) realAgentWith(id string, capacity int, h agent.Handler) {
	e.t.Helper()
	a, err := agent.New(agent.Config{ID: id, Type: "code", NATS: broker.NATSConfig{URLs: []string{e.srv.ClientURL()}},
		DataDir: e.t.TempDir(), Token: e.tokens[id], OrchestratorToken: e.orchTokens[id], MaxConcurrency: capacity,
		HeartbeatInterval: agent.Duration(time.Second), KeepaliveInterval: agent.Duration(10 * time.Second),
		DrainTimeout: agent.Duration(time.Second),
		Logger:       slog.New(slog.NewTextHandler(e.logs, nil)).With("side", "agent")})
	if err != nil {
		e.t.Fatalf("agent.New: %v", err)
	}
	a.Handle("echo", h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	if !e.opened {
		return // the agent is ready once an orchestrator accepts it
	}
	select {
	case <-a.Ready():
	case err := <-done:
		e.t.Fatalf("agent.Run: %v", err)
	case <-time.After(wait):
		e.t.Fatal("agent not ready")
	}
}

// gatedHandler writes "part1", signals started, waits for release, writes "part2".
type gatedHandler struct {
	runs    atomic.Int32
	started chan struct{}
	release chan struct{}
}

func newGated() *gatedHandler {
	return &gatedHandler{started: make(chan struct{}, 4), release: make(chan struct{})}
}

func (g *gatedHandler) handle(ctx context.Context, _ *agent.Request, p agent.Progress) (agent.Result, error) {
	g.runs.Add(1)
	fmt.Fprint(p, "part1;")
	g.started <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return agent.Result{}, ctx.Err()
	}
	fmt.Fprint(p, "part2")
	return agent.Result{}, nil
}

func (g *gatedHandler) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-g.started:
	case <-time.After(wait):
		t.Fatal("handler did not start")
	}
}

func TestRestartMidTaskLosesNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		e := newStoreEnv(t, kind, "code-1")
		g := newGated()
		e.realAgent("code-1", g.handle)
		o := e.open()
		waitFor(t, "agent registered", func() bool { return o.Agents()[0].State == "online" })
		tsk := submit(t, o, nil)
		g.waitStarted(t)
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		// The task is in the store, unfinished, with the same orch_id and request_id.
		o2 := e.open()
		if o2.ID() != o.ID() {
			t.Fatalf("orch_id changed across restart: %s -> %s", o.ID(), o2.ID())
		}
		waitFor(t, "task resumed", func() bool {
			tk, err := o2.Task(tsk.ID)
			// Running again: the agent attached the new inbox to the running handler.
			return err == nil && tk.Attempts >= 2 && tk.State == task.StateRunning
		})
		close(g.release)
		final := waitFinal(t, o2, tsk.ID)
		if final.State != task.StateSucceeded || final.RequestID != tsk.RequestID {
			t.Fatalf("got %s (request %s) error %+v", final.State, final.RequestID, final.Error)
		}
		var out strings.Builder
		if _, err := e.client(o2).Output(t.Context(), tsk.ID, &out); err != nil || out.String() != "part1;part2" {
			t.Fatalf("output %q err %v", out.String(), err)
		}
		if n := g.runs.Load(); n != 1 {
			t.Fatalf("handler ran %d times", n)
		}
	})
}

func TestRetryAfterTimeoutGoesBackToSameAgentAndRunsOnce(t *testing.T) {
	e := newEnv(t, "code-a", "code-b")
	e.cfg.Timeouts.Inactivity = 150 * time.Millisecond
	ga, gb := newGated(), newGated()
	e.realAgent("code-a", ga.handle)
	e.realAgent("code-b", gb.handle)
	o := e.open()
	waitFor(t, "agents registered", func() bool {
		as := o.Agents()
		return as[0].State == "online" && as[1].State == "online"
	})
	tsk := submit(t, o, nil)
	var g *gatedHandler
	select {
	case <-ga.started:
		g = ga
	case <-gb.started:
		g = gb
	case <-time.After(wait):
		t.Fatal("no handler started")
	}
	// The handler is silent longer than the inactivity timeout: 5001, retried.
	waitFor(t, "a retry after a timeout", func() bool {
		tk, _ := o.Task(tsk.ID)
		return len(tk.Retries) >= 1
	})
	close(g.release)
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateSucceeded {
		t.Fatalf("got %s %+v", final.State, final.Error)
	}
	for _, r := range final.Retries {
		if r.Code != 5001 || r.AgentID != final.AgentID {
			t.Fatalf("retry %+v went elsewhere than %s", r, final.AgentID)
		}
	}
	if n := ga.runs.Load() + gb.runs.Load(); n != 1 {
		t.Fatalf("handlers ran %d times", n)
	}
	var out strings.Builder
	if _, err := e.client(o).Output(t.Context(), tsk.ID, &out); err != nil || out.String() != "part1;part2" {
		t.Fatalf("output %q err %v", out.String(), err)
	}
}

// TestQueuedTasksNeverFindTheAgentFull: the agent frees a task's slot before the
// result goes out, so the queued task the orchestrator sends the moment the result
// arrives is never refused as over capacity (5005), which would cost it a retry and
// a second's wait.
func TestQueuedTasksNeverFindTheAgentFull(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	e.realAgentWith("code-1", 1, func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
		return agent.Result{Output: "ok"}, nil
	})
	waitFor(t, "agent online", func() bool {
		as := o.Agents()
		return len(as) == 1 && as[0].State == "online"
	})
	ids := make([]string, 200)
	for i := range ids {
		ids[i] = submit(t, o, nil).ID
	}
	for _, id := range ids {
		final := waitFinal(t, o, id)
		if final.State != task.StateSucceeded || len(final.Retries) != 0 {
			t.Fatalf("task %s: %s with retries %+v, want succeeded with none", id, final.State, final.Retries)
		}
	}
}
