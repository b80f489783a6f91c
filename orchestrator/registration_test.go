package orchestrator_test

import (
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestANewCoreQueuesTasksUntilItsAgentsRegister: right after a start (or a
// takeover), a task for a type whose configured agent has not registered yet
// waits in the queue and goes to the agent once it does, with no retry spent
// on 5002.
func TestANewCoreQueuesTasksUntilItsAgentsRegister(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Timeouts.Registration = time.Minute
	o := e.open()
	tk := submit(t, o, nil)
	if got, _ := o.Task(tk.ID); got.State != task.StatePending || len(got.Retries) != 0 || got.Error != nil {
		t.Fatalf("before the agent registered: %s, retries %+v, error %+v; want it pending in the queue", got.State, got.Retries, got.Error)
	}
	a := e.fakeAgent("code-1")
	a.listen()
	a.register(2)
	w := a.next()
	a.result(w, envelope.ResultSuccess, 0, "done", nil)
	final := waitFinal(t, o, tk.ID)
	if final.State != task.StateSucceeded || len(final.Retries) != 0 || final.Attempts != 1 {
		t.Fatalf("got %s after %d attempts, retries %+v: want success at the first, no retry", final.State, final.Attempts, final.Retries)
	}
}

// TestTheRegistrationWaitEnds: once timeouts.registration has passed with the
// agent still away, the queued task is routed again and meets 5002 as it would
// have at once.
func TestTheRegistrationWaitEnds(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Timeouts.Registration = 200 * time.Millisecond
	e.cfg.Retry.MaxRetries = -1
	o := e.open()
	tk := submit(t, o, nil)
	final := waitFinal(t, o, tk.ID)
	if final.State != task.StateError || final.Error == nil || final.Error.Code != 5002 {
		t.Fatalf("got %s %+v, want error 5002", final.State, final.Error)
	}
}
