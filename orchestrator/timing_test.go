package orchestrator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestMaxDurationKeepsTheAckTimeout: a task with a max duration whose agent never
// answers times out on the ack timeout, not at its far deadline.
func TestMaxDurationKeepsTheAckTimeout(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Timeouts.Ack = 50 * time.Millisecond
	e.cfg.Retry.MaxRetries = -1
	o, a := e.openWithAgent("code-1", 4)
	tsk := submit(t, o, &task.Hints{MaxDurationSeconds: 3600})
	a.next() // never answered
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateError || final.Error.Code != 5001 || !strings.Contains(final.Error.Message, "no acknowledgement") {
		t.Fatalf("got %s %+v, want error 5001 on the ack timeout", final.State, final.Error)
	}
}

// TestMaxDurationKeepsTheInactivityTimeout: an acknowledged task with a max duration
// whose agent then falls silent times out on the inactivity timeout.
func TestMaxDurationKeepsTheInactivityTimeout(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Timeouts.Inactivity = 50 * time.Millisecond
	e.cfg.Retry.MaxRetries = -1
	o, a := e.openWithAgent("code-1", 4)
	tsk := submit(t, o, &task.Hints{MaxDurationSeconds: 3600})
	a.ack(a.next()) // then silence
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateError || final.Error.Code != 5001 || !strings.Contains(final.Error.Message, "no message for") {
		t.Fatalf("got %s %+v, want error 5001 on the inactivity timeout", final.State, final.Error)
	}
}

