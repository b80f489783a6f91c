package orchestrator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

func TestRetryWaitsDoubleAndStopsAfterThree(t *testing.T) {
	e := newEnv(t, "code-1")
	o, a := e.openWithAgent("code-1", 4)
	tsk := submit(t, o, nil)

	var got []*workMsg
	for i := 0; i < 4; i++ {
		w := a.next()
		got = append(got, w)
		a.fail(w, errcodes.NewResourceLimitExceeded("max_concurrency", 0, 1))
	}
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateError || final.Error == nil || final.Error.Code != 5005 {
		t.Fatalf("want error 5005, got %s %+v", final.State, final.Error)
	}
	if final.Attempts != 4 || len(final.Retries) != 3 {
		t.Fatalf("attempts %d retries %d, want 4 and 3", final.Attempts, len(final.Retries))
	}
	wantWaits := []int64{10, 20, 40}
	seen := map[string]bool{}
	for i, r := range final.Retries {
		if r.WaitMS != wantWaits[i] || r.Code != 5005 {
			t.Errorf("retry %d: wait %d ms code %d, want %d ms 5005", i, r.WaitMS, r.Code, wantWaits[i])
		}
		if gap := got[i+1].at.Sub(got[i].at); gap < time.Duration(wantWaits[i])*time.Millisecond {
			t.Errorf("retry %d came %s after the attempt before, want >= %d ms", i, gap, wantWaits[i])
		}
	}
	for _, w := range got {
		if w.env.RequestID != tsk.RequestID || w.req.TaskID != tsk.ID || w.env.TraceID != tsk.TraceID {
			t.Errorf("retry changed ids: %s %s", w.env.RequestID, w.req.TaskID)
		}
		if seen[w.env.MessageID] {
			t.Errorf("message_id %s reused", w.env.MessageID)
		}
		seen[w.env.MessageID] = true
	}
	select {
	case w := <-a.work:
		t.Fatalf("a fifth request came: %+v", w.req)
	default:
	}
}

func TestNonRetryableErrorFailsAtOnce(t *testing.T) {
	e := newEnv(t, "code-1")
	o, a := e.openWithAgent("code-1", 4)
	tsk := submit(t, o, nil)
	a.fail(a.next(), errcodes.NewUnsupportedWorkType("echo", []string{"other"}))
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateError || final.Error.Code != 5006 || final.Attempts != 1 ||
		!strings.Contains(final.Error.Message, "echo") {
		t.Fatalf("got %s attempts %d error %+v", final.State, final.Attempts, final.Error)
	}
}

func TestNeverStartedRequestMovesToAnotherAgent(t *testing.T) {
	e := newEnv(t, "code-a", "code-b")
	o := e.open()
	dead := e.fakeAgent("code-a") // registers but does not listen: no responders
	dead.register(4)
	live := e.fakeAgent("code-b")
	live.listen()
	live.register(4)
	tsk := submit(t, o, nil)
	w := live.next()
	live.ack(w)
	live.result(w, envelope.ResultSuccess, 0, "done", nil)
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateSucceeded || final.AgentID != "code-b" {
		t.Fatalf("got %s on %s", final.State, final.AgentID)
	}
	// The attempt at code-a never started: it spent no retry.
	if final.Attempts != 2 || len(final.Retries) != 0 {
		t.Fatalf("attempts %d retries %+v, want 2 attempts (code-a, then code-b) and no retry", final.Attempts, final.Retries)
	}
}

func TestAckTimeoutRetriesOnTheSameAgent(t *testing.T) {
	e := newEnv(t, "code-a", "code-b")
	e.cfg.Timeouts.Ack = 100 * time.Millisecond
	o := e.open()
	a := e.fakeAgent("code-a")
	a.listen()
	a.register(4)
	b := e.fakeAgent("code-b")
	b.listen()
	b.register(4)
	tsk := submit(t, o, nil)
	first := a.next() // silence
	second := a.next()
	if second.env.RequestID != first.env.RequestID {
		t.Fatal("retry changed request_id")
	}
	a.ack(second)
	a.result(second, envelope.ResultSuccess, 0, "ok", nil)
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateSucceeded || final.AgentID != "code-a" || final.Retries[0].Code != 5001 {
		t.Fatalf("got %s on %s retries %+v", final.State, final.AgentID, final.Retries)
	}
	if len(b.work) != 0 {
		t.Fatal("the retry after a timeout went to another agent")
	}
}

