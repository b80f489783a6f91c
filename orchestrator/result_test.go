package orchestrator_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestStructuredOutputIsKeptInEveryView: a work_result's
// x_custom_fields.structured_output is on the task's result, as the API and the SSE
// result event show it and as it is stored, numbers as the agent wrote them.
func TestStructuredOutputIsKeptInEveryView(t *testing.T) {
	e := newEnv(t, "code-1")
	o, a := e.openWithAgent("code-1", 1)
	c := e.client(o)
	tsk := submit(t, o, nil)
	w := a.next()
	a.ack(w)
	structured := map[string]any{"hosts": []any{"web-1"}, "n": json.Number("12345678901234567890"), "ratio": 0.5}
	const want = `{"hosts":["web-1"],"n":12345678901234567890,"ratio":0.5}`
	a.result(w, envelope.ResultSuccess, 0, "done\n", map[string]any{"structured_output": structured})
	waitFinal(t, o, tsk.ID)

	path := "/api/v1/tasks/" + tsk.ID
	if status, body := call(t, c, "GET", path, e.cfg.APIToken, ""); status != 200 || !strings.Contains(body, `"structured_output":`+want) {
		t.Errorf("GET %s: %d %s; want structured_output %s", path, status, body, want)
	}
	status, body := call(t, c, "GET", path+"/events", e.cfg.APIToken, "")
	var resultEvent string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"type":"result"`) {
			resultEvent = line
		}
	}
	if status != 200 || !strings.Contains(resultEvent, `"structured_output":`+want) {
		t.Errorf("SSE result event %q; want structured_output %s", resultEvent, want)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	stored, err := e.open().Task(tsk.ID)
	if err != nil || stored.Result == nil || string(stored.Result.StructuredOutput) != want {
		t.Fatalf("stored task: %v %+v; want structured_output %s", err, stored.Result, want)
	}
}

// TestStepsEndWithTheTask: no step of a finished task stays running. Steps the
// agent completed stay completed; the rest take the task's end: step_completed when it
// succeeded, else its final state.
func TestStepsEndWithTheTask(t *testing.T) {
	cases := []struct {
		name  string
		end   func(a *fakeAgent, w *workMsg)
		state task.State
		last  string // the status of the step left open
	}{
		{"succeeded", func(a *fakeAgent, w *workMsg) { a.result(w, envelope.ResultSuccess, 0, "", nil) },
			task.StateSucceeded, envelope.StatusStepCompleted},
		{"failed", func(a *fakeAgent, w *workMsg) { a.result(w, envelope.ResultFailed, 2, "", nil) },
			task.StateFailed, "failed"},
		{"cancelled", func(a *fakeAgent, w *workMsg) { a.result(w, envelope.ResultCancelled, 130, "", nil) },
			task.StateCancelled, "cancelled"},
		{"error", func(a *fakeAgent, w *workMsg) {
			a.fail(w, errcodes.New(errcodes.InvalidMessage, "bad"))
		}, task.StateError, "error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, "code-1")
			o, a := e.openWithAgent("code-1", 1)
			tsk := submit(t, o, nil)
			w := a.next()
			a.ack(w)
			done := w.env.Reply(&envelope.WorkStatus{TaskID: w.req.TaskID, Status: envelope.StatusStepCompleted,
				ProgressPercent: 50, Step: envelope.Step{Number: 1, Name: "fetch"}})
			a.respond(w.reply, done)
			a.status(w, 60, 2, "", "", -1)
			waitFor(t, "step 2 running", func() bool { got, _ := o.Task(tsk.ID); return len(got.Steps) == 3 })
			c.end(a, w)
			final := waitFinal(t, o, tsk.ID)
			if final.State != c.state {
				t.Fatalf("state %s, want %s", final.State, c.state)
			}
			want := map[int64]string{0: c.last, 1: envelope.StatusStepCompleted, 2: c.last}
			if c.state == task.StateSucceeded {
				want[0] = envelope.StatusStepCompleted
			}
			for _, s := range final.Steps {
				if s.Status != want[s.Number] {
					t.Errorf("step %d %q: %s, want %s", s.Number, s.Name, s.Status, want[s.Number])
				}
			}
		})
	}
}

// TestCancelReasonReachesTheAgentAndTheEvents: the operator's reason goes to the
// agent in the cancel and is in the task's events; without one the agent is told
// "cancelled by operator".
func TestCancelReasonReachesTheAgentAndTheEvents(t *testing.T) {
	cases := []struct{ body, toAgent, event string }{
		{`{"reason":"wrong host"}`, "wrong host", "cancel requested: wrong host"},
		{``, "cancelled by operator", "cancel requested"},
	}
	for _, c := range cases {
		t.Run(c.toAgent, func(t *testing.T) {
			e := newEnv(t, "code-1")
			o, a := e.openWithAgent("code-1", 1)
			cl := e.client(o)
			tsk := submit(t, o, nil)
			w := a.next()
			a.ack(w)
			waitFor(t, "running", func() bool { got, _ := o.Task(tsk.ID); return got.State == task.StateRunning })
			if status, body := call(t, cl, "POST", "/api/v1/tasks/"+tsk.ID+"/cancel", e.cfg.APIToken, c.body); status != 202 {
				t.Fatalf("cancel: %d %s", status, body)
			}
			ctl := a.nextControl()
			if p, ok := ctl.Payload.(*envelope.Cancel); !ok || p.Reason != c.toAgent {
				t.Fatalf("control %s %+v, want a cancel with reason %q", ctl.Type, ctl.Payload, c.toAgent)
			}
			a.result(w, envelope.ResultCancelled, 130, "", nil)
			waitFinal(t, o, tsk.ID)
			_, body := call(t, cl, "GET", "/api/v1/tasks/"+tsk.ID+"/events", e.cfg.APIToken, "")
			if !strings.Contains(body, `"message":"`+c.event+`"`) {
				t.Errorf("events lack %q:\n%s", c.event, body)
			}
		})
	}
}

// TestCancelReasonEndsATaskCancelledBeforeDispatch: a task the agent never got ends
// with the reason in its last event.
func TestCancelReasonEndsATaskCancelledBeforeDispatch(t *testing.T) {
	e := newEnv(t, "code-1")
	o, _ := e.openWithAgent("code-1", 1)
	c := e.client(o)
	submit(t, o, nil)
	queued := submit(t, o, nil)
	got, err := c.Cancel(t.Context(), queued.ID, "not needed any more")
	if err != nil || got.State != task.StateCancelled {
		t.Fatalf("cancel: %v %+v", err, got)
	}
	_, body := call(t, c, "GET", "/api/v1/tasks/"+queued.ID+"/events", e.cfg.APIToken, "")
	if !strings.Contains(body, `"message":"cancelled before dispatch: not needed any more"`) {
		t.Errorf("events lack the reason:\n%s", body)
	}
	long := strings.Repeat("x", 1025)
	if status, body := call(t, c, "POST", "/api/v1/tasks/"+queued.ID+"/cancel", e.cfg.APIToken, `{"reason":"`+long+`"}`); status != 400 ||
		!strings.Contains(body, `"field":"reason"`) {
		t.Errorf("cancel with a reason over 1 KiB: %d %s", status, body)
	}
}
