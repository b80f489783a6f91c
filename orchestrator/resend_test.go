package orchestrator_test

import (
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestRestartedAgentProcessGetsItsTasksAgainAtOnce: when a new process of an agent id
// registers (another Chiffon-Instance), the tasks in flight on that id are sent to it
// again at once with their request_id, long before the inactivity timeout, without
// spending a retry; finished tasks and tasks of other agents are not.
func TestRestartedAgentProcessGetsItsTasksAgainAtOnce(t *testing.T) {
	e := newEnv(t, "code-1", "code-2")
	e.cfg.Timeouts.Ack, e.cfg.Timeouts.Inactivity = time.Minute, time.Minute
	o := e.open()
	old := e.fakeAgent("code-1")
	old.instance = "process-1"
	old.listen()
	old.register(1)

	done := submit(t, o, nil)
	w := old.next()
	old.result(w, envelope.ResultSuccess, 0, "", nil)
	waitFinal(t, o, done.ID)

	running := submit(t, o, nil)
	w = old.next()
	old.ack(w)
	waitFor(t, "the task running on code-1", func() bool {
		got, err := o.Task(running.ID)
		return err == nil && got.State == task.StateRunning
	})
	other := e.fakeAgent("code-2")
	other.listen()
	other.register(1)
	elsewhere := submit(t, o, nil) // code-1 is full
	other.ack(other.next())

	old.nc.Close() // SIGKILL
	restarted := e.fakeAgent("code-1")
	restarted.instance = "process-2"
	restarted.listen()
	restarted.register(1)

	again := restarted.next()
	if again.req.TaskID != running.ID || again.env.RequestID != w.env.RequestID {
		t.Fatalf("re-sent task %s request %s, want task %s request %s", again.req.TaskID, again.env.RequestID, running.ID, w.env.RequestID)
	}
	restarted.result(again, envelope.ResultFailed, 137, "interrupted", nil)
	final := waitFinal(t, o, running.ID)
	if final.State != task.StateFailed || len(final.Retries) != 0 {
		t.Fatalf("task ended %s with retries %+v, want failed with none", final.State, final.Retries)
	}
	select {
	case w := <-restarted.work:
		t.Fatalf("code-1 got task %s again, which was not in flight there", w.req.TaskID)
	case w := <-other.work:
		t.Fatalf("code-2 got task %s again", w.req.TaskID)
	default:
	}
	for _, info := range o.Agents() {
		if info.Breaker != "closed" {
			t.Errorf("agent %s breaker %s, want closed", info.ID, info.Breaker)
		}
	}
	if got, _ := o.Task(elsewhere.ID); got.State != task.StateRunning || got.Attempts != 1 {
		t.Errorf("task on code-2 is %s after %d attempts, want running after 1", got.State, got.Attempts)
	}
}
