package orchestrator_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestUnknownWorkTypeEndsAtOnceWith5006: when online agents of the task's type exist
// and none offers its work type, the task ends at once with 5006, which is not
// retried, naming every work type those agents offer. (With every configured
// agent of the type registered, the catalogue refuses such a task at submit:
// code-c, configured and never registered, keeps it out of that check.)
func TestUnknownWorkTypeEndsAtOnceWith5006(t *testing.T) {
	e := newEnv(t, "code-a", "code-b", "code-c")
	o := e.open()
	a, b := e.fakeAgent("code-a"), e.fakeAgent("code-b")
	a.listen()
	a.registerOffering(4, "echo")
	b.listen()
	b.registerOffering(4, "echo", "convert")
	tsk, err := o.Submit(t.Context(), api.SubmitRequest{ToAgent: envelope.Code, WorkType: "resize"})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateError || final.Error == nil || final.Error.Code != 5006 {
		t.Fatalf("got %s %+v, want error 5006", final.State, final.Error)
	}
	if final.Attempts != 0 || len(final.Retries) != 0 {
		t.Fatalf("attempts %d retries %+v, want none", final.Attempts, final.Retries)
	}
	if got := fmt.Sprint(final.Error.Context["supported_types"]); got != "[convert echo]" {
		t.Fatalf("supported_types %s, want [convert echo]", got)
	}
	if got := fmt.Sprint(final.Error.Context["work_type_requested"]); got != "resize" {
		t.Fatalf("work_type_requested %s, want resize", got)
	}
}

// TestLeastLoadTiesTakeTurns: two idle agents of the same room tie for every task
// that runs alone; the tie goes to the agent dispatched to least recently, so the
// tasks alternate instead of all going to the lower id.
func TestLeastLoadTiesTakeTurns(t *testing.T) {
	e := newEnv(t, "code-a", "code-b")
	e.open()
	a, b := e.fakeAgent("code-a"), e.fakeAgent("code-b")
	for _, ag := range []*fakeAgent{a, b} {
		ag.listen()
		ag.register(4)
	}
	var order []string
	for range 6 {
		tsk := submit(t, e.o, nil)
		ag, w := nextOfEither(t, a, b)
		ag.result(w, envelope.ResultSuccess, 0, "", nil)
		if final := waitFinal(t, e.o, tsk.ID); final.State != task.StateSucceeded {
			t.Fatalf("task %s: %s", tsk.ID, final.State)
		}
		order = append(order, ag.id)
	}
	for i := 1; i < len(order); i++ {
		if order[i] == order[i-1] {
			t.Fatalf("tasks went to %v: a tie went twice in a row to %s", order, order[i])
		}
	}
}

// TestNoRespondersQueuesTheTaskUntilAnAgentRegisters: a work_request that reached
// no agent never started. It does not count against the agent's breaker (one
// failure would open it here), it spends no retry (there are none here), and the
// task waits in the queue, without being sent into the gap again, until the agent
// registers again.
func TestNoRespondersQueuesTheTaskUntilAnAgentRegisters(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Retry.MaxRetries = -1
	e.cfg.Breaker.Failures = 1
	o := e.open()
	a := e.fakeAgent("code-1")
	a.register(4) // registered, but nobody listens on the work subject
	tsk := submit(t, o, nil)
	var got *task.Task
	waitFor(t, "the attempt to end", func() bool {
		got, _ = o.Task(tsk.ID)
		return got.State == task.StatePending || got.State.Final()
	})
	if got.State != task.StatePending || got.Attempts != 1 || len(got.Retries) != 0 {
		t.Fatalf("after no responders: %s, attempts %d, retries %+v, error %+v; want pending after 1 attempt, no retry",
			got.State, got.Attempts, got.Retries, got.Error)
	}
	if b := breakerOf(o, "code-1"); b != "closed" {
		t.Fatalf("breaker %s after no responders, want closed", b)
	}
	a.listen()
	a.register(4) // the agent is back
	w := a.next()
	a.result(w, envelope.ResultSuccess, 0, "ok", nil)
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateSucceeded || final.Attempts != 2 || len(final.Retries) != 0 {
		t.Fatalf("got %s, attempts %d, retries %+v; want succeeded on the 2nd attempt, no retry",
			final.State, final.Attempts, final.Retries)
	}
}

