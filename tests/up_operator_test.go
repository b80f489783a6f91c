package tests

import (
	"encoding/json"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// TestUpOperatorRunsTasksAndAHostJoins runs `chiffon up --operator --host
// 0.0.0.0`: the data dir is made in NATS operator mode (a .creds per daemon, the
// broker's resolver in the data dir, format 3), up prints how to add a host, a
// task runs on its own agents, `chiffon enroll` in the data dir prints a join
// line for other hosts (this host's address over https, not loopback), a host
// joins with it, and the joined agent runs a task.
func TestUpOperatorRunsTasksAndAHostJoins(t *testing.T) {
	dir := t.TempDir()
	_, printed := startUp(t, dir, "--operator", "--host", "0.0.0.0")
	data := filepath.Join(dir, "chiffon-data")
	cli := func(args ...string) result { return chiffonIn(t, dir, nil, "", args...) }
	assertOperatorDataDir(t, data)
	if !strings.Contains(strings.Join(printed, "\n"), "chiffon enroll --type code --id <new-agent-id> --data-dir "+data) {
		t.Errorf("up --operator printed no chiffon enroll line:\n%s", strings.Join(printed, "\n"))
	}
	if got := cli("submit", "--to", "code", "--work-type", "echo", "--param", "message=own agent", "--wait"); got.code != 0 || got.stdout != "own agent" {
		t.Fatalf("submit to up's own agent: exit %d, %q %s", got.code, got.stdout, got.stderr)
	}

	got := cli("enroll", "--type", "code", "--id", "lan-1")
	join := joinLine(got.stdout)
	if got.code != 0 || join == nil {
		t.Fatalf("chiffon enroll in the data dir: exit %d, no join line: %s%s", got.code, got.stdout, got.stderr)
	}
	u, err := url.Parse(flagValue(join, "--orchestrator"))
	if err != nil || u.Scheme != "https" {
		t.Fatalf("the join line names %q, want an https URL", flagValue(join, "--orchestrator"))
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) {
		t.Fatalf("the join line names %s, which no other host reaches", u)
	}
	host := filepath.Join(dir, "lan-host")
	if got := chiffon(t, nil, "", append(append(join[1:len(join)-1:len(join)-1], "--dir", host), join[len(join)-1])...); got.code != 0 {
		t.Fatalf("chiffon %s: exit %d: %s%s", strings.Join(join[1:], " "), got.code, got.stdout, got.stderr)
	}
	assertReachableNATS(t, filepath.Join(host, "agent.yaml"))
	startJoinedAgent(t, filepath.Join(host, "agent.yaml"))
	waitAgentOnline(t, cli, "lan-1")
	got = cli("submit", "--to", "code", "--work-type", "echo", "--param", "message=joined", "--hint", "agent_id=lan-1", "--wait")
	id := regexp.MustCompile(`task ([0-9a-f-]{36})`).FindStringSubmatch(got.stderr)
	if got.code != 0 || got.stdout != "joined" || id == nil {
		t.Fatalf("a task on the joined agent: exit %d, %q %s", got.code, got.stdout, got.stderr)
	}
	var tsk struct {
		AgentID string `json:"agent_id"`
	}
	if got := cli("task", id[1], "--json"); json.Unmarshal([]byte(got.stdout), &tsk) != nil || tsk.AgentID != "lan-1" {
		t.Fatalf("the task ran on %q, want lan-1: %s%s", tsk.AgentID, got.stdout, got.stderr)
	}
}

// TestUpNeverConvertsADataDir: a data dir of NKey users started with
// --operator is refused, saying its mode, and left as it was; an operator-mode
// one started without --operator keeps its mode and says so, and with
// --operator=false is refused.
func TestUpNeverConvertsADataDir(t *testing.T) {
	dir := t.TempDir()
	stop, _ := startUp(t, dir)
	stop()
	data := filepath.Join(dir, "chiffon-data")
	got := refusedUp(t, dir, "--operator")
	if got.code == 0 || !strings.Contains(got.stderr, "was made with NKey users, not in NATS operator mode") {
		t.Fatalf("up --operator on an NKey data dir: exit %d: %s%s", got.code, got.stdout, got.stderr)
	}
	if format, err := os.ReadFile(filepath.Join(data, "format")); err != nil || string(format) != "2\n" {
		t.Errorf("the refused data dir's format: %q, %v; want 2", format, err)
	}
	if _, err := os.Stat(filepath.Join(data, "secrets", "operator.jwt")); !os.IsNotExist(err) {
		t.Errorf("the refused start made operator files: %v", err)
	}

	op := t.TempDir()
	stop, _ = startUp(t, op, "--operator")
	stop()
	stop, printed := startUp(t, op)
	if !strings.Contains(strings.Join(printed, "\n"), "NATS operator mode (the data dir was made so)") {
		t.Errorf("up without --operator on an operator data dir did not say it keeps the mode:\n%s", strings.Join(printed, "\n"))
	}
	if got := chiffonIn(t, op, nil, "", "submit", "--to", "code", "--work-type", "echo", "--param", "message=kept", "--wait"); got.code != 0 || got.stdout != "kept" {
		t.Errorf("a task after a restart without --operator: exit %d, %q %s", got.code, got.stdout, got.stderr)
	}
	stop()
	assertOperatorDataDir(t, filepath.Join(op, "chiffon-data"))
	got = refusedUp(t, op, "--operator=false")
	if got.code == 0 || !strings.Contains(got.stderr, "was made in NATS operator mode") {
		t.Fatalf("up --operator=false on an operator data dir: exit %d: %s%s", got.code, got.stdout, got.stderr)
	}
}

// refusedUp runs `chiffon up` on free ports in dir with flags, expecting it
// to refuse to start, and returns how it exited. One that comes up is
// interrupted at once, and the test fails.
func refusedUp(t *testing.T, dir string, flags ...string) result {
	t.Helper()
	cmd, lines, stderr := upProcess(t, dir, flags...)
	var printed []string
	deadline := time.After(30 * time.Second)
	for ended := false; !ended; {
		select {
		case l, ok := <-lines:
			if !ok {
				ended = true
				continue
			}
			printed = append(printed, l)
			if strings.HasPrefix(l, "Press Ctrl-C") {
				_ = cmd.Process.Signal(os.Interrupt)
				_ = cmd.Wait()
				t.Fatalf("chiffon up %s started instead of refusing:\n%s", strings.Join(flags, " "), strings.Join(printed, "\n"))
			}
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("chiffon up %s neither refused nor started within 30s:\n%s", strings.Join(flags, " "), strings.Join(printed, "\n"))
		}
	}
	code := 0
	if ee, ok := cmd.Wait().(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return result{code: code, stdout: strings.Join(printed, "\n"), stderr: stderr.String()}
}

// assertOperatorDataDir checks that data was made in operator mode: format 3,
// a .creds and no NKey seed per daemon, and the broker's config trusting the
// operator with its resolver dir in the data dir.
func assertOperatorDataDir(t *testing.T, data string) {
	t.Helper()
	if format, err := os.ReadFile(filepath.Join(data, "format")); err != nil || string(format) != "3\n" {
		t.Errorf("format file: %q, %v; want 3", format, err)
	}
	for _, name := range []string{"orchestrator.creds", "agent-code-1.creds"} {
		if _, err := os.Stat(filepath.Join(data, "secrets", name)); err != nil {
			t.Errorf("no %s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "secrets", "orchestrator.nk")); !os.IsNotExist(err) {
		t.Errorf("an operator-mode data dir has an NKey seed for the orchestrator: %v", err)
	}
	conf, err := os.ReadFile(filepath.Join(data, "broker.conf"))
	if err != nil || !strings.Contains(string(conf), "resolver {") || !strings.Contains(string(conf), filepath.Join("chiffon-data", "broker", "jwt")) {
		t.Errorf("broker.conf is not in operator mode with its resolver in the data dir (%v):\n%s", err, conf)
	}
}

// assertReachableNATS checks that the agent config at path names the broker
// at an address another host reaches: not the wildcard up listens on, nor
// loopback.
func assertReachableNATS(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		NATS struct {
			URLs []string `yaml:"urls"`
		} `yaml:"nats"`
	}
	if err := yaml.Unmarshal(b, &conf); err != nil || len(conf.NATS.URLs) == 0 {
		t.Fatalf("%s: no nats.urls (%v)", path, err)
	}
	for _, raw := range conf.NATS.URLs {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if ip := net.ParseIP(u.Hostname()); ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) {
			t.Errorf("the joined host was given the broker at %s, which no other host reaches", raw)
		}
	}
}

// joinLine is the fields of the `chiffon agent join` line of enroll's output.
func joinLine(out string) []string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[0] == "chiffon" && f[1] == "agent" && f[2] == "join" {
			return f
		}
	}
	return nil
}

// startJoinedAgent runs `chiffon agent --config config` until the test ends.
func startJoinedAgent(t *testing.T, config string) {
	t.Helper()
	cmd := exec.Command(chiffonBin, "agent", "--config", config)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("the joined agent did not stop within 30s of SIGINT")
		}
		if t.Failed() {
			t.Logf("joined agent's output:\n%s", logs.String())
		}
	})
}

// waitAgentOnline polls `chiffon agents --json` until agent id is online.
func waitAgentOnline(t *testing.T, cli func(...string) result, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var list []struct{ ID, State string }
		_ = json.Unmarshal([]byte(cli("agents", "--json").stdout), &list)
		for _, a := range list {
			if a.ID == id && a.State == "online" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s not online after 30s: %+v", id, list)
		}
		time.Sleep(50 * time.Millisecond) // polling a separate process; nothing to wait on
	}
}
