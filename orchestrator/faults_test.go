package orchestrator_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

func breakerOf(o *orchestrator.Orchestrator, id string) string {
	for _, a := range o.Agents() {
		if a.ID == id {
			return a.Breaker
		}
	}
	return ""
}

func TestBreakerOpensAfterFiveStaysOpenAndClosesAfterPing(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Retry.MaxRetries = -1
	e.cfg.Breaker.OpenFor = 400 * time.Millisecond
	e.cfg.Timeouts.Ack = 50 * time.Millisecond
	o := e.open()
	a := e.fakeAgent("code-1")
	a.listen()
	a.register(4) // it receives work but never answers: 5001 each time

	var openedAt time.Time
	for i := 1; i <= 5; i++ {
		if got := breakerOf(o, "code-1"); got != "closed" {
			t.Fatalf("breaker %s before failure %d", got, i)
		}
		tsk := submit(t, o, nil)
		a.next()
		final := waitFinal(t, o, tsk.ID)
		if final.Error == nil || final.Error.Code != 5001 || final.Attempts != 1 {
			t.Fatalf("task %d: %s %+v", i, final.State, final.Error)
		}
		openedAt = time.Now()
	}
	if got := breakerOf(o, "code-1"); got != "open" {
		t.Fatalf("breaker %s after 5 failures, want open", got)
	}
	// While open, routing fails fast with 5002 and sends nothing.
	fast := waitFinal(t, o, submit(t, o, nil).ID)
	if fast.Error == nil || fast.Error.Code != 5002 || fast.Attempts != 0 || !strings.Contains(fast.Error.Message, "circuit breaker") {
		t.Fatalf("while open: %s attempts %d %+v", fast.State, fast.Attempts, fast.Error)
	}
	// The half-open ping comes after the open period; a good answer closes it.
	ping := a.nextControl()
	if ping.Type != envelope.TypePing {
		t.Fatalf("got %s, want ping", ping.Type)
	}
	if el := time.Since(openedAt); el < 400*time.Millisecond-20*time.Millisecond {
		t.Fatalf("ping %s after opening, before the open period ended", el)
	}
	waitFor(t, "breaker to close", func() bool { return breakerOf(o, "code-1") == "closed" })
	tsk := submit(t, o, nil)
	w := a.next()
	a.result(w, envelope.ResultSuccess, 0, "back", nil)
	if final := waitFinal(t, o, tsk.ID); final.State != task.StateSucceeded {
		t.Fatalf("after close: %s", final.State)
	}
}

func TestBreakerReopensWhenPingFails(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Retry.MaxRetries = -1
	e.cfg.Breaker.Failures = 1
	e.cfg.Breaker.OpenFor = 50 * time.Millisecond
	e.cfg.Timeouts.Ack = 50 * time.Millisecond
	o := e.open()
	a := e.fakeAgent("code-1")
	a.setPing(false)
	a.listen()
	a.register(4)
	waitFinal(t, o, submit(t, o, nil).ID) // silent: 5001 opens the breaker
	a.nextControl()
	a.nextControl() // a second ping: the first failure opened it again
	a.setPing(true)
	waitFor(t, "breaker to close", func() bool { return breakerOf(o, "code-1") == "closed" })
}