// TestMaxDurationEndsATaskKeptAlive: a task whose agent keeps sending statuses ends
// at its max duration with 5001, and the agent is told to cancel it.
func TestMaxDurationEndsATaskKeptAlive(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Timeouts.Ack = 200 * time.Millisecond
	e.cfg.Timeouts.Inactivity = 200 * time.Millisecond
	e.cfg.Timeouts.DeadlineGrace = 0
	o, a := e.openWithAgent("code-1", 4)
	start := time.Now()
	tsk := submit(t, o, &task.Hints{MaxDurationSeconds: 1})
	w := a.next()
	stop := make(chan struct{})
	kept := make(chan struct{})
	go func() { // the agent's keepalives
		defer close(kept)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			a.status(w, 10, 1, "", "", -1)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	final := waitFinal(t, o, tsk.ID)
	close(stop)
	<-kept
	if el := time.Since(start); el < time.Second {
		t.Fatalf("ended after %s, before max_duration_seconds", el)
	}
	if final.State != task.StateError || final.Error.Code != 5001 || final.Attempts != 1 ||
		!strings.Contains(final.Error.Message, "max_duration") {
		t.Fatalf("got %s attempts %d %+v", final.State, final.Attempts, final.Error)
	}
	if c := a.nextControl(); c.Type != envelope.TypeCancel {
		t.Fatalf("agent got %s, want cancel", c.Type)
	}
}

// TestAgentGoingOfflineRetriesItsTasks: when an agent misses its heartbeats, the
// attempts in flight there fail at once with 5001, long before the inactivity timeout
// or the task's deadline, and are retried on the same agent with the same request_id
// (only its dedupe cache knows whether the request ran).
func TestAgentGoingOfflineRetriesItsTasks(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Timeouts.Ack, e.cfg.Timeouts.Inactivity = time.Hour, time.Hour
	e.cfg.Retry.Initial = 10 * time.Millisecond
	o := e.open()
	a := e.fakeAgent("code-1")
	a.hbInterval = 50 * time.Millisecond
	a.listen()
	a.register(4)
	tsk := submit(t, o, &task.Hints{MaxDurationSeconds: 3600})
	w := a.next()
	a.ack(w) // then no heartbeat
	again := a.next()
	if again.req.TaskID != tsk.ID || again.env.RequestID != w.env.RequestID {
		t.Fatalf("got task %s request %s, want task %s sent again with request %s", again.req.TaskID, again.env.RequestID, tsk.ID, w.env.RequestID)
	}
	got, err := o.Task(tsk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Retries) != 1 || got.Retries[0].Code != 5001 || !strings.Contains(got.Retries[0].Message, "offline") {
		t.Fatalf("retries %+v, want one 5001 for the agent going offline", got.Retries)
	}
	a.heartbeat(4)
	a.result(again, envelope.ResultSuccess, 0, "done", nil)
	if final := waitFinal(t, o, tsk.ID); final.State != task.StateSucceeded {
		t.Fatalf("got %s %+v", final.State, final.Error)
	}
}

// TestFinalResultCarriesNoStaleAttemptError: a task whose first attempt timed out and
// whose second ran and failed ends failed with its result and no error; the timeout
// is in its retries.
func TestFinalResultCarriesNoStaleAttemptError(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Timeouts.Ack = 50 * time.Millisecond
	e.cfg.Retry.Initial = 10 * time.Millisecond
	o, a := e.openWithAgent("code-1", 4)
	tsk := submit(t, o, nil)
	a.next() // times out
	w := a.next()
	pending, err := o.Task(tsk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if pending.Error != nil {
		t.Errorf("between attempts the task has error %+v; the attempt's error belongs in retries", pending.Error)
	}
	a.result(w, envelope.ResultFailed, 137, "killed", nil)
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateFailed || final.Result == nil || final.Result.ExitCode != 137 {
		t.Fatalf("got %s %+v", final.State, final.Result)
	}
	if final.Error != nil {
		t.Errorf("failed task shows error %+v beside its result", final.Error)
	}
	if len(final.Retries) != 1 || final.Retries[0].Code != 5001 {
		t.Errorf("retries %+v, want the first attempt's 5001", final.Retries)
	}
}

// TestNewAgentProcessDoesNotInheritDrainingStatus: an agent process that replaces
// one that was draining is not shown nor routed as draining: its own first heartbeat
// says what it is, and work goes to it at once.
func TestNewAgentProcessDoesNotInheritDrainingStatus(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	old := e.fakeAgent("code-1")
	old.instance = "process-1"
	old.listen()
	old.register(1)
	old.heartbeatStatus(1, envelope.AgentDraining)
	waitFor(t, "code-1 draining", func() bool { return o.Agents()[0].Status == envelope.AgentDraining })
	old.nc.Close()

	restarted := e.fakeAgent("code-1")
	restarted.instance = "process-2"
	restarted.listen()
	if env := restarted.registerAs(restarted.token, 1); env.Type != envelope.TypeRegisterAck {
		t.Fatalf("register: %s", env.Type)
	}
	if st := o.Agents()[0].Status; st == envelope.AgentDraining {
		t.Fatalf("new process shown %s before its first heartbeat", st)
	}
	restarted.registered.Store(true)
	restarted.heartbeat(1)
	tsk := submit(t, o, nil)
	if w := restarted.next(); w.req.TaskID != tsk.ID {
		t.Fatalf("got %s", w.req.TaskID)
	}
}

// TestSlowStoreIsNotASilentAgent: the work_request goes out once the dispatch is
// stored, and the agent's time to acknowledge runs from the send. A store whose
// commit takes longer than the ack timeout (a JetStream stream recovering after a
// broker restart) fails no attempt: the agent never had the request.
func TestSlowStoreIsNotASilentAgent(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		e := newStoreEnv(t, kind, "code-1")
		e.cfg.Timeouts.Ack = 100 * time.Millisecond
		o, a := e.openWithAgent("code-1", 4)
		release := orchestrator.StallStoreWriter(o)
		submitted := make(chan *task.Task, 1)
		go func() { // Submit returns once the dispatch is stored
			tsk, err := o.Submit(context.Background(), api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"})
			if err != nil {
				t.Errorf("Submit: %v", err)
			}
			submitted <- tsk
		}()
		time.Sleep(5 * e.cfg.Timeouts.Ack) // the fault is the passing of time
		release()
		tsk := <-submitted
		if tsk == nil {
			return
		}
		w := a.next()
		a.ack(w)
		a.result(w, envelope.ResultSuccess, 0, "hi\n", nil)
		final := waitFinal(t, o, tsk.ID)
		if final.State != task.StateSucceeded || final.Attempts != 1 || len(final.Retries) != 0 {
			t.Fatalf("got %s after %d attempts, retries %+v; want succeeded at the first", final.State, final.Attempts, final.Retries)
		}
	})
}
