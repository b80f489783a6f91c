package orchestrator_test

import (
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// nextOfEither returns the next work_request a or b receives, and which one did.
func nextOfEither(t *testing.T, a, b *fakeAgent) (*fakeAgent, *workMsg) {
	t.Helper()
	select {
	case w := <-a.work:
		return a, w
	case w := <-b.work:
		return b, w
	case <-time.After(wait):
		t.Fatal("no agent received a work_request")
		return nil, nil
	}
}

// TestEachTaskGoesToTheLeastLoadedAgent: with two idle agents of room 4 and four
// tasks that keep running, each task goes to the agent running fewer, so they end
// two and two (never four on one agent), whichever way ties are broken.
func TestEachTaskGoesToTheLeastLoadedAgent(t *testing.T) {
	e := newEnv(t, "code-a", "code-b")
	e.open()
	a, b := e.fakeAgent("code-a"), e.fakeAgent("code-b")
	for _, ag := range []*fakeAgent{a, b} {
		ag.listen()
		ag.register(4)
	}
	got := map[string][]*workMsg{}
	for range 4 {
		submit(t, e.o, nil)
		ag, w := nextOfEither(t, a, b)
		ag.ack(w) // running: it keeps its slot
		got[ag.id] = append(got[ag.id], w)
	}
	if len(got["code-a"]) != 2 || len(got["code-b"]) != 2 {
		t.Fatalf("tasks per agent: code-a %d, code-b %d; want 2 and 2", len(got["code-a"]), len(got["code-b"]))
	}
	for _, ag := range []*fakeAgent{a, b} {
		for _, w := range got[ag.id] {
			ag.result(w, envelope.ResultSuccess, 0, "", nil)
			if final := waitFinal(t, e.o, w.req.TaskID); final.State != task.StateSucceeded {
				t.Fatalf("task %s: %s", w.req.TaskID, final.State)
			}
		}
	}
}

// TestTaskGoesOnlyToAnAgentOfferingItsWorkType: of two agents of the task's type,
// the one that does not offer the work type gets none of its tasks, even when it is
// the less loaded (the tasks kept running, so without the work-type filter least
// load would send the second one there at the latest).
func TestTaskGoesOnlyToAnAgentOfferingItsWorkType(t *testing.T) {
	e := newEnv(t, "code-a", "code-b")
	e.open()
	a, b := e.fakeAgent("code-a"), e.fakeAgent("code-b")
	a.listen()
	a.registerOffering(4, "echo")
	b.listen()
	b.registerOffering(4, "echo", "resize")
	var running []*workMsg
	for range 3 {
		if _, err := e.o.Submit(t.Context(), api.SubmitRequest{ToAgent: envelope.Code, WorkType: "resize",
			Parameters: map[string]any{"width": 10}}); err != nil {
			t.Fatalf("Submit: %v", err)
		}
		ag, w := nextOfEither(t, a, b)
		if ag != b {
			t.Fatalf("a %q task went to %s, which offers only echo", w.req.WorkType, ag.id)
		}
		ag.ack(w)
		running = append(running, w)
	}
	for _, w := range running {
		b.result(w, envelope.ResultSuccess, 0, "", nil)
		if final := waitFinal(t, e.o, w.req.TaskID); final.State != task.StateSucceeded || final.AgentID != "code-b" {
			t.Fatalf("task %s: %s on %s", w.req.TaskID, final.State, final.AgentID)
		}
	}
}
