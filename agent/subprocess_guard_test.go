package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/envelope"
)

// taskRun is one request of a work type.
type taskRun struct {
	workType string
	params   map[string]any
}

// runTasks starts an agent with the work types and runs the requests one after
// the other, returning their results in order.
func runTasks(t *testing.T, types map[string]agent.WorkTypeConfig, runs ...taskRun) []*envelope.WorkResult {
	t.Helper()
	h := newHarness(t, func(c *agent.Config) { c.WorkTypes = types })
	h.start(nil)
	var out []*envelope.WorkResult
	for _, r := range runs {
		res, _ := h.send(h.request(r.workType, r.params, nil)).result()
		out = append(out, res)
	}
	return out
}

// wantRefused checks that a task failed on its parameters with a message
// containing msg.
func wantRefused(t *testing.T, name string, r *envelope.WorkResult, msg string) {
	t.Helper()
	if r.Status != envelope.ResultFailed || r.ExitCode != agent.ExitInvalidParameters || !strings.Contains(r.Output, msg) {
		t.Errorf("%s: want refused with exit %d and %q, got %s exit %d, output %q",
			name, agent.ExitInvalidParameters, msg, r.Status, r.ExitCode, r.Output)
	}
}

func TestParameterCannotBecomeAnOption(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		args    []string // command elements after sh -c SCRIPT MARKER
		allow   bool
		params  map[string]any
		refused string // "" means it runs
	}{
		{"parameter as option", []string{"{{.ref}}"}, false, map[string]any{"ref": "--output=/tmp/x"},
			`command[4] "--output=/tmp/x" (from parameter ref) starts with '-'`},
		{"plain value", []string{"{{.ref}}"}, false, map[string]any{"ref": "main"}, ""},
		{"literal option", []string{"--verbose", "{{.ref}}"}, false, map[string]any{"ref": "main"}, ""},
		{"option fixed by the config", []string{"--ref={{.ref}}"}, false, map[string]any{"ref": "-x"}, ""},
		{"parameter picks the option, allowed", []string{"-{{.flag}}"}, true, map[string]any{"flag": "v"}, ""},
		{"two parameters", []string{"{{.a}}{{.b}}"}, false, map[string]any{"a": "-", "b": "x"},
			`(from parameter a, b) starts with '-'`},
		{"allowed", []string{"{{.ref}}"}, true, map[string]any{"ref": "--output=/tmp/x"}, ""},
		{"list item as option", nil, false, map[string]any{"extra": []any{"a", "--output=/tmp/x"}},
			`append_args_from item extra[1] "--output=/tmp/x" (from parameter extra) starts with '-'`},
		{"list item allowed", nil, true, map[string]any{"extra": []any{"--output=/tmp/x"}}, ""},
	}
	types := map[string]agent.WorkTypeConfig{}
	var runs []taskRun
	for i, tc := range cases {
		// $0 is a marker file: it exists once the command ran.
		name := fmt.Sprintf("t%d", i)
		types[name] = agent.WorkTypeConfig{
			Command:        agent.Args(append([]string{"sh", "-c", `echo ran > "$0"; echo "$@"`, filepath.Join(dir, name)}, tc.args...)...),
			AppendArgsFrom: "extra", AllowOptionArgs: tc.allow,
		}
		runs = append(runs, taskRun{name, tc.params})
	}
	for i, r := range runTasks(t, types, runs...) {
		tc := cases[i]
		_, statErr := os.Stat(filepath.Join(dir, fmt.Sprintf("t%d", i)))
		switch {
		case tc.refused != "":
			wantRefused(t, tc.name, r, tc.refused)
			if statErr == nil {
				t.Errorf("%s: the command ran", tc.name)
			}
		case r.Status != envelope.ResultSuccess || statErr != nil:
			t.Errorf("%s: want it run, got %s exit %d, output %q (%v)", tc.name, r.Status, r.ExitCode, r.Output, statErr)
		}
	}
}

