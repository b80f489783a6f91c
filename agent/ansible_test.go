package agent_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/envelope"
)

// exampleRunPlaybook is the run_playbook work type of the example infra agent,
// with its dir pointed at dir.
func exampleRunPlaybook(t *testing.T, dir string) agent.WorkTypeConfig {
	t.Helper()
	c, err := agent.ReadConfig("../examples/agents/infra.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wt, ok := c.WorkTypes["run_playbook"]
	if !ok {
		t.Fatal("examples/agents/infra.yaml has no run_playbook")
	}
	wt.Dir = dir
	return wt
}

// TestExamplePlaybookPassesAnsiblesEnvironment: what a user sets for Ansible in
// the agent's environment reaches the playbook's process.
func TestExamplePlaybookPassesAnsiblesEnvironment(t *testing.T) {
	wt := exampleRunPlaybook(t, t.TempDir())
	wt.Command, wt.Schema = agent.Args("env"), nil
	want := []string{"HOME", "LANG", "LC_ALL", "ANSIBLE_CONFIG", "ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP",
		"ANSIBLE_ROLES_PATH", "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_VAULT_PASSWORD_FILE",
		"ANSIBLE_PRIVATE_KEY_FILE", "ANSIBLE_REMOTE_USER", "ANSIBLE_HOST_KEY_CHECKING", "SSH_AUTH_SOCK"}
	for _, k := range want {
		t.Setenv(k, "set-"+k)
	}
	r := runTasks(t, map[string]agent.WorkTypeConfig{"run_playbook": wt}, taskRun{"run_playbook", nil})[0]
	for _, k := range want {
		if !strings.Contains(r.Output, "\n"+k+"=set-"+k+"\n") && !strings.HasPrefix(r.Output, k+"=set-"+k+"\n") {
			t.Errorf("%s did not reach the playbook's environment:\n%s", k, r.Output)
		}
	}
}

// requireAnsible skips the test without ansible-playbook, unless
// CHIFFON_REQUIRE_ANSIBLE says it must run (CI).
func requireAnsible(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		if os.Getenv("CHIFFON_REQUIRE_ANSIBLE") != "" {
			t.Fatalf("CHIFFON_REQUIRE_ANSIBLE is set and ansible-playbook is not on PATH: %v", err)
		}
		t.Skip("ansible-playbook is not on PATH (apt-get install ansible-core)")
	}
}

