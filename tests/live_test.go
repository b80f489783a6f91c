package tests

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// liveWorkTypes are the work types of the operator's daily loop: one that prints
// a line, waits for the gate file the test creates and prints another; one whose
// output ends without a newline; one that needs an operator's yes.
const liveWorkTypes = `  twolines:
    shell: |
      echo first
      while [ ! -e "$GATE_FILE" ]; do sleep 0.05; done
      echo second
    env: [PATH]
    set_env: {GATE_FILE: %GATE%}
  partial:
    shell: printf 'a\nno newline'
    env: [PATH]
  needsyes:
    command: ["true"]
`

// TestOperatorsDailyLoop runs the CLI against a cluster as an operator does:
// submit --wait prints a task's output as it comes, exactly, and its summary on a
// line of its own; cancel prints the state the task ends in; submit says when a
// task waits for approval.
func TestOperatorsDailyLoop(t *testing.T) {
	c := newCluster(t, 1)
	gate := filepath.Join(c.dir, "gate")
	c.extraWorkTypes = strings.ReplaceAll(liveWorkTypes, "%GATE%", gate)
	c.orchExtra = "work_types: {needsyes: {approval: required}}"
	c.writeOrchConfig()
	for _, id := range c.agentIDs {
		c.writeAgentConfig(id)
	}
	c.start()
	clientArgs := []string{"--server", "http://" + c.httpAddr, "--api-token-file", c.secret("api.token")}

	t.Run("submit --wait prints output as it comes", func(t *testing.T) { liveOutputBeforeTheEnd(t, c, gate, clientArgs) })
	t.Run("a last line without newline", func(t *testing.T) { summaryOnItsOwnLine(t, c, clientArgs) })
	t.Run("cancel prints the state reached", func(t *testing.T) { cancelPrintsTheEnd(t, c, clientArgs) })
	t.Run("submit says it waits for approval", func(t *testing.T) {
		res := chiffonBinary(t, c.bin, append([]string{"submit", "--to", "code", "--work-type", "needsyes"}, clientArgs...)...)
		id := strings.TrimSpace(res.stdout)
		if res.code != 0 || !strings.Contains(res.stderr, "task "+id+" is waiting for approval (") ||
			!strings.Contains(res.stderr, "chiffon approve "+id) {
			t.Fatalf("exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
		}
	})
}

// liveOutputBeforeTheEnd: the first line reaches the CLI's stdout (a pipe) while
// the task still waits for the gate, which the test creates only after reading it.
func liveOutputBeforeTheEnd(t *testing.T, c *cluster, gate string, clientArgs []string) {
	// However it fails, the task ends and frees its agent's slot.
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o600) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"submit", "--to", "code", "--work-type", "twolines", "--wait"}, clientArgs...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l := <-lines:
		if l != "first" {
			t.Fatalf("the first line of output is %q", l)
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		for range lines {
		}
		_ = cmd.Wait()
		t.Fatalf("no output while the task runs:\n%s", stderr.String())
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	<-readDone
	if err := cmd.Wait(); err != nil {
		t.Fatalf("submit --wait: %v\n%s", err, stderr.String())
	}
	if strings.Join(rest, "\n") != "second" {
		t.Fatalf("output after the gate: %q (want only \"second\", once)\n%s", rest, stderr.String())
	}
}

// summaryOnItsOwnLine: stdout and stderr into one pipe (2>&1), an output that
// ends without a newline is followed by the summary on a line of its own.
func summaryOnItsOwnLine(t *testing.T, c *cluster, clientArgs []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"submit", "--to", "code", "--work-type", "partial", "--wait"}, clientArgs...)...)
	var both bytes.Buffer
	cmd.Stdout, cmd.Stderr = &both, &both
	if err := cmd.Run(); err != nil {
		t.Fatalf("submit --wait: %v\n%s", err, both.String())
	}
	lines := strings.Split(both.String(), "\n")
	for i, l := range lines {
		if l == "no newline" && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "task ") &&
			strings.Contains(lines[i+1], " succeeded") && strings.Contains(both.String(), "\na\n") {
			return
		}
	}
	t.Fatalf("the summary does not follow the output on a line of its own:\n%q", both.String())
}

// cancelPrintsTheEnd: chiffon cancel of running tasks prints each one's final
// state, cancelled, not the running it had when the cancel was accepted.
func cancelPrintsTheEnd(t *testing.T, c *cluster, clientArgs []string) {
	var ids []string
	for range 4 {
		res := chiffonBinary(t, c.bin, append([]string{"submit", "--to", "code", "--work-type", "hang", "--param", "seconds=60"}, clientArgs...)...)
		if res.code != 0 {
			t.Fatalf("submit: exit %d %s", res.code, res.stderr)
		}
		ids = append(ids, strings.TrimSpace(res.stdout))
	}
	for _, id := range ids {
		c.waitFor("task "+id+" running", 30*time.Second, func() bool {
			tk, err := c.client.Get(fleetCtx(t), id)
			return err == nil && tk.State == task.StateRunning
		})
	}
	for _, id := range ids {
		res := chiffonBinary(t, c.bin, append([]string{"cancel", id}, clientArgs...)...)
		if res.code != 0 || strings.TrimSpace(res.stdout) != "task "+id+" cancelled" {
			t.Fatalf("chiffon cancel: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
		}
	}
}
