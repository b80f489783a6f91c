package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/envelope"
)

// writeFiles writes each file (its parent directories made) under root, and
// makes each link, a symlink to its target.
func writeFiles(t *testing.T, root string, files, links map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range links {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPathParameterNamesOnlyWhatIsInsideTheDir: a parameter marked
// x-chiffon-path reaches the command only when, its symlinks resolved, it
// names something inside the work type's dir; otherwise the task ends with
// exit code 2 and nothing runs.
func TestPathParameterNamesOnlyWhatIsInsideTheDir(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"ansible/site.yml": "site", "ansible/plays/inner.yml": "inner",
		"secret.yml": "secret", "secrets/x.yml": "x",
	}, map[string]string{
		"ansible/in.yml":     "plays/inner.yml",
		"ansible/out.yml":    "../secret.yml",
		"ansible/outdir":     "../secrets",
		"ansible/loop.yml":   "loop.yml",
		"current":            "ansible",
		"ansible/plays/up":   "..",
		"ansible/abs-in.yml": filepath.Join(root, "ansible/site.yml"),
	})
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"playbook": map[string]any{"type": "string", "x-chiffon-path": true}}}
	cat := agent.Args("cat", "--", "{{.playbook}}")
	types := map[string]agent.WorkTypeConfig{
		"play":      {Command: cat, Dir: filepath.Join(root, "ansible"), Schema: schema},
		"via_link":  {Command: cat, Dir: filepath.Join(root, "current"), Schema: schema},
		"templated": {Command: cat, Dir: root + "/{{.site}}", Schema: schema},
	}
	cases := []struct {
		name, workType, playbook string
		want                     string // the output, or the refusal
		refused                  bool
	}{
		{"a file", "play", "site.yml", "site", false},
		{"in a subdirectory", "play", "plays/inner.yml", "inner", false},
		{"dot-dot that stays inside", "play", "plays/../site.yml", "site", false},
		{"symlink inside", "play", "in.yml", "inner", false},
		{"absolute symlink inside", "play", "abs-in.yml", "site", false},
		{"symlink up, still inside", "play", "plays/up/site.yml", "site", false},
		{"dir itself a symlink", "via_link", "site.yml", "site", false},
		{"absolute", "play", filepath.Join(root, "secret.yml"), "parameter /playbook: \"" + root + "/secret.yml\" is an absolute path", true},
		{"dot-dot out", "play", "../secret.yml", `parameter /playbook: "../secret.yml" leaves the work type's directory`, true},
		{"dot-dot out of a linked dir", "via_link", "../secret.yml", "leaves the work type's directory", true},
		{"symlink out", "play", "out.yml", `parameter /playbook: "out.yml" resolves to ` + realPath(t, root) + "/secret.yml, outside", true},
		{"through a linked dir out", "play", "outdir/x.yml", "resolves to " + realPath(t, root) + "/secrets/x.yml, outside", true},
		{"missing", "play", "nope.yml", `parameter /playbook: "nope.yml": no such file or directory in ` + realPath(t, root) + "/ansible", true},
		{"symlink loop", "play", "loop.yml", `parameter /playbook: "loop.yml": EvalSymlinks: too many links`, true},
		{"templated dir", "templated", "site.yml", "site", false},
	}
	var runs []taskRun
	for _, tc := range cases {
		runs = append(runs, taskRun{tc.workType, map[string]any{"playbook": tc.playbook, "site": "ansible"}})
	}
	for i, r := range runTasks(t, types, runs...) {
		tc := cases[i]
		if tc.refused {
			wantRefused(t, tc.name, r, tc.want)
		} else if r.Status != envelope.ResultSuccess || r.Output != tc.want {
			t.Errorf("%s: want output %q, got %s exit %d, output %q", tc.name, tc.want, r.Status, r.ExitCode, r.Output)
		}
	}
}

// realPath is p with its symlinks resolved (a temp dir may be under one).
func realPath(t *testing.T, p string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// TestMissingDirIsNamedBeforeAnythingStarts: a work type whose dir is not
// there fails naming the dir, not the program (which exec would blame): 127
// when the config names the dir, 2 when a parameter chose it.
func TestMissingDirIsNamedBeforeAnythingStarts(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"file": "", "repos/a/.keep": ""}, nil)
	types := map[string]agent.WorkTypeConfig{
		"missing":    {Command: agent.Args("true"), Dir: root + "/srv/ansible"},
		"not_a_dir":  {Command: agent.Args("true"), Dir: root + "/file"},
		"shell":      {Shell: "true", Dir: root + "/srv/ansible"},
		"by_param":   {Command: agent.Args("true"), Dir: root + "/repos/{{.repo}}"},
		"there":      {Command: agent.Args("pwd"), Dir: root + "/repos/a"},
		"agents_own": {Command: agent.Args("true")},
	}
	cases := []struct {
		workType, repo string
		exit           int64
		want           string
	}{
		{"missing", "", 127, "chiffon: start true: dir " + root + "/srv/ansible does not exist on this agent's host (work_types.missing.dir)"},
		{"not_a_dir", "", 127, "start true: dir " + root + "/file is not a directory on this agent's host"},
		{"shell", "", 127, "start /bin/sh: dir " + root + "/srv/ansible does not exist"},
		{"by_param", "b", agent.ExitInvalidParameters, "dir " + root + "/repos/b (from parameter repo) does not exist"},
		{"by_param", "a", 0, ""},
		{"there", "", 0, root + "/repos/a\n"},
		{"agents_own", "", 0, ""},
	}
	var runs []taskRun
	for _, tc := range cases {
		runs = append(runs, taskRun{tc.workType, map[string]any{"repo": tc.repo}})
	}
	for i, r := range runTasks(t, types, runs...) {
		tc := cases[i]
		if r.ExitCode != tc.exit || !strings.Contains(r.Output, tc.want) || strings.Contains(r.Output, "fork/exec") {
			t.Errorf("%s %s: want exit %d with %q, got %s exit %d, output %q", tc.workType, tc.repo, tc.exit, tc.want, r.Status, r.ExitCode, r.Output)
		}
	}
}