// ansibleHome gives Ansible a home of its own under root, as the example's
// environment passes it on.
func ansibleHome(t *testing.T, root string) {
	t.Helper()
	home := filepath.Join(root, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	// Ansible writes ~/.ansible; the example passes HOME and ANSIBLE_LOCAL_TEMP.
	t.Setenv("HOME", home)
	t.Setenv("ANSIBLE_LOCAL_TEMP", filepath.Join(home, "tmp"))
}

// localInventory is the example's default inventory for a run on this host.
const localInventory = "localhost ansible_connection=local ansible_python_interpreter=\"{{ ansible_playbook_python }}\"\n"

// TestExampleWorkTypeRunsARealPlaybook runs the example infra agent's
// run_playbook through the agent with the real ansible-playbook, against
// localhost. CI sets CHIFFON_REQUIRE_ANSIBLE so that it cannot skip.
func TestExampleWorkTypeRunsARealPlaybook(t *testing.T) {
	requireAnsible(t)
	root := t.TempDir()
	dir := filepath.Join(root, "ansible")
	writeFiles(t, root, map[string]string{
		// The example's default inventory.
		"ansible/inventory": localInventory,
		"ansible/site.yml": `- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.debug: {msg: hello from chiffon}
    - ansible.builtin.copy: {content: made, dest: "{{ playbook_dir }}/made.txt"}
`,
		"ansible/fail.yml": `- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.fail: {msg: the task failed on purpose}
`,
		"outside.yml": "- hosts: all\n  tasks: [{ansible.builtin.debug: {msg: outside}}]\n",
	}, nil)
	ansibleHome(t, root)
	types := map[string]agent.WorkTypeConfig{"run_playbook": exampleRunPlaybook(t, dir)}
	made := filepath.Join(dir, "made.txt")
	cases := []struct {
		name    string
		params  map[string]any
		exit    int64
		output  []string // parts of the output
		made    bool     // made.txt exists after it
		refused bool     // nothing ran
	}{
		{"check mode changes nothing", map[string]any{"playbook": "site.yml", "extra_args": []any{"--check"}},
			0, []string{"hello from chiffon", "changed: [localhost]", "PLAY RECAP"}, false, false},
		{"a run", map[string]any{"playbook": "site.yml", "limit": "localhost"},
			0, []string{"hello from chiffon", "changed: [localhost]", "ok=2"}, true, false},
		{"a failed task keeps Ansible's exit code", map[string]any{"playbook": "fail.yml"},
			2, []string{"the task failed on purpose", "failed=1"}, true, false},
		{"a limit that matches nothing", map[string]any{"playbook": "site.yml", "limit": "nohost"},
			1, []string{"Could not match supplied host pattern"}, true, false},
		{"a playbook out of the dir", map[string]any{"playbook": "../outside.yml"},
			agent.ExitInvalidParameters, []string{`parameter /playbook: "../outside.yml" leaves the work type's directory`}, true, true},
		{"a missing inventory", map[string]any{"playbook": "site.yml", "inventory": "hosts"},
			agent.ExitInvalidParameters, []string{`parameter /inventory: "hosts": no such file or directory in`}, true, true},
	}
	for _, tc := range cases {
		// One at a time, to see what each left in the dir.
		r := runTasks(t, types, taskRun{"run_playbook", tc.params})[0]
		status := envelope.ResultSuccess
		if tc.exit != 0 {
			status = envelope.ResultFailed
		}
		if r.Status != status || r.ExitCode != tc.exit {
			t.Errorf("%s: got %s exit %d, want %s exit %d; output:\n%s", tc.name, r.Status, r.ExitCode, status, tc.exit, r.Output)
		}
		for _, part := range tc.output {
			if !strings.Contains(r.Output, part) {
				t.Errorf("%s: output lacks %q:\n%s", tc.name, part, r.Output)
			}
		}
		if tc.refused && strings.Contains(r.Output, "PLAY") {
			t.Errorf("%s: ansible-playbook ran:\n%s", tc.name, r.Output)
		}
		if _, err := os.Stat(made); (err == nil) != tc.made {
			t.Errorf("%s: made.txt there: %v, want %v", tc.name, err == nil, tc.made)
		}
	}
}

// TestExamplePlaybookIsCancelledWithSIGTERM: cancelling a running playbook
// sends SIGTERM first, which a handler in the playbook's processes sees (it
// cleans up), and the result says so. The handler runs in a session of its own,
// as a daemon a play starts would: on SIGTERM Ansible ends the processes of its
// own group at once, so a trap among them cannot be relied on to run, and one
// outside it shows the agent's SIGTERM reaching every process of the task.
func TestExamplePlaybookIsCancelledWithSIGTERM(t *testing.T) {
	requireAnsible(t)
	root := t.TempDir()
	dir := filepath.Join(root, "ansible")
	writeFiles(t, root, map[string]string{
		"ansible/inventory": localInventory,
		"ansible/long.yml": `- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.shell: |
        setsid sh -c 'trap "echo TERM > {{ playbook_dir }}/term.txt; exit 143" TERM
          echo ready > {{ playbook_dir }}/ready.txt
          while true; do sleep 0.1; done' </dev/null >/dev/null 2>&1 &
        wait
`,
	}, nil)
	ansibleHome(t, root)
	h := newHarness(t, func(c *agent.Config) {
		c.WorkTypes = map[string]agent.WorkTypeConfig{"run_playbook": exampleRunPlaybook(t, dir)}
	})
	h.start(nil)
	req := h.request("run_playbook", map[string]any{"playbook": "long.yml"}, nil)
	w := h.send(req)
	ready := filepath.Join(dir, "ready.txt")
	deadline := time.Now().Add(time.Minute)
	for _, err := os.Stat(ready); err != nil; _, err = os.Stat(ready) {
		if time.Now().After(deadline) {
			t.Fatal("the playbook's task did not start within a minute")
		}
		time.Sleep(20 * time.Millisecond) // another process's file: nothing to wait on
	}
	h.control(&envelope.Cancel{TaskID: req.Payload.(*envelope.WorkRequest).TaskID, Reason: "operator"})
	r, _ := w.result()
	if r.Status != envelope.ResultCancelled || r.ExitCode != agent.ExitCancelled {
		t.Fatalf("result %s, exit %d, want cancelled, %d; output:\n%s", r.Status, r.ExitCode, agent.ExitCancelled, r.Output)
	}
	if !strings.Contains(r.Output, "chiffon: SIGTERM sent to the process group") {
		t.Errorf("the result does not say SIGTERM was sent:\n%s", r.Output)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "term.txt")); err != nil || strings.TrimSpace(string(b)) != "TERM" {
		t.Errorf("the playbook's handler did not see SIGTERM: %q, %v\n%s", b, err, r.Output)
	}
}
