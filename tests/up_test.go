package tests

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/nats-io/nats.go"
)

// upProcess is a `chiffon up` started on free ports in dir with flags: its
// stdout's lines come on lines, closed when it ends.
func upProcess(t *testing.T, dir string, flags ...string) (cmd *exec.Cmd, lines <-chan string, stderr *strings.Builder) {
	t.Helper()
	cmd = exec.Command(chiffonBin, append([]string{"up", "--nats-port", "0", "--http-port", "0"}, flags...)...)
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr = &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return cmd, ch, stderr
}

// startUp runs `chiffon up` on free ports in dir, with more flags, and returns once
// it says it is up, with the lines it printed until then. The process is interrupted
// and waited for when the test ends.
func startUp(t *testing.T, dir string, flags ...string) (stop func() result, printed []string) {
	t.Helper()
	cmd, lines, stderr := upProcess(t, dir, flags...)
	deadline := time.After(30 * time.Second)
	for up := false; !up; {
		select {
		case l, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("chiffon up exited early:\n%s\n%s", strings.Join(printed, "\n"), stderr.String())
			}
			printed = append(printed, l)
			up = strings.HasPrefix(l, "Press Ctrl-C")
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("chiffon up not up after 30s:\n%s", strings.Join(printed, "\n"))
		}
	}
	stopped := false
	stop = func() result {
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGINT)
		var rest []string
		for l := range lines {
			rest = append(rest, l)
		}
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return result{code: code, stdout: strings.Join(append(printed, rest...), "\n"), stderr: stderr.String()}
	}
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})
	return stop, printed
}

func TestUpServesTheCLI(t *testing.T) {
	dir := t.TempDir()
	stop, printed := startUp(t, dir)
	assertNoAnonymousNATS(t, printed, filepath.Join(dir, "chiffon-data", "secrets", "ca.pem"))
	// Client commands run where `up` keeps chiffon-data find the API with no flags.
	cli := func(args ...string) result { return chiffonIn(t, dir, nil, "", args...) }

	got := cli("submit", "--to", "code", "--work-type", "echo", "--param", "message=hello homelab", "--wait")
	if got.code != 0 || got.stdout != "hello homelab" {
		t.Fatalf("submit --wait: exit %d, stdout %q, stderr %s", got.code, got.stdout, got.stderr)
	}
	id := regexp.MustCompile(`task ([0-9a-f-]{36})`).FindStringSubmatch(got.stderr)
	if id == nil || !strings.Contains(got.stderr, "succeeded (exit 0)") {
		t.Fatalf("submit --wait did not report the task: %s", got.stderr)
	}

	if got := cli("tasks"); got.code != 0 || !strings.Contains(got.stdout, id[1][28:]) /* its short id */ || !strings.Contains(got.stdout, "succeeded") {
		t.Fatalf("tasks: exit %d:\n%s%s", got.code, got.stdout, got.stderr)
	}
	if got := cli("tasks", "--state", "failed", "--json"); got.code != 0 || strings.TrimSpace(got.stdout) != "[]" {
		t.Fatalf("tasks --state failed --json: exit %d: %q", got.code, got.stdout)
	}
	if got := cli("task", id[1]); got.code != 0 || !regexp.MustCompile(`State:\s+succeeded`).MatchString(got.stdout) {
		t.Fatalf("task: exit %d:\n%s%s", got.code, got.stdout, got.stderr)
	}
	if got := cli("output", id[1]); got.code != 0 || got.stdout != "hello homelab" {
		t.Fatalf("output: exit %d, %q", got.code, got.stdout)
	}
	if got := cli("task", "00000000-0000-0000-0000-000000000000"); got.code == 0 {
		t.Fatalf("task of an unknown id: exit 0")
	}

	sleeper := cli("submit", "--to", "infra", "--work-type", "sleep", "--param", "seconds:=300")
	sleepID := strings.TrimSpace(sleeper.stdout)
	if sleeper.code != 0 || len(sleepID) != 36 {
		t.Fatalf("submit sleep: exit %d, %q %s", sleeper.code, sleeper.stdout, sleeper.stderr)
	}
	waitForState(t, cli, sleepID, "running")
	if got := cli("cancel", sleepID); got.code != 0 || !strings.Contains(got.stdout, sleepID) {
		t.Fatalf("cancel: exit %d: %s%s", got.code, got.stdout, got.stderr)
	}
	if got := cli("watch", sleepID); got.code != 130 || !strings.Contains(got.stderr, "cancelled") {
		t.Fatalf("watch of a cancelled task: exit %d, want 130: %s", got.code, got.stderr)
	}

	agents := cli("agents", "--json")
	var list []struct{ ID, Type, State string }
	if err := json.Unmarshal([]byte(agents.stdout), &list); err != nil || agents.code != 0 {
		t.Fatalf("agents --json: exit %d, %v: %s", agents.code, err, agents.stdout)
	}
	if len(list) != 4 {
		t.Fatalf("agents: got %d, want 4: %+v", len(list), list)
	}
	for _, a := range list {
		if a.State != "online" {
			t.Errorf("agent %s is %s, want online", a.ID, a.State)
		}
	}
	if got := cli("agents"); got.code != 0 || !strings.Contains(got.stdout, "research-1") {
		t.Fatalf("agents: exit %d:\n%s", got.code, got.stdout)
	}

	end := stop()
	if end.code != 0 || !strings.Contains(end.stdout, "stopped") {
		t.Fatalf("up after SIGINT: exit %d:\n%s\n%s", end.code, end.stdout, end.stderr)
	}
	assertSecretsPrivate(t, filepath.Join(dir, "chiffon-data", "secrets"))
}

