package agent_test

import (
	"slices"
	"testing"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/envelope"
)

// TestOptionalGroupIsLeftOutWhenItsParameterIsAbsent: a command's optional
// group (a list in YAML) is rendered when every parameter it reads is there,
// after the schema's defaults are filled in, and left out whole otherwise.
func TestOptionalGroupIsLeftOutWhenItsParameterIsAbsent(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"inventory": map[string]any{"type": "string", "default": "hosts"},
		"limit":     map[string]any{"type": []any{"null", "string"}},
	}}
	// $@ is printed one argument a line.
	printArgs := agent.Args("sh", "-c", `printf '%s\n' "$@"`, "sh", "-i", "{{.inventory}}")
	types := map[string]agent.WorkTypeConfig{
		"pair": {Command: slices.Concat(printArgs, []agent.Arg{agent.Optional("--limit", "{{.limit}}"), {Text: "site.yml"}}),
			Schema: schema},
		"two_params": {Command: slices.Concat(printArgs, []agent.Arg{agent.Optional("--set", "{{.limit}}={{.inventory}}")}), Schema: schema},
		"no_schema":  {Command: agent.Args("sh", "-c", `printf '%s\n' "$@"`, "sh", "{{.inventory}}")},
	}
	cases := []struct {
		name, workType string
		params         map[string]any
		want           string // the arguments, or the refusal
		refused        bool
	}{
		{"given", "pair", map[string]any{"inventory": "inv", "limit": "web"}, "-i\ninv\n--limit\nweb\nsite.yml\n", false},
		{"absent", "pair", map[string]any{"inventory": "inv"}, "-i\ninv\nsite.yml\n", false},
		{"null", "pair", map[string]any{"inventory": "inv", "limit": nil}, "-i\ninv\nsite.yml\n", false},
		{"default filled in", "pair", map[string]any{}, "-i\nhosts\nsite.yml\n", false},
		{"one of two absent, default not", "two_params", map[string]any{}, "-i\nhosts\n", false},
		{"both there", "two_params", map[string]any{"limit": "a"}, "-i\nhosts\n--set\na=hosts\n", false},
		{"an option from the group", "pair", map[string]any{"limit": "--x"}, `command[6][1] "--x" (from parameter limit) starts with '-'`, true},
		{"a single element's parameter absent", "no_schema", map[string]any{}, `command[4]: template: no_schema:1:2: executing "no_schema" at <.inventory>: map has no entry for key "inventory"`, true},
	}
	var runs []taskRun
	for _, tc := range cases {
		runs = append(runs, taskRun{tc.workType, tc.params})
	}
	for i, r := range runTasks(t, types, runs...) {
		tc := cases[i]
		if tc.refused {
			wantRefused(t, tc.name, r, tc.want)
		} else if r.Status != envelope.ResultSuccess || r.Output != tc.want {
			t.Errorf("%s: want arguments %q, got %s exit %d, output %q", tc.name, tc.want, r.Status, r.ExitCode, r.Output)
		}
	}
}
