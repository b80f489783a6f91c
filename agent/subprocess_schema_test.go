package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/envelope"
)

// TestParametersFailingTheSchemaRunNothing: a subprocess work type with a schema
// runs only parameters that satisfy it; others fail with ExitInvalidParameters and
// the command is never started.
func TestParametersFailingTheSchemaRunNothing(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran")
	schema := map[string]any{
		"type": "object", "required": []any{"n"}, "additionalProperties": false,
		"properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 1}},
	}
	// $0 is a log with a line for each run.
	types := map[string]agent.WorkTypeConfig{"checked": {
		Command: agent.Args("sh", "-c", `echo ran >> "$0"; echo ok`, ran), Schema: schema}}
	cases := []struct {
		name    string
		params  map[string]any
		refused bool
	}{
		{"valid", map[string]any{"n": 3}, false},
		{"required missing", map[string]any{}, true},
		{"wrong type", map[string]any{"n": "three"}, true},
		{"below minimum", map[string]any{"n": 0}, true},
		{"undeclared property", map[string]any{"n": 3, "extra": true}, true},
	}
	var runs []taskRun
	want := ""
	for _, tc := range cases {
		runs = append(runs, taskRun{"checked", tc.params})
		if !tc.refused {
			want += "ran\n"
		}
	}
	for i, r := range runTasks(t, types, runs...) {
		tc := cases[i]
		if tc.refused {
			wantRefused(t, tc.name, r, "parameter")
		} else if r.Status != envelope.ResultSuccess || r.Output != "ok\n" {
			t.Errorf("%s: want it run, got %s exit %d, output %q", tc.name, r.Status, r.ExitCode, r.Output)
		}
	}
	if b, _ := os.ReadFile(ran); string(b) != want {
		t.Errorf("the command ran %d times, want %d", strings.Count(string(b), "ran"), strings.Count(want, "ran"))
	}
}

// TestSubprocessReadsItsParametersOnStdin: in command and in shell mode, the
// process's stdin is the request's parameters as one JSON object.
func TestSubprocessReadsItsParametersOnStdin(t *testing.T) {
	types := map[string]agent.WorkTypeConfig{
		"command": {Command: agent.Args("cat")},
		"shell":   {Shell: "cat"},
	}
	params := map[string]any{"n": 3, "name": "x y", "tags": []any{"a", "b"}}
	const want = `{"n":3,"name":"x y","tags":["a","b"]}`
	res := runTasks(t, types, taskRun{"command", params}, taskRun{"shell", params})
	for i, name := range []string{"command", "shell"} {
		if r := res[i]; r.Status != envelope.ResultSuccess || r.Output != want {
			t.Errorf("%s: want stdin %s, got %s exit %d, output %q", name, want, r.Status, r.ExitCode, r.Output)
		}
	}
}
