package orchestrator_test

import (
	"context"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestBatchWaitsForAConfiguredAgentThatRegistersLate: a batch made while one
// of its configured agents has not registered yet lists it registering; once it
// registers, within the grace, it gets its task, pinned to it, and the batch
// succeeds. The core's agent-registered event wakes the runner: the grace (a
// minute) is far longer than the test waits.
func TestBatchWaitsForAConfiguredAgentThatRegistersLate(t *testing.T) {
	e := newEnv(t, "code-1", "code-2")
	e.cfg.Batches.RegisterGrace = time.Minute // longer than the test waits
	o := e.open()
	a1, a2 := e.fakeAgent("code-1"), e.fakeAgent("code-2")
	a1.listen()
	a1.register(2)
	agentState(t, o, "code-1", "online")

	b, err := o.CreateBatch(context.Background(), api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	// code-1's task may be made already.
	if got := targetStates(b); b.Targets[0].TaskID == "" || got["code-2"] != api.TargetRegistering {
		t.Fatalf("targets %v, want code-1 with a task, code-2 registering", got)
	}
	if b.RegisterUntil == nil || b.RegisterUntil.Sub(b.CreatedAt) != time.Minute {
		t.Fatalf("register_until %v, want created_at + the grace", b.RegisterUntil)
	}
	w := a1.next()
	a1.ack(w)
	a1.result(w, envelope.ResultSuccess, 0, "ok", nil)

	a2.listen()
	a2.register(2)
	w = a2.next()
	if w.req.Hints == nil || w.req.Hints.AgentID != "code-2" {
		t.Fatalf("code-2 got a task not pinned to it: %+v", w.req.Hints)
	}
	a2.ack(w)
	a2.result(w, envelope.ResultSuccess, 0, "ok", nil)
	end := waitBatch(t, o, b.ID)
	if end.State != api.BatchSucceeded || end.Counts[string(task.StateSucceeded)] != 2 {
		t.Fatalf("batch ended %s %v, want succeeded on both", end.State, end.Counts)
	}
}

// TestBatchWaitsForAnAgentBetweenItsRegistrationAndItsFirstHeartbeat: an agent
// that has registered but not yet sent the heartbeat that makes it routable is
// a registering target, not an offline one: the batch gives it its task once
// the heartbeat comes.
func TestBatchWaitsForAnAgentBetweenItsRegistrationAndItsFirstHeartbeat(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Batches.RegisterGrace = time.Minute
	o := e.open()
	a := e.fakeAgent("code-1")
	a.listen()
	if env := a.registerAs(a.token, 2); env.Type != envelope.TypeRegisterAck {
		t.Fatalf("register: %s", env.Type)
	}
	b, err := o.CreateBatch(context.Background(), api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	if got := targetStates(b); got["code-1"] != api.TargetRegistering {
		t.Fatalf("targets %v, want code-1 registering", got)
	}
	a.heartbeat(2)
	w := a.next()
	a.ack(w)
	a.result(w, envelope.ResultSuccess, 0, "ok", nil)
	if end := waitBatch(t, o, b.ID); end.State != api.BatchSucceeded {
		t.Fatalf("batch ended %s %v, want succeeded", end.State, end.Counts)
	}
}