func TestTemplatedDirStaysUnderItsBase(t *testing.T) {
	root := t.TempDir()
	repos := filepath.Join(root, "repos")
	for _, d := range []string{filepath.Join(repos, "a"), filepath.Join(root, "secret")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"out": "../secret", "in": "a"} {
		if err := os.Symlink(target, filepath.Join(repos, link)); err != nil {
			t.Fatal(err)
		}
	}
	realRepos, err := filepath.EvalSymlinks(repos)
	if err != nil {
		t.Fatal(err)
	}
	pwd := agent.Args("sh", "-c", "pwd -P")
	types := map[string]agent.WorkTypeConfig{
		"by_prefix": {Command: pwd, Dir: repos + "/{{.repo}}"},
		"by_base":   {Command: pwd, Dir: "{{.path}}", DirBase: repos},
	}
	cases := []struct {
		name, workType, param, value string
		want                         string // the working directory, or the refusal
	}{
		{"below", "by_prefix", "repo", "a", realRepos + "/a"},
		{"the base itself", "by_prefix", "repo", "", realRepos},
		{"dot-dot", "by_prefix", "repo", "../secret", "(from parameter repo) is not under " + repos},
		{"dot-dot inside", "by_prefix", "repo", "a/../../secret", "is not under"},
		{"symlink out", "by_prefix", "repo", "out", "which is not under"},
		{"symlink in", "by_prefix", "repo", "in", realRepos + "/a"},
		{"dir_base below", "by_base", "path", repos + "/a", realRepos + "/a"},
		{"dir_base outside", "by_base", "path", root + "/secret", "(from parameter path) is not under"},
		{"dir_base relative", "by_base", "path", "a", "is not under"},
	}
	var runs []taskRun
	for _, tc := range cases {
		runs = append(runs, taskRun{tc.workType, map[string]any{tc.param: tc.value}})
	}
	for i, r := range runTasks(t, types, runs...) {
		tc := cases[i]
		if !strings.HasPrefix(tc.want, "/") {
			wantRefused(t, tc.name, r, tc.want)
		} else if r.Status != envelope.ResultSuccess || r.Output != tc.want+"\n" {
			t.Errorf("%s: want it run in %s, got %s exit %d, output %q", tc.name, tc.want, r.Status, r.ExitCode, r.Output)
		}
	}
}

func TestShellGetsOnlyDeclaredParametersAsVariables(t *testing.T) {
	script := `env | grep '^CHIFFON_PARAM_' | sort`
	types := map[string]agent.WorkTypeConfig{
		"declared": {Shell: script, Schema: map[string]any{"type": "object", "properties": map[string]any{
			"repo": map[string]any{"type": "string"}, "n": map[string]any{}, "tags": map[string]any{}}}},
		"no_schema": {Shell: script},
	}
	params := map[string]any{"repo": "r", "n": 3, "tags": []any{"x"}, "undeclared": "u"}
	res := runTasks(t, types, taskRun{"declared", params}, taskRun{"no_schema", params})
	for i, want := range []string{"CHIFFON_PARAM_N=3\nCHIFFON_PARAM_REPO=r\n", ""} { // tags is no scalar
		if r := res[i]; r.Status != envelope.ResultSuccess || r.Output != want {
			t.Errorf("run %d: want %q, got %s, output %q", i, want, r.Status, r.Output)
		}
	}
}

func TestChildEnvironmentIsOnlyWhatTheConfigPasses(t *testing.T) {
	t.Setenv("CHIFFON_TEST_PASSED", "passed")
	t.Setenv("CHIFFON_TEST_SECRET", "secret")
	types := map[string]agent.WorkTypeConfig{"env": {Command: agent.Args("env"),
		Env: []string{"CHIFFON_TEST_PASSED", "CHIFFON_TEST_UNSET"}, SetEnv: map[string]string{"FIXED": "fixed"}}}
	r := runTasks(t, types, taskRun{"env", map[string]any{"p": "x"}})[0]
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(r.Output), "\n") {
		name, _, _ := strings.Cut(line, "=")
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"CHIFFON_REQUEST_ID", "CHIFFON_TASK_ID", "CHIFFON_TEST_PASSED", "CHIFFON_TRACE_ID",
		"CHIFFON_WORK_TYPE", "FIXED"}
	if !slices.Equal(names, want) || !strings.Contains(r.Output, "CHIFFON_TEST_PASSED=passed\n") ||
		!strings.Contains(r.Output, "FIXED=fixed\n") {
		t.Fatalf("child environment %q, want exactly %v", r.Output, want)
	}
}
