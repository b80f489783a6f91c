package catalog

import (
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/worktype"
)

// TestCheckRefusesWhatTheCatalogueSays: unknown work types once every
// configured agent of the type has registered, or those a pinned agent does
// not offer; parameters against every distinct schema, naming the agent
// whose schema refused them when the agents disagree.
func TestCheckRefusesWhatTheCatalogueSays(t *testing.T) {
	configured := map[string]envelope.AgentType{"a": "infra", "b": "infra", "c": "code", "d": "desktop"}
	partial := New(configured).
		With("a", reg{typ: "infra", offer: []string{"echo"}}.agent(t))
	agree := New(configured).
		With("a", reg{typ: "infra", offer: []string{"echo", "run"}, schema: map[string]string{"echo": "x"}}.agent(t)).
		With("b", reg{typ: "infra", offer: []string{"echo"}, schema: map[string]string{"echo": "x"}}.agent(t)).
		With("c", reg{typ: "code", offer: []string{"build"}}.agent(t))
	disagree := agree.
		With("b", reg{typ: "infra", offer: []string{"echo"}, schema: map[string]string{"echo": "y"}}.agent(t))
	req := func(to envelope.AgentType, work, pin string, params map[string]any) *api.SubmitRequest {
		r := &api.SubmitRequest{ToAgent: to, WorkType: work, Parameters: params}
		if pin != "" {
			r.Hints = &task.Hints{AgentID: pin}
		}
		return r
	}
	x, y := map[string]any{"x": 1}, map[string]any{"y": 1}
	cases := []struct {
		name string
		s    *Snapshot
		req  *api.SubmitRequest
		// code is the refusal's, "" for none; msg a part of its message.
		code, msg string
	}{
		{"not every agent registered", partial, req("infra", "sleep", "", nil), "", ""},
		{"unknown once all registered", agree, req("infra", "sleep", "", nil), "unknown_work_type",
			`no infra agent offers work type "sleep"; offered: echo, run`},
		{"pinned agent not offering it", agree, req("infra", "run", "b", nil), "unknown_work_type",
			`agent b does not offer work type "run"; offered: echo`},
		{"pinned agent not registered", partial, req("infra", "sleep", "b", nil), "", ""},
		{"pinned agent of another type", agree, req("infra", "build", "c", nil), "", ""},
		{"type without configured agents", agree, req("research", "sleep", "", nil), "", ""},
		{"schema satisfied", agree, req("infra", "echo", "", x), "", ""},
		{"schema refuses", agree, req("infra", "echo", "", y), "invalid_parameter", "x"},
		{"no schema declared", agree, req("infra", "run", "", y), "", ""},
		{"disagreeing schemas: b's refuses", disagree, req("infra", "echo", "", x), "invalid_parameter", "(the schema of agent b)"},
		{"disagreeing schemas: a's refuses first", disagree, req("infra", "echo", "", nil), "invalid_parameter", "(the schema of agent a)"},
		{"pinned: only its schema, unnamed", disagree, req("infra", "echo", "b", y), "", ""},
		{"pinned: its schema refuses", disagree, req("infra", "echo", "b", x), "invalid_parameter", "y"},
	}
	for _, tc := range cases {
		err := tc.s.Check(tc.req)
		if tc.code == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.name, err)
			}
			continue
		}
		we, ok := err.(*api.WorkTypeError)
		if !ok || we.Code != tc.code || !strings.Contains(we.Message, tc.msg) {
			t.Errorf("%s: got %v, want %s saying %q", tc.name, err, tc.code, tc.msg)
			continue
		}
		if strings.HasPrefix(tc.name, "pinned") && strings.Contains(we.Message, "the schema of agent") {
			t.Errorf("%s: a pinned task's refusal names an agent's schema: %s", tc.name, we.Message)
		}
	}
}

// TestWorkTypesListsVariantsAndApprovals: the view of the work types groups
// the agents by the spec they declare, the first agent's spec first, with the
// agents asking approval and those declaring nothing.
func TestWorkTypesListsVariantsAndApprovals(t *testing.T) {
	configured := map[string]envelope.AgentType{"a": "infra", "b": "infra", "c": "infra"}
	s := New(configured).
		With("c", reg{typ: "infra", offer: []string{"echo"}}.agent(t)).
		With("b", reg{typ: "infra", offer: []string{"echo"}, schema: map[string]string{"echo": "y"}, asks: []string{"echo"}}.agent(t)).
		With("a", reg{typ: "infra", offer: []string{"echo", "deploy"}, schema: map[string]string{"echo": "x"}}.agent(t))
	got := s.WorkTypes(func(w string) bool { return w == "deploy" })
	if len(got) != 2 || got[0].Name != "deploy" || got[1].Name != "echo" {
		t.Fatalf("work types %+v, want deploy and echo", got)
	}
	if got[0].Approval != worktype.ApprovalRequired || got[1].Approval != "" {
		t.Errorf("approvals %q, %q: want the config's required for deploy only", got[0].Approval, got[1].Approval)
	}
	echo := got[1]
	if strings.Join(echo.Agents, ",") != "a,b,c" || strings.Join(echo.ApprovalAgents, ",") != "b" ||
		strings.Join(echo.Undeclared, ",") != "c" {
		t.Errorf("echo: agents %v, asking %v, undeclared %v", echo.Agents, echo.ApprovalAgents, echo.Undeclared)
	}
	if len(echo.Variants) != 2 || strings.Join(echo.Variants[0].Agents, ",") != "a" ||
		strings.Join(echo.Variants[1].Agents, ",") != "b" || echo.Spec.Parameters == nil {
		t.Errorf("echo: variants %+v, want a's then b's, a's spec first", echo.Variants)
	}
}
