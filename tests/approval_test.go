package tests

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestApprovalAcrossProcesses: with count marked approval: required, a task waits
// and reaches no agent (the ledger stays empty) across an orchestrator SIGKILL;
// `chiffon submit --wait` says it waits for approval and keeps waiting;
// `chiffon approve` sends it, and it runs once; `chiffon reject` ends another
// rejected, run nowhere; `chiffon task` shows who did what.
func TestApprovalAcrossProcesses(t *testing.T) {
	c := newCluster(t, 2)
	c.orchExtra = "work_types: {count: {approval: required}}\napproval: {expires_after: 1h}"
	c.writeOrchConfig()
	c.start()
	client := []string{"--server", "http://" + c.httpAddr, "--api-token-file", c.secret("api.token")}

	var stderr bytes.Buffer
	wait := exec.Command(c.bin, append([]string{"submit", "--to", "code", "--work-type", "count", "--param", "n:=1", "--wait"}, client...)...)
	wait.Stderr = &stderr
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- wait.Wait() }()
	var tk *task.Task
	c.waitFor("the task to await approval", 30*time.Second, func() bool {
		tasks, err := c.client.List(fleetCtx(t), api.ListOptions{})
		if err != nil || len(tasks) != 1 {
			return false
		}
		tk = tasks[0]
		return tk.State == task.StateAwaitingApproval
	})

	restartOrchestrator(c)
	for _, id := range c.agentIDs {
		c.waitAgentOnline(id, time.Now().Add(-time.Second))
	}
	got, err := c.client.Get(fleetCtx(t), tk.ID)
	if err != nil || got.State != task.StateAwaitingApproval {
		t.Fatalf("after the orchestrator's restart: %+v %v", got, err)
	}
	if runs := c.runs(); len(runs) != 0 {
		t.Fatalf("the ledger holds %d runs before the approval", len(runs))
	}

	res := chiffonBinary(t, c.bin, append([]string{"approve", tk.ID, "--note", "maintenance window"}, client...)...)
	if res.code != 0 || !strings.Contains(res.stdout, tk.ID) {
		t.Fatalf("chiffon approve: exit %d %s%s", res.code, res.stdout, res.stderr)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("submit --wait: %v\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		_ = wait.Process.Kill()
		t.Fatalf("submit --wait did not end:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "awaiting approval") || !strings.Contains(stderr.String(), "chiffon approve "+tk.ID) {
		t.Fatalf("submit --wait did not say it waits for approval:\n%s", stderr.String())
	}
	if runs := c.runs(); len(runs) != 1 || runs[tk.RequestID] != 1 {
		t.Fatalf("the ledger after the approval: %v, want %s once", runs, tk.RequestID)
	}
	shown := chiffonBinary(t, c.bin, append([]string{"task", tk.ID}, client...)...)
	for _, want := range []string{"approved by api", "maintenance window", "History:", "submitted"} {
		if !strings.Contains(shown.stdout, want) {
			t.Fatalf("chiffon task lacks %q:\n%s", want, shown.stdout)
		}
	}

	other, err := c.client.Submit(fleetCtx(t), api.SubmitRequest{ToAgent: "code", WorkType: "count",
		Parameters: map[string]any{"n": 2}})
	if err != nil {
		t.Fatal(err)
	}
	res = chiffonBinary(t, c.bin, append([]string{"reject", other.ID, "--note", "not today"}, client...)...)
	if res.code != 0 || !strings.Contains(res.stdout, "rejected") {
		t.Fatalf("chiffon reject: exit %d %s%s", res.code, res.stdout, res.stderr)
	}
	if runs := c.runs(); len(runs) != 1 {
		t.Fatalf("the ledger after the rejection: %v", runs)
	}
	t.Logf("chiffon task %s:\n%s", tk.ID, shown.stdout)
}
