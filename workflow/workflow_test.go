package workflow

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
)

func taskStep(name string, params map[string]any, needs ...api.WorkflowNeed) api.WorkflowStep {
	return api.WorkflowStep{Name: name, Needs: needs, Task: &api.SubmitRequest{ToAgent: envelope.Infra, WorkType: "w", Parameters: params}}
}

func need(step, when string) api.WorkflowNeed { return api.WorkflowNeed{Step: step, When: when} }

func spec(steps ...api.WorkflowStep) api.WorkflowSpec {
	return api.WorkflowSpec{Name: "wf", Params: map[string]api.WorkflowParam{"host": {}, "n": {Type: TypeInteger}}, Steps: steps}
}

// TestCheck: each refusal names its field; a good spec passes.
func TestCheck(t *testing.T) {
	good := spec(taskStep("a", map[string]any{"h": "${params.host}"}),
		taskStep("b", map[string]any{"x": []any{"${steps.a.output.k}", "lit $${no}"}}, need("a", "")),
		taskStep("c", map[string]any{"id": "${steps.a.task_id} of ${run.id}"}, need("b", api.NeedFailure)))
	if err := Check(&good); err != nil {
		t.Fatalf("a good spec refused: %v", err)
	}
	rows := []struct {
		name  string
		spec  api.WorkflowSpec
		field string
		msg   string
	}{
		{"bad name", api.WorkflowSpec{Name: "Bad Name", Steps: good.Steps}, "name", "a-z"},
		{"no steps", api.WorkflowSpec{Name: "wf"}, "steps", "1 to 100"},
		{"two kinds", spec(api.WorkflowStep{Name: "a", Task: good.Steps[0].Task, Approval: &api.WorkflowGate{}}), "steps[0]", "exactly one"},
		{"no kind", spec(api.WorkflowStep{Name: "a"}), "steps[0]", "exactly one"},
		{"bad task", spec(api.WorkflowStep{Name: "a", Task: &api.SubmitRequest{ToAgent: "nope", WorkType: "w"}}), "steps[0].task.to_agent", ""},
		{"twice named", spec(taskStep("a", nil), taskStep("a", nil)), "steps[1].name", "twice"},
		{"unknown need", spec(taskStep("a", nil, need("zz", ""))), "steps[0].needs[0].step", "no step"},
		{"self need", spec(taskStep("a", nil, need("a", ""))), "steps[0].needs[0].step", "itself"},
		{"bad when", spec(taskStep("a", nil), taskStep("b", nil, need("a", "sometimes"))), "steps[1].needs[0].when", "sometimes"},
		{"cycle", spec(taskStep("a", nil, need("c", "")), taskStep("b", nil, need("a", "")), taskStep("c", nil, need("b", ""))), "steps", "a -> c -> b -> a"},
		{"undeclared param", spec(taskStep("a", map[string]any{"h": "${params.nope}"})), "steps[0].task.parameters.h", "no parameter"},
		{"unknown step ref", spec(taskStep("a", map[string]any{"h": "${steps.zz.output}"})), "steps[0].task.parameters.h", "no step"},
		{"ref to a step not needed", spec(taskStep("a", nil), taskStep("b", map[string]any{"h": "${steps.a.output}"})), "steps[1].task.parameters.h", "must need"},
		{"bad ref", spec(taskStep("a", map[string]any{"h": "${env.HOME}"})), "steps[0].task.parameters", "not a reference"},
		{"unclosed", spec(taskStep("a", map[string]any{"h": "${params.host"})), "steps[0].task.parameters", "without its }"},
		{"bad timeout", api.WorkflowSpec{Name: "wf", Timeout: "soon", Steps: good.Steps}, "timeout", "soon"},
		{"bad max_runs", api.WorkflowSpec{Name: "wf", MaxRuns: -1, Steps: good.Steps}, "max_runs", ""},
		{"bad param type", api.WorkflowSpec{Name: "wf", Params: map[string]api.WorkflowParam{"p": {Type: "date"}}, Steps: good.Steps}, "params.p.type", "date"},
		{"bad default", api.WorkflowSpec{Name: "wf", Params: map[string]api.WorkflowParam{"p": {Type: TypeInteger, Default: "x"}}, Steps: good.Steps}, "params.p.default", "integer"},
		{"bad expiry", spec(api.WorkflowStep{Name: "g", Approval: &api.WorkflowGate{Expires: "-1h"}}), "steps[0].approval.expires", ""},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			err := Check(&row.spec)
			fe, ok := err.(*api.FieldError)
			if !ok {
				t.Fatalf("Check = %v, want a *api.FieldError on %s", err, row.field)
			}
			if fe.Field != row.field || !strings.Contains(fe.Message, row.msg) {
				t.Fatalf("refused on %q: %q; want %q containing %q", fe.Field, fe.Message, row.field, row.msg)
			}
		})
	}
}

// TestExpand: a lone reference keeps its type, a reference in text is
// written into it, "$${" escapes, a missing value is an error.
func TestExpand(t *testing.T) {
	sc := &Scope{RunID: "r1", Params: map[string]any{"host": "nas", "n": float64(2)},
		Steps: map[string]StepValues{"a": {TaskID: "t-a", Output: map[string]any{"k": map[string]any{"deep": []any{1.0, true}}, "n": 3.0}}}}
	in := map[string]any{
		"num":   "${steps.a.output.n}",
		"obj":   "${steps.a.output.k}",
		"text":  "n=${params.n} on ${params.host} (${steps.a.task_id}, ${run.id}) ${steps.a.output.k}",
		"esc":   "$${params.host}",
		"list":  []any{"${params.host}", 7.0},
		"plain": true,
	}
	got, err := ExpandParams(in, sc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"num":   3.0,
		"obj":   map[string]any{"deep": []any{1.0, true}},
		"text":  `n=2 on nas (t-a, r1) {"deep":[1,true]}`,
		"esc":   "${params.host}",
		"list":  []any{"nas", 7.0},
		"plain": true,
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		t.Fatalf("got %s", g)
	}
	if in["num"] != "${steps.a.output.n}" {
		t.Error("Expand changed its input")
	}
	for _, bad := range []string{"${steps.b.output}", "${steps.a.output.zz}", "${steps.a.output.n.x}", "${params.zz}"} {
		if _, err := ExpandParams(map[string]any{"x": bad}, sc); err == nil {
			t.Errorf("%s expanded", bad)
		}
	}
}

// TestRunParams: given parameters typed, strings from a command line
// converted, defaults filled, unknown and missing ones refused.
func TestRunParams(t *testing.T) {
	s := &api.WorkflowSpec{Name: "wf", Params: map[string]api.WorkflowParam{
		"host": {Required: true}, "n": {Type: TypeInteger, Default: 2}, "f": {Type: TypeBoolean}, "o": {Type: TypeObject}}}
	got, err := RunParams(s, map[string]any{"host": "nas", "f": "true", "o": `{"a":1}`})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"host": "nas", "n": 2.0, "f": true, "o": map[string]any{"a": 1.0}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
	for name, given := range map[string]map[string]any{
		"params.host": {},
		"params.zz":   {"host": "a", "zz": 1},
		"params.n":    {"host": "a", "n": 2.5},
	} {
		_, err := RunParams(s, given)
		if fe, ok := err.(*api.FieldError); !ok || fe.Field != name {
			t.Errorf("%v: %v, want a refusal on %s", given, err, name)
		}
	}
}
