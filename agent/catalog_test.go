package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/worktype"
	"github.com/nats-io/nats.go"
)

// TestTheRegistrationCarriesTheCatalogue: the registration's x_custom_fields
// hold every work type's spec: the built-ins', a configured subprocess's
// description, schema, approval and cancel_grace (the stop grace the
// orchestrator adds to a deadline), and a Go handler's from HandleSpec; one
// added with Handle is there with an empty spec.
func TestTheRegistrationCarriesTheCatalogue(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}
	h := newHarness(t, func(c *agent.Config) {
		grace := agent.Duration(30 * time.Second)
		c.WorkTypes = map[string]agent.WorkTypeConfig{"build": {Command: agent.Args("true"), Description: "Builds it.",
			Schema: schema, Approval: worktype.ApprovalRequired, CancelGrace: &grace},
			"quick": {Command: agent.Args("true")}}
	})
	regs := make(chan *envelope.Envelope, 4)
	if _, err := h.nc.Subscribe(broker.Subjects{}.Registers(), func(m *nats.Msg) {
		if env, err := envelope.Decode(m.Data); err == nil {
			regs <- env
		}
	}); err != nil {
		t.Fatal(err)
	}
	h.start(func(a *agent.Agent) {
		a.Handle("plain", func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
			return agent.Result{}, nil
		})
		if err := a.HandleSpec("typed", worktype.Spec{Description: "Typed."}, nil); err != nil {
			t.Fatal(err)
		}
	})
	env := <-regs
	reg := env.Payload.(*envelope.Register)
	got, err := worktype.FromRegistration(env.XCustomFields, reg.WorkTypes)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(reg.WorkTypes) || len(got) != 7 {
		t.Fatalf("catalogue of %d work types for %v", len(got), reg.WorkTypes)
	}
	if b := got["build"]; b.Description != "Builds it." || b.Approval != worktype.ApprovalRequired || b.Schema == nil ||
		b.Schema.Check(map[string]any{"n": "x"}) == nil || b.StopGraceMS != 30000 {
		t.Errorf("build: %+v", b)
	}
	if q := got["quick"]; q.StopGraceMS != agent.DefaultCancelGrace.Milliseconds() {
		t.Errorf("quick declares a stop grace of %d ms, want the default cancel_grace", q.StopGraceMS)
	}
	for _, name := range []string{agent.WorkEcho, agent.WorkSleep, agent.WorkSystemInfo} {
		if got[name].Description == "" || got[name].Schema == nil {
			t.Errorf("built-in %s declares %+v", name, got[name])
		}
	}
	if p := got["plain"]; p.Description != "" || p.Schema != nil {
		t.Errorf("plain: %+v", p)
	}
	if got["typed"].Description != "Typed." {
		t.Errorf("typed: %+v", got["typed"])
	}
}

// TestAGoHandlersSchemaIsCheckedBeforeItRuns: a request whose parameters fail
// the schema given to HandleSpec fails with ExitInvalidParameters, naming the
// value, and the handler is not called; one that passes runs.
func TestAGoHandlersSchemaIsCheckedBeforeItRuns(t *testing.T) {
	h := newHarness(t, nil)
	h.acceptRegistrations()
	var calls atomic.Int32
	spec := worktype.Spec{Parameters: map[string]any{"type": "object", "required": []any{"n"},
		"properties": map[string]any{"n": map[string]any{"type": "integer"}}}}
	h.start(func(a *agent.Agent) {
		if err := a.HandleSpec("count", spec, func(_ context.Context, req *agent.Request, _ agent.Progress) (agent.Result, error) {
			calls.Add(1)
			return agent.Result{Output: string(req.Parameters["n"].(json.Number))}, nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	r, _ := h.send(h.request("count", map[string]any{"n": "2"}, nil)).result()
	if r.Status != envelope.ResultFailed || r.ExitCode != agent.ExitInvalidParameters || !strings.Contains(r.Output, "parameter /n: got string, want integer") {
		t.Fatalf("bad parameters: %s exit %d output %q", r.Status, r.ExitCode, r.Output)
	}
	r, _ = h.send(h.request("count", map[string]any{"n": 2}, nil)).result()
	if r.Status != envelope.ResultSuccess || r.Output != "2" {
		t.Fatalf("good parameters: %s %q", r.Status, r.Output)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want once", n)
	}
	bad := worktype.Spec{Parameters: map[string]any{"type": 12}}
	h2 := newHarness(t, nil)
	a, err := agent.New(h2.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.HandleSpec("broken", bad, nil); err == nil || !strings.Contains(err.Error(), "parameters schema") {
		t.Fatalf("HandleSpec with a schema that does not compile: %v", err)
	}
}
