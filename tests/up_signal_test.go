package tests

import (
	"bufio"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUpSecondInterruptCancelsRunningWork: the first Ctrl-C lets the agents drain (a
// running task keeps `up` alive), the second cancels the task at once, and the task is
// recorded as cancelled.
func TestUpSecondInterruptCancelsRunningWork(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(chiffonBin, "up", "--nats-port", "0", "--http-port", "0")
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	waitLine := func(prefix string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("up exited before printing %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return
				}
			case <-deadline:
				t.Fatalf("up did not print %q within 30s", prefix)
			}
		}
	}
	waitLine("Press Ctrl-C")
	cli := func(args ...string) result { return chiffonIn(t, dir, nil, "", args...) }
	sub := cli("submit", "--to", "infra", "--work-type", "sleep", "--param", "seconds:=300")
	id := strings.TrimSpace(sub.stdout)
	if sub.code != 0 {
		t.Fatalf("submit: %s", sub.stderr)
	}
	waitForState(t, cli, id, "running")

	_ = cmd.Process.Signal(syscall.SIGINT)
	waitLine("stopping: agents drain")
	// The agents drain for up to 60s, their default drain timeout: only the second
	// Ctrl-C can end `up` within the 30s allowed below.
	select {
	case err := <-exited:
		t.Fatalf("up exited on the first Ctrl-C (%v) while its task ran", err)
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("up exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("up still running 30s after a second Ctrl-C")
	}

	// The cancelled result was recorded before the stores closed.
	stop, _ := startUp(t, dir)
	if got := cli("task", id, "--json"); !strings.Contains(got.stdout, `"state": "cancelled"`) {
		t.Fatalf("task after the restart: %s", got.stdout)
	}
	stop()
}