func TestBadTokensAreRejected(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	a := e.fakeAgent("code-1")
	bad := broker.NewToken()

	// Registration with a wrong token: 5004, and the agent stays unknown.
	rep := a.registerAs(bad, 4)
	p, ok := rep.Payload.(*envelope.ErrorPayload)
	if !ok || p.ErrorCode != 5004 {
		t.Fatalf("register with a bad token: %s %+v", rep.Type, rep.Payload)
	}
	// An agent id that is not configured: 5004 too.
	stranger := e.fakeAgent("code-9")
	if rep := stranger.registerAs(bad, 4); rep.Type != envelope.TypeError {
		t.Fatalf("unknown agent registered: %s", rep.Type)
	}
	if got := o.Agents()[0]; got.State != "unknown" {
		t.Fatalf("agent %+v known after a bad registration", got)
	}

	a.listen()
	a.register(4)
	tsk := submit(t, o, nil)
	w := a.next()
	// A status and a result with a wrong token are dropped.
	env := w.env.Reply(&envelope.WorkResult{TaskID: tsk.ID, Status: envelope.ResultSuccess, Output: "forged"})
	a.publishAs(w.reply, bad, env)
	a.publishAs(w.reply, "", env)
	a.ack(w) // the real one is taken
	waitFor(t, "task running", func() bool { tk, _ := o.Task(tsk.ID); return tk.State == task.StateRunning })
	if tk, _ := o.Task(tsk.ID); tk.State.Final() {
		t.Fatalf("forged result accepted: %s", tk.State)
	}
	a.result(w, envelope.ResultSuccess, 0, "real", nil)
	final := waitFinal(t, o, tsk.ID)
	var out strings.Builder
	c := e.client(o)
	if _, err := c.Output(t.Context(), tsk.ID, &out); err != nil || out.String() != "real" || final.State != task.StateSucceeded {
		t.Fatalf("output %q err %v state %s", out.String(), err, final.State)
	}
	logs := e.logs.String()
	if strings.Contains(logs, bad) || strings.Contains(logs, a.token) || strings.Contains(logs, e.orchTokens[a.id]) {
		t.Fatal("a token was logged")
	}
	if !strings.Contains(logs, "authentication failed") {
		t.Fatal("refusals not logged")
	}
}

func TestNoCommonProtocolVersionIs5006(t *testing.T) {
	e := newEnv(t, "code-1")
	e.open()
	a := e.fakeAgent("code-1")
	reg := envelope.New(envelope.Code, envelope.Orchestrator, "", "", &envelope.Register{AgentID: "code-1",
		SupportedVersions: []string{"2.0"}, WorkTypes: []string{"echo"}, MaxConcurrency: 1, HeartbeatIntervalMS: 1000})
	data, _ := envelope.Encode(reg)
	m := natsMsg(a, data)
	rep, err := a.nc.RequestMsg(m, wait)
	if err != nil {
		t.Fatal(err)
	}
	env, err := envelope.Decode(rep.Data)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := env.Payload.(*envelope.ErrorPayload); !ok || p.ErrorCode != 5006 {
		t.Fatalf("got %s %+v", env.Type, env.Payload)
	}
}

func TestAgentOfflineAfterThreeMissedHeartbeats(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	a := e.fakeAgent("code-1")
	reg := envelope.New(envelope.Code, envelope.Orchestrator, "", "", &envelope.Register{AgentID: "code-1",
		SupportedVersions: []string{"1.0"}, WorkTypes: []string{"echo"}, MaxConcurrency: 1, HeartbeatIntervalMS: 30})
	data, _ := envelope.Encode(reg)
	start := time.Now()
	if _, err := a.nc.RequestMsg(natsMsg(a, data), wait); err != nil {
		t.Fatal(err)
	}
	if got := o.Agents()[0]; got.State != "offline" || got.ProtocolVersion != "1.0" {
		t.Fatalf("after register, before the first heartbeat: %+v", got)
	}
	a.heartbeat(1)
	waitFor(t, "agent online", func() bool { return o.Agents()[0].State == "online" })
	waitFor(t, "agent offline", func() bool { return o.Agents()[0].State == "offline" })
	if el := time.Since(start); el < 90*time.Millisecond {
		t.Fatalf("offline after %s, before 3 missed heartbeats", el)
	}
	// A heartbeat brings it back.
	hb := envelope.New(envelope.Code, envelope.Orchestrator, "", "", &envelope.Heartbeat{AgentID: "code-1", Status: envelope.AgentBusy, ActiveTasks: 1, MaxConcurrency: 1})
	a.publishAs(a.subj.Heartbeat(a.id), a.token, hb)
	waitFor(t, "agent online", func() bool { g := o.Agents()[0]; return g.State == "online" && g.LastHeartbeat != nil })
}

