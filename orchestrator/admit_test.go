package orchestrator_test

import (
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestAnAdmittedAgentWorksAndAForgottenOneIsRefused: an agent admitted to a
// running core (a host that joined) registers with its token and runs a task;
// forgotten (revoked), its task in flight fails with a 5004 naming the
// revocation and not retried, it leaves the agent list, its token is refused,
// nothing more is sent to it, and the configured agent beside it runs on.
func TestAnAdmittedAgentWorksAndAForgottenOneIsRefused(t *testing.T) {
	e := newEnv(t, "code-1")
	o := e.open()
	other := e.fakeAgent("code-1")
	other.listen()
	other.register(1)

	e.tokens["joined-1"], e.orchTokens["joined-1"] = broker.NewToken(), broker.NewToken()
	j := e.fakeAgent("joined-1")
	j.listen()
	if got := refusal(t, j.registerAs(e.tokens["joined-1"], 1)); got == "" {
		t.Fatal("an agent not admitted yet was not refused")
	}
	orchestrator.Admit(o, policy.AgentConfig{ID: "joined-1", Type: envelope.Code,
		Token: e.tokens["joined-1"], OrchestratorToken: e.orchTokens["joined-1"]})
	j.register(1)

	first := submit(t, o, &task.Hints{AgentID: "joined-1"})
	w := j.next()
	j.result(w, envelope.ResultSuccess, 0, "done", nil)
	if got := waitFinal(t, o, first.ID); got.State != task.StateSucceeded {
		t.Fatalf("task on the admitted agent ended %s", got.State)
	}

	inFlight := submit(t, o, &task.Hints{AgentID: "joined-1"})
	j.ack(j.next())
	orchestrator.Forget(o, "joined-1", "agent joined-1 was revoked by alice: whether the task ran there is unknown")
	got := waitFinal(t, o, inFlight.ID)
	if got.State != task.StateError || got.Error == nil || got.Error.Code != int(errcodes.AuthenticationFailed) ||
		!strings.Contains(got.Error.Message, "revoked by alice") || len(got.Retries) != 0 {
		t.Fatalf("the task in flight on the forgotten agent: %s %+v, retries %v", got.State, got.Error, got.Retries)
	}
	for _, a := range o.Agents() {
		if a.ID == "joined-1" {
			t.Errorf("the forgotten agent is still listed: %+v", a)
		}
	}
	if got := refusal(t, j.registerAs(e.tokens["joined-1"], 1)); got == "" {
		t.Error("the forgotten agent's token was not refused")
	}
	pinned := submit(t, o, &task.Hints{AgentID: "joined-1"})
	still := submit(t, o, &task.Hints{AgentID: "code-1"})
	w = other.next()
	other.result(w, envelope.ResultSuccess, 0, "ok", nil)
	if got := waitFinal(t, o, still.ID); got.State != task.StateSucceeded {
		t.Fatalf("the configured agent's task ended %s after the other was forgotten", got.State)
	}
	select {
	case w := <-j.work:
		t.Fatalf("work sent to the forgotten agent: %+v", w.req)
	default:
	}
	if got, err := o.Task(pinned.ID); err != nil || got.State != task.StatePending {
		t.Errorf("a task for the forgotten agent: %v %v, want it pending, sent nowhere", got, err)
	}
}