// assertNoAnonymousNATS checks that the NATS broker `chiffon up` printed refuses a
// client without an identity, even one that trusts its CA.
func assertNoAnonymousNATS(t *testing.T, printed []string, caFile string) {
	t.Helper()
	var url string
	for _, l := range printed {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "NATS" && f[1] == "broker" {
			url = f[2]
		}
	}
	if url == "" {
		t.Fatalf("up printed no NATS broker URL:\n%s", strings.Join(printed, "\n"))
	}
	tc, err := broker.ClientTLS{CAFile: caFile}.Config()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, nats.Secure(tc), nats.NoReconnect())
	if err == nil {
		nc.Close()
		t.Fatalf("an anonymous client connected to up's broker %s", url)
	}
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("anonymous client to up's broker %s: %v, want an authorization violation", url, err)
	}
}

// waitForState polls `chiffon task --json` until the task reaches state.
func waitForState(t *testing.T, cli func(...string) result, id, state string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := cli("task", id, "--json")
		var task struct{ State string }
		_ = json.Unmarshal([]byte(got.stdout), &task)
		if task.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %q after 20s, want %s", id, task.State, state)
		}
		time.Sleep(50 * time.Millisecond) // polling a separate process; nothing to wait on
	}
}

// assertSecretsPrivate checks that the secrets dir and every secret in it (tokens,
// NKey seeds, private keys) are for their owner only; certificates may be read by
// anyone.
func assertSecretsPrivate(t *testing.T, dir string) {
	t.Helper()
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o700 {
		t.Errorf("%s has mode %v, want 0700", dir, info.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	secrets := 0
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		name, perm := e.Name(), info.Mode().Perm()
		switch {
		case strings.HasSuffix(name, ".pem") && !strings.HasSuffix(name, "-key.pem"):
			if perm&0o022 != 0 {
				t.Errorf("certificate %s has mode %v: writable by others", name, perm)
			}
		default:
			secrets++
			if perm != 0o600 {
				t.Errorf("%s has mode %v, want 0600", name, perm)
			}
		}
	}
	if secrets == 0 {
		t.Errorf("no secret in %s", dir)
	}
}
