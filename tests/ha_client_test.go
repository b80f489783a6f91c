package tests

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// The leader SIGKILLed while `chiffon submit --wait` follows a task through it:
// the CLI, given both orchestrators' URLs, follows the task onto the new leader
// and exits with the task's own exit code, not with a lost connection.
func TestHAClientFollowsTheTakeover(t *testing.T) {
	s := newHASite(t, 2, 1, haLease)
	lead, standby := s.startGroup()
	gate := filepath.Join(t.TempDir(), "gate")
	servers := "http://" + s.orchs[lead].addr + ",http://" + s.orchs[standby].addr
	cli := exec.Command(s.bin, "submit", "--to", "code", "--work-type", "gated",
		"--param", "gate="+gate, "--param", "code=3", "--wait",
		"--server", servers, "--api-token-file", s.secret("api.token"))
	var stdout, stderr bytes.Buffer
	cli.Stdout, cli.Stderr = &stdout, &stderr
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cli.Wait() }()
	t.Cleanup(func() {
		_ = cli.Process.Kill()
		if t.Failed() {
			t.Logf("submit --wait's stdout: %s\nstderr: %s", stdout.String(), stderr.String())
		}
	})

	var id string
	s.waitFor("the task running", time.Minute, func() bool {
		ts, err := s.orchs[lead].client.List(t.Context(), api.ListOptions{})
		if err != nil || len(ts) != 1 || ts[0].State != task.StateRunning {
			return false
		}
		id = ts[0].ID
		return true
	})
	s.orchs[lead].p.kill(t)
	if got := s.leader(30 * time.Second); got != standby {
		t.Fatalf("orchestrator %d leads after the kill, want the standby", got)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("submit --wait ended with %v, want the task's exit code 3\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("submit --wait did not end after the takeover\nstderr: %s", stderr.String())
	}
	if !strings.Contains(stdout.String(), "done") || !strings.Contains(stderr.String(), id) {
		t.Fatalf("the CLI did not show the task %s to its end\nstdout: %s\nstderr: %s", id, stdout.String(), stderr.String())
	}
}