// TestRetryNeverLeavesTheAgentThatMayHaveRunIt: once an agent acknowledged a request,
// a later attempt that provably never reached it (no responders) must not send the
// request to another agent, which would run it a second time.
func TestRetryNeverLeavesTheAgentThatMayHaveRunIt(t *testing.T) {
	e := newEnv(t, "code-1", "code-2")
	e.cfg.Timeouts.Ack, e.cfg.Timeouts.Inactivity = 300*time.Millisecond, 300*time.Millisecond
	o := e.open()
	a := e.fakeAgent("code-1")
	a.register(1)
	a.listen()
	tsk := submit(t, o, nil)
	a.ack(a.next()) // code-1 has started it ...
	a.nc.Close()    // ... and goes away: later attempts get no responders
	b := e.fakeAgent("code-2")
	b.register(1)
	b.listen()

	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateError || final.Error == nil || final.Error.Code != 5002 {
		t.Fatalf("task ended %s %+v, want error 5002 after its retries", final.State, final.Error)
	}
	for _, r := range final.Retries {
		if r.AgentID != "code-1" {
			t.Errorf("retry %+v went to %s", r, r.AgentID)
		}
	}
	select {
	case w := <-b.work:
		t.Fatalf("code-2 got request %s, which code-1 may have run", w.env.RequestID)
	default:
	}
}

// TestRestartKeepsQueuedTasksForTheAgentsInsteadOfFailingThem: a task that was still
// queued when the orchestrator stopped waits for the agents to register after the
// restart; it does not spend a retry on "no online agent" meanwhile.
func TestRestartKeepsQueuedTasksForTheAgentsInsteadOfFailingThem(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		e := newStoreEnv(t, kind, "code-1")
		o := e.open()
		a := e.fakeAgent("code-1")
		a.register(1)
		a.listen()
		first := submit(t, o, nil)
		a.next()
		queued := submit(t, o, nil) // the agent is full: queued, never dispatched
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		o2 := e.open()
		// The agent registers late, well after the first retry wait (10 ms here).
		time.Sleep(100 * time.Millisecond) // the passing of time is the point
		a.register(2)
		for range 2 {
			w := a.next()
			a.result(w, envelope.ResultSuccess, 0, "ok", nil)
		}
		for _, id := range []string{first.ID, queued.ID} {
			final := waitFinal(t, o2, id)
			if final.State != task.StateSucceeded || len(final.Retries) != 0 {
				t.Errorf("task %s: %s with retries %+v, want succeeded with none", id, final.State, final.Retries)
			}
		}
	})
}

// TestRestartKeepsStepsAndProgress: statuses are stored without the task's record,
// so a restart rebuilds the steps, progress and output length from them before the
// agent says anything more.
func TestRestartKeepsStepsAndProgress(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		e := newStoreEnv(t, kind, "code-1")
		o, a := e.openWithAgent("code-1", 1)
		tsk := submit(t, o, nil)
		w := a.next()
		a.ack(w)
		a.status(w, 40, 1, "fetching\n", "", 0)
		a.status(w, 70, 2, "building\n", "", 9)
		waitFor(t, "statuses recorded", func() bool {
			got, err := o.Task(tsk.ID)
			return err == nil && got.ProgressPercent == 70
		})
		want, err := o.Task(tsk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		o2 := e.open() // the fake agent stays silent: what o2 shows comes from the store
		got, err := o2.Task(tsk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ProgressPercent != 70 || got.OutputBytes != want.OutputBytes {
			t.Errorf("after restart: progress %d, output %d bytes; want 70, %d", got.ProgressPercent, got.OutputBytes, want.OutputBytes)
		}
		if len(got.Steps) != len(want.Steps) {
			t.Fatalf("after restart: steps %+v, want %+v", got.Steps, want.Steps)
		}
		for i := range want.Steps {
			g, w := got.Steps[i], want.Steps[i]
			if g.Number != w.Number || g.Name != w.Name || g.Status != w.Status || !g.UpdatedAt.Equal(w.UpdatedAt) {
				t.Errorf("step %d after restart: %+v, want %+v", i, g, w)
			}
		}
	})
}