// TestAHeartbeatMakesAnUnreachableAgentReachable: an agent marked unreachable by a
// "no responders" that then heartbeats is listening (agents heartbeat only once
// subscribed to their work subject): the queued task goes to it without waiting for
// a registration. A process restarted in the gap between its registration and its
// subscription would otherwise stay unreachable, with every task of its type queued.
func TestAHeartbeatMakesAnUnreachableAgentReachable(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Retry.MaxRetries = -1
	o := e.open()
	a := e.fakeAgent("code-1")
	a.register(4) // registered, but nobody listens on the work subject yet
	tsk := submit(t, o, nil)
	waitFor(t, "the attempt to end", func() bool {
		got, _ := o.Task(tsk.ID)
		return got.State == task.StatePending && got.Attempts == 1
	})
	a.listen()
	a.heartbeat(4)
	w := a.next()
	a.result(w, envelope.ResultSuccess, 0, "ok", nil)
	if final := waitFinal(t, o, tsk.ID); final.State != task.StateSucceeded || final.Attempts != 2 {
		t.Fatalf("got %s after %d attempts, want succeeded on the 2nd", final.State, final.Attempts)
	}
}

// TestNoRespondersOnAPinnedTaskSpendsRetriesButNotTheBreaker: a task its agent
// acknowledged stays with that agent, so "no responders" is retried there (until
// the retries are spent) but, proving nothing about the agent, never feeds its
// breaker: with two failures to open it, the one timeout leaves it closed.
func TestNoRespondersOnAPinnedTaskSpendsRetriesButNotTheBreaker(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Timeouts.Ack, e.cfg.Timeouts.Inactivity = 200*time.Millisecond, 200*time.Millisecond
	e.cfg.Breaker.Failures, e.cfg.Breaker.OpenFor = 2, time.Minute
	o := e.open()
	a := e.fakeAgent("code-1")
	a.listen()
	a.register(1)
	tsk := submit(t, o, nil)
	a.ack(a.next()) // started ...
	a.nc.Close()    // ... and gone: a timeout (5001), then no responders
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateError || final.Error == nil || final.Error.Code != 5002 || len(final.Retries) != 3 {
		t.Fatalf("got %s %+v retries %d, want error 5002 after 3 retries", final.State, final.Error, len(final.Retries))
	}
	if b := breakerOf(o, "code-1"); b != "closed" {
		t.Fatalf("breaker %s, want closed: only the timeout counts", b)
	}
}

// TestRegistrationClosesTheBreaker: an agent that registers again is a process
// that listens: its open breaker closes at once, not after the open period.
func TestRegistrationClosesTheBreaker(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Retry.MaxRetries = -1
	e.cfg.Timeouts.Ack = 50 * time.Millisecond
	e.cfg.Breaker.Failures, e.cfg.Breaker.OpenFor = 1, time.Minute
	o := e.open()
	a := e.fakeAgent("code-1")
	a.listen()
	a.register(4)
	tsk := submit(t, o, nil)
	a.next() // never answered: 5001 opens the breaker
	if final := waitFinal(t, o, tsk.ID); final.Error == nil || final.Error.Code != 5001 {
		t.Fatalf("got %s %+v, want error 5001", final.State, final.Error)
	}
	if b := breakerOf(o, "code-1"); b != "open" {
		t.Fatalf("breaker %s after a timeout, want open", b)
	}
	a.register(4)
	if b := breakerOf(o, "code-1"); b != "closed" {
		t.Fatalf("breaker %s after the agent registered again, want closed", b)
	}
	tsk = submit(t, o, nil)
	a.result(a.next(), envelope.ResultSuccess, 0, "ok", nil)
	if final := waitFinal(t, o, tsk.ID); final.State != task.StateSucceeded {
		t.Fatalf("after the registration: %s %+v", final.State, final.Error)
	}
}
