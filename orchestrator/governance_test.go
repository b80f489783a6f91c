package orchestrator_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// submitWork submits a code task of workType with params.
func submitWork(t *testing.T, o *orchestrator.Orchestrator, workType string, params map[string]any, hints *task.Hints) *task.Task {
	t.Helper()
	task, err := o.Submit(context.Background(), api.SubmitRequest{ToAgent: envelope.Code, WorkType: workType,
		Parameters: params, Hints: hints})
	if err != nil {
		t.Fatalf("Submit %s: %v", workType, err)
	}
	return task
}

// agentInfo is agent id as the API shows it.
func agentInfo(t *testing.T, c *client.Client, id string) api.AgentInfo {
	t.Helper()
	agents, err := c.Agents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		if a.ID == id {
			return a
		}
	}
	t.Fatalf("agent %s not listed: %+v", id, agents)
	return api.AgentInfo{}
}

// succeed acknowledges w and ends it with success.
func (a *fakeAgent) succeed(w *workMsg) {
	a.ack(w)
	a.result(w, envelope.ResultSuccess, 0, "ok", nil)
}

// TestAllowedWorkTypesTrimTheRegistration: an agent whose config allows only
// echo registers offering echo and build; it is recorded (and shown) with echo
// alone, one warning names build, and build tasks go to the agent that allows
// them, never to it. With only it online, a build task fails at once (5006).
func TestAllowedWorkTypesTrimTheRegistration(t *testing.T) {
	e := newEnv(t, "code-1", "code-2")
	e.cfg.Agents[0].AllowedWorkTypes = []string{"echo"}
	o := e.open()
	c := e.client(o)
	strict := e.fakeAgent("code-1")
	strict.listen()
	strict.registerOffering(4, "echo", "build")

	info := agentInfo(t, c, "code-1")
	if !slices.Equal(info.WorkTypes, []string{"echo"}) || info.Limits == nil ||
		!slices.Equal(info.Limits.AllowedWorkTypes, []string{"echo"}) {
		t.Fatalf("code-1 shown with work types %v, limits %+v; want [echo], allowed [echo]", info.WorkTypes, info.Limits)
	}
	logs := e.logs.String()
	if n := strings.Count(logs, "agent offers work types its config does not allow"); n != 1 ||
		!strings.Contains(logs, "dropped=[build]") {
		t.Fatalf("%d warnings naming the dropped work types, want one naming build:\n%s", n, logs)
	}

	// Alone, code-1 is not sent build: the task fails at once, as for a work type
	// nobody offers.
	lone := submitWork(t, o, "build", nil, nil)
	final := waitFinal(t, o, lone.ID)
	if final.State != task.StateError || final.Error == nil || final.Error.Code != int(errcodes.UnsupportedWorkType) {
		t.Fatalf("build with only code-1 online: %s %+v, want error 5006", final.State, final.Error)
	}

	open := e.fakeAgent("code-2")
	open.listen()
	open.registerOffering(4, "echo", "build")
	if info := agentInfo(t, c, "code-2"); !slices.Equal(info.WorkTypes, []string{"echo", "build"}) || info.Limits != nil {
		t.Fatalf("code-2 shown with work types %v, limits %+v; want both, no limits", info.WorkTypes, info.Limits)
	}
	var ids []string
	for range 4 {
		ids = append(ids, submitWork(t, o, "build", nil, nil).ID)
	}
	for range 4 {
		open.succeed(open.next())
	}
	for _, id := range ids {
		if final := waitFinal(t, o, id); final.State != task.StateSucceeded || final.AgentID != "code-2" {
			t.Fatalf("build task %s: %s on %s, want succeeded on code-2", id, final.State, final.AgentID)
		}
	}
	noWork(t, strict, 200*time.Millisecond)

	// The work type it is allowed still goes to it.
	echo := submitWork(t, o, "echo", nil, &task.Hints{AgentID: "code-1"})
	strict.succeed(strict.next())
	if final := waitFinal(t, o, echo.ID); final.State != task.StateSucceeded {
		t.Fatalf("echo on code-1: %s", final.State)
	}
}

// TestMaxConcurrencyCapsTheCapacity: an agent that registers (and heartbeats)
// room for 4 tasks, capped at 1 by its config, is sent one task at a time: the
// second waits until the first ends.
func TestMaxConcurrencyCapsTheCapacity(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Agents[0].MaxConcurrency = 1
	o, a := e.openWithAgent("code-1", 4)
	info := agentInfo(t, e.client(o), "code-1")
	if info.Capacity != 1 || info.Limits == nil || info.Limits.MaxConcurrency != 1 {
		t.Fatalf("code-1 shown with capacity %d, limits %+v; want 1, cap 1", info.Capacity, info.Limits)
	}
	first := submit(t, o, nil)
	second := submit(t, o, nil)
	w := a.next()
	if w.req.TaskID != first.ID {
		t.Fatalf("first request is for %s, want %s", w.req.TaskID, first.ID)
	}
	a.ack(w)
	a.heartbeat(4) // a heartbeat saying 4 does not lift the cap
	noWork(t, a, 300*time.Millisecond)
	if got, _ := o.Task(second.ID); got.State != task.StatePending {
		t.Fatalf("second task %s while the first runs, want pending", got.State)
	}
	a.result(w, envelope.ResultSuccess, 0, "", nil)
	w2 := a.next()
	if w2.req.TaskID != second.ID {
		t.Fatalf("next request is for %s, want %s", w2.req.TaskID, second.ID)
	}
	a.succeed(w2)
	for _, id := range []string{first.ID, second.ID} {
		if final := waitFinal(t, o, id); final.State != task.StateSucceeded {
			t.Fatalf("task %s: %s", id, final.State)
		}
	}
}
