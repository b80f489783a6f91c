package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The upgrade from the first release (commit e70b8fb), from what it wrote
// (testdata/e70b8fb, see its README).

// copyTree copies the directory from into to, replacing in every file the
// strings of swap (old -> new).
func copyTree(t *testing.T, from, to string, swap map[string]string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s := string(b)
		for o, n := range swap {
			s = strings.ReplaceAll(s, o, n)
		}
		return os.WriteFile(dst, []byte(s), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func fileText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestUpUpgradesTheFirstReleasesDataDir: `chiffon up` on the first release's
// data dir says what it carried over, keeps its API token (the old one still
// works), every task and its output, ends the steps the old release left
// running, and runs new work.
func TestUpUpgradesTheFirstReleasesDataDir(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "chiffon-data")
	copyTree(t, "testdata/e70b8fb/up-data", data, nil)
	oldToken := fileText(t, filepath.Join(data, "tokens", "api.token"))

	stop, printed := startUp(t, dir)
	said := strings.Join(printed, "\n")
	for _, want := range []string{"Upgraded the data dir from the first release",
		"kept the API token: tokens/api.token is now secrets/api.token", "retired tokens/orchestrator.token", "removed tokens/"} {
		if !strings.Contains(said, want) {
			t.Errorf("up did not say %q:\n%s", want, said)
		}
	}
	if strings.Contains(said, oldToken) {
		t.Errorf("up printed the API token:\n%s", said)
	}
	// The old token, given as the first release's scripts give it, still works.
	cli := func(args ...string) result {
		return chiffonIn(t, dir, []string{"CHIFFON_API_TOKEN=" + oldToken}, "", args...)
	}
	got := cli("tasks", "--json")
	var tasks []struct {
		ID, State string
		WorkType  string `json:"work_type"`
		Steps     []struct{ Status string }
	}
	if got.code != 0 || json.Unmarshal([]byte(got.stdout), &tasks) != nil {
		t.Fatalf("tasks with the first release's token: exit %d: %s%s", got.code, got.stdout, got.stderr)
	}
	states := map[string]int{}
	for _, tk := range tasks {
		states[tk.State]++
		for _, s := range tk.Steps {
			if s.Status == "running" {
				t.Errorf("finished task %s (%s) still has a step running", tk.ID, tk.WorkType)
			}
		}
	}
	if len(tasks) != 4 || states["succeeded"] != 3 || states["failed"] != 1 {
		t.Fatalf("the first release's 4 tasks (3 succeeded, 1 failed): got %v", states)
	}
	for _, tk := range tasks {
		want := map[string]string{"echo": "hello from e70b8fb", "sleep": "slept 1s"}[tk.WorkType]
		if want == "" || tk.State != "succeeded" {
			continue
		}
		if out := cli("output", tk.ID); out.code != 0 || !strings.Contains(out.stdout, want) {
			t.Errorf("output of %s: exit %d, %q, want %q", tk.WorkType, out.code, out.stdout, want)
		}
	}
	if got := cli("submit", "--to", "code", "--work-type", "echo", "--param", "message=after the upgrade", "--wait"); got.code != 0 || got.stdout != "after the upgrade" {
		t.Fatalf("a new task: exit %d, %q %s", got.code, got.stdout, got.stderr)
	}
	if end := stop(); end.code != 0 {
		t.Fatalf("up after SIGINT: exit %d:\n%s", end.code, end.stderr)
	}
	if got := fileText(t, filepath.Join(data, "secrets", "api.token")); got != oldToken {
		t.Error("secrets/api.token is not the first release's token")
	}
	if _, err := os.Stat(filepath.Join(data, "tokens")); !os.IsNotExist(err) {
		t.Errorf("tokens/ is still there: %v", err)
	}
	assertSecretsPrivate(t, filepath.Join(data, "secrets"))

	// Started again, it has nothing left to upgrade.
	stop, printed = startUp(t, dir)
	if said := strings.Join(printed, "\n"); strings.Contains(said, "Upgraded") {
		t.Errorf("a second start upgraded again:\n%s", said)
	}
	stop()
}

// TestFirstReleaseSite: the orchestrator refuses the first release's config
// naming every key to change at once; `chiffon init --force` over that site
// keeps its API token and each agent's own token, says so, and writes configs
// this release reads.
func TestFirstReleaseSite(t *testing.T) {
	root := t.TempDir()
	copyTree(t, "testdata/e70b8fb/site", filepath.Join(root, "site"), map[string]string{"/FIXTURE": root})
	siteDir := filepath.Join(root, "site")

	got := chiffon(t, nil, "", "orchestrator", "--config", filepath.Join(siteDir, "orchestrator.yaml"))
	for _, want := range []string{"first release's orchestrator config", "remove token_file (line 9)",
		"agents[0] (infra-1): add type: infra", "agents[1] (code-1): add type: code",
		"agents[0] (infra-1): add orchestrator_token_file", "agents[1] (code-1): add orchestrator_token_file",
		"chiffon init --force", "docs/upgrading.md"} {
		if got.code != 2 || !strings.Contains(got.stderr, want) {
			t.Errorf("orchestrator on the first release's config: exit %d, stderr lacks %q:\n%s", got.code, want, got.stderr)
		}
	}

	old := map[string]string{}
	for _, name := range []string{"api", "infra-1", "code-1"} {
		old[name] = fileText(t, filepath.Join(siteDir, "tokens", name+".token"))
	}
	got = chiffon(t, nil, "", "init", "--force", "--dir", siteDir, "--agents", "infra,code")
	if got.code != 0 || !strings.Contains(got.stdout, "kept the API token") || !strings.Contains(got.stdout, "kept the agents' own tokens (code-1, infra-1)") {
		t.Fatalf("init --force over the first release's site: exit %d:\n%s%s", got.code, got.stdout, got.stderr)
	}
	for name, file := range map[string]string{"api": "api.token", "infra-1": "agent-infra-1.token", "code-1": "agent-code-1.token"} {
		if fileText(t, filepath.Join(siteDir, "secrets", file)) != old[name] {
			t.Errorf("secrets/%s is not the first release's %s token", file, name)
		}
	}
	for _, cfg := range []string{"orchestrator.yaml", "agents/infra-1.yaml", "agents/code-1.yaml"} {
		if got := chiffon(t, nil, "", "config", "check", filepath.Join(siteDir, cfg)); got.code != 0 {
			t.Errorf("config check %s after init --force: exit %d: %s%s", cfg, got.code, got.stdout, got.stderr)
		}
	}
}

// TestThisReleasesFixturesOpen: what this release wrote (testdata/cf6bbcd,
// kept for the next release's upgrade test) opens as it is: up upgrades
// nothing and keeps its tasks and token, and every config of its site passes
// the check.
func TestThisReleasesFixturesOpen(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "chiffon-data")
	copyTree(t, "testdata/cf6bbcd/up-data", data, nil)
	stop, printed := startUp(t, dir)
	if said := strings.Join(printed, "\n"); strings.Contains(said, "Upgraded") {
		t.Errorf("up upgraded this release's data dir:\n%s", said)
	}
	cli := func(args ...string) result { return chiffonIn(t, dir, nil, "", args...) }
	got := cli("tasks", "--json")
	var tasks []struct{ ID, State string }
	if got.code != 0 || json.Unmarshal([]byte(got.stdout), &tasks) != nil {
		t.Fatalf("tasks: exit %d: %s%s", got.code, got.stdout, got.stderr)
	}
	states := map[string]int{}
	for _, tk := range tasks {
		states[tk.State]++
	}
	if len(tasks) != 4 || states["succeeded"] != 3 || states["cancelled"] != 1 {
		t.Errorf("the fixture's 4 tasks (3 succeeded, 1 cancelled): got %v", states)
	}
	if got := cli("submit", "--to", "code", "--work-type", "echo", "--param", "message=still here", "--wait"); got.code != 0 || got.stdout != "still here" {
		t.Errorf("a new task: exit %d, %q %s", got.code, got.stdout, got.stderr)
	}
	stop()

	root := t.TempDir()
	copyTree(t, "testdata/cf6bbcd/site", filepath.Join(root, "site"), map[string]string{"/FIXTURE": root})
	for _, cfg := range []string{"orchestrator.yaml", "agents/infra-1.yaml", "agents/code-1.yaml", "broker.conf"} {
		if got := chiffon(t, nil, "", "config", "check", filepath.Join(root, "site", cfg)); got.code != 0 {
			t.Errorf("config check %s: exit %d: %s%s", cfg, got.code, got.stdout, got.stderr)
		}
	}
}