func TestInactivityTimeoutIs5001WithContext(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Timeouts.Inactivity = 100 * time.Millisecond
	e.cfg.Retry.MaxRetries = -1
	o, a := e.openWithAgent("code-1", 4)
	tsk := submit(t, o, nil)
	w := a.next()
	a.status(w, 10, 1, "some output", "", 0) // then silence
	final := waitFinal(t, o, tsk.ID)
	if final.State != task.StateError || final.Error.Code != 5001 {
		t.Fatalf("got %s %+v", final.State, final.Error)
	}
	ctx := final.Error.Context
	if _, ok := ctx["attempted_retries"]; !ok || ctx["last_attempt"] == nil {
		t.Fatalf("timeout context %v lacks attempted_retries/last_attempt", ctx)
	}
	if !strings.Contains(final.Error.Message, "no message for") {
		t.Fatalf("message %q", final.Error.Message)
	}
}

func TestQueuedTaskDispatchedWhenAgentFrees(t *testing.T) {
	e := newEnv(t, "code-1")
	o, a := e.openWithAgent("code-1", 1)
	first := submit(t, o, nil)
	second := submit(t, o, nil)
	w := a.next()
	if w.req.TaskID != first.ID {
		t.Fatalf("first dispatch was %s", w.req.TaskID)
	}
	a.ack(w)
	waitFor(t, "first running", func() bool { tk, _ := o.Task(first.ID); return tk.State == task.StateRunning })
	if tk, _ := o.Task(second.ID); tk.State != task.StatePending || tk.Attempts != 0 {
		t.Fatalf("second task %s with %d attempts while the agent is full", tk.State, tk.Attempts)
	}
	select {
	case w := <-a.work:
		t.Fatalf("second task dispatched while the agent was full: %s", w.req.TaskID)
	default:
	}
	a.result(w, envelope.ResultSuccess, 0, "one", nil)
	w2 := a.next()
	if w2.req.TaskID != second.ID {
		t.Fatalf("got %s, want the queued task", w2.req.TaskID)
	}
	a.ack(w2)
	a.result(w2, envelope.ResultFailed, 3, "two", nil)
	if final := waitFinal(t, o, second.ID); final.State != task.StateFailed || final.Result.ExitCode != 3 {
		t.Fatalf("got %s %+v", final.State, final.Result)
	}
}

func TestPinnedTaskGoesToItsAgent(t *testing.T) {
	e := newEnv(t, "code-a", "code-b")
	o := e.open()
	a := e.fakeAgent("code-a")
	a.listen()
	a.register(4)
	b := e.fakeAgent("code-b")
	b.listen()
	b.register(4)
	tsk := submit(t, o, &task.Hints{AgentID: "code-b"})
	w := b.next()
	a.t.Log(w.req.Hints)
	b.result(w, envelope.ResultSuccess, 0, "", nil)
	if final := waitFinal(t, o, tsk.ID); final.AgentID != "code-b" || final.State != task.StateSucceeded {
		t.Fatalf("got %s on %s", final.State, final.AgentID)
	}
}

// TestSubmitFailsWhenTheTaskCannotBeStored: a task is stored before its work_request
// goes out, so when the store refuses the write Submit fails, the agent's slot is
// given back and the task is not kept as a live one that nothing could resume.
func TestSubmitFailsWhenTheTaskCannotBeStored(t *testing.T) {
	e := newEnv(t, "code-1")
	e.mem = true // a memstore can be made to fail its writes
	o, _ := e.openWithAgent("code-1", 1)
	orchestrator.BreakStoreWrites(o)
	tsk, err := o.Submit(context.Background(), api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"})
	if err == nil {
		t.Fatalf("Submit with a broken store: %+v, want an error", tsk)
	}
	if as := o.Agents(); len(as) != 1 || as[0].Load != 0 {
		t.Fatalf("agents after a failed Submit: %+v, want code-1 with load 0", as)
	}
	live, err := o.Tasks(api.ListOptions{})
	if err != nil || len(live) != 0 {
		t.Fatalf("tasks after a failed Submit: %v %v, want none", live, err)
	}
}
