package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
)

// A batch's output in the CLI, batch retry and the register grace, across real
// processes: a broker, an orchestrator and three agents, each with work types
// that say which agent ran them.

// batchWork is the YAML of agent id's work types: say prints two lines and a
// partial third, each naming the agent; flaky appends a line to the agent's own
// run log, says where it ran, and fails while the file fail-<id> exists.
func batchWork(c *cluster, id string) string {
	return fmt.Sprintf(`  say:
    shell: 'printf "one %%s\ntwo %%s\npartial-%%s" "$WHO" "$WHO" "$WHO"'
    env: [PATH]
    set_env: {WHO: %[1]s}
  flaky:
    shell: 'echo run >> "$RUN_LOG"; echo "ran on $WHO"; if [ -e "$FAIL_FILE" ]; then exit 3; fi'
    env: [PATH]
    set_env: {WHO: %[1]s, RUN_LOG: %[2]s, FAIL_FILE: %[3]s}
`, id, c.runLog(id), filepath.Join(c.dir, "fail-"+id))
}

// runLog is agent id's run log of the flaky work type.
func (c *cluster) runLog(id string) string { return filepath.Join(c.dir, "runs-"+id+".log") }

// newBatchCluster is a cluster of three code agents with batchWork, started
// with its agents unless withAgents is false.
func newBatchCluster(t *testing.T, withAgents bool) *cluster {
	c := newCluster(t, 3)
	for _, id := range c.agentIDs {
		c.writeAgentConfigAs(id+".yaml", id, c.agentType, batchWork(c, id))
	}
	if withAgents {
		c.start()
	} else {
		c.startBroker()
		c.startOrchestrator()
	}
	return c
}

// cli runs the cluster's chiffon binary against its API.
func (c *cluster) cli(args ...string) result {
	c.t.Helper()
	return chiffonBinary(c.t, c.bin, append(args, "--server", "http://"+c.httpAddr, "--api-token-file", c.secret("api.token"))...)
}

// sayLines checks that stdout holds, for each agent of c, its say lines, in
// order, each once and prefixed with its id, and no other line.
func (c *cluster) sayLines(stdout string) {
	c.t.Helper()
	got := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		id, _, ok := strings.Cut(l, ": ")
		if !ok || !slices.Contains(c.agentIDs, id) {
			c.t.Fatalf("a line of no agent %q in:\n%s", l, stdout)
		}
		got[id] = append(got[id], l)
	}
	for _, id := range c.agentIDs {
		want := []string{id + ": one " + id, id + ": two " + id, id + ": partial-" + id}
		if !slices.Equal(got[id], want) {
			c.t.Fatalf("%s's lines %q, want %q; stdout:\n%s", id, got[id], want, stdout)
		}
	}
}

// TestBatchOutputIsPrefixedPerAgent: submit --all --wait prints each agent's
// output as it comes, each line prefixed with the agent's id and whole, then a
// table of the agents; batch ID --wait --group prints them agent by agent.
func TestBatchOutputIsPrefixedPerAgent(t *testing.T) {
	c := newBatchCluster(t, true)
	got := c.cli("submit", "--to", "code", "--work-type", "say", "--all", "--wait")
	if got.code != 0 {
		t.Fatalf("submit --all --wait: exit %d\n%s\n%s", got.code, got.stdout, got.stderr)
	}
	c.sayLines(got.stdout)
	for _, id := range c.agentIDs {
		if !regexp.MustCompile(`(?m)^` + id + `\s+succeeded\s+0\s+\d`).MatchString(got.stderr) {
			t.Fatalf("the table lacks %s succeeded with exit 0:\n%s", id, got.stderr)
		}
	}
	m := regexp.MustCompile(`batch (\S+): 3 agents`).FindStringSubmatch(got.stderr)
	if m == nil {
		t.Fatalf("no batch id in:\n%s", got.stderr)
	}
	t.Logf("submit --all --wait:\n%s\n%s", got.stdout, got.stderr)

	grouped := c.cli("batch", m[1], "--wait", "--group")
	var want strings.Builder
	for _, id := range c.agentIDs {
		fmt.Fprintf(&want, "=== %s (succeeded)\none %s\ntwo %s\npartial-%s\n", id, id, id, id)
	}
	if grouped.code != 0 || grouped.stdout != want.String() {
		t.Fatalf("batch --wait --group: exit %d, stdout\n%s\nwant\n%s\n%s", grouped.code, grouped.stdout, want.String(), grouped.stderr)
	}
}

// TestBatchRetryRerunsOnlyTheFailedAgent: a batch fails on code-2 alone;
// batch retry runs it again there only (each agent's run log counts its runs)
// and, code-2 fixed, succeeds. A batch that succeeded is not retried.
func TestBatchRetryRerunsOnlyTheFailedAgent(t *testing.T) {
	c := newBatchCluster(t, true)
	fail := filepath.Join(c.dir, "fail-code-2")
	if err := os.WriteFile(fail, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	first := c.cli("submit", "--to", "code", "--work-type", "flaky", "--all", "--wait")
	m := regexp.MustCompile(`batch (\S+): 3 agents`).FindStringSubmatch(first.stderr)
	if first.code != 1 || m == nil || !regexp.MustCompile(`(?m)^code-2\s+failed\s+3`).MatchString(first.stderr) {
		t.Fatalf("submit: exit %d, want 1 with code-2 failed (exit 3):\n%s\n%s", first.code, first.stdout, first.stderr)
	}
	if err := os.Remove(fail); err != nil {
		t.Fatal(err)
	}
	retry := c.cli("batch", "retry", m[1], "--wait")
	if retry.code != 0 || retry.stdout != "code-2: ran on code-2\n" {
		t.Fatalf("batch retry --wait: exit %d, stdout %q, want code-2's run alone:\n%s", retry.code, retry.stdout, retry.stderr)
	}
	for id, want := range map[string]int{"code-1": 1, "code-2": 2, "code-3": 1} {
		data, err := os.ReadFile(c.runLog(id))
		if n := strings.Count(string(data), "run\n"); err != nil || n != want {
			t.Fatalf("%s ran %d times (%v), want %d", id, n, err, want)
		}
	}
	again := regexp.MustCompile(`batch (\S+): 1 agent`).FindStringSubmatch(retry.stderr)
	if again == nil {
		t.Fatalf("no batch id in:\n%s", retry.stderr)
	}
	if got := c.cli("batch", "retry", again[1]); got.code != 1 || !strings.Contains(got.stderr, "nothing to retry") {
		t.Fatalf("retry of a batch that succeeded: exit %d: %s", got.code, got.stderr)
	}
}

// TestBatchWaitsForAgentsThatRegisterAfterIt: a batch made before its
// configured agents started lists them registering; they start, register
// within the grace, and each runs its task.
func TestBatchWaitsForAgentsThatRegisterAfterIt(t *testing.T) {
	c := newBatchCluster(t, false)
	b, err := c.client.CreateBatch(fleetCtx(t), api.BatchRequest{ToAgent: "code", WorkType: "say"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"code-1": api.TargetRegistering, "code-2": api.TargetRegistering, "code-3": api.TargetRegistering}
	if got := batchTargets(b); !mapsEqual(got, want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
	for _, id := range c.agentIDs {
		c.startAgent(id)
	}
	got := c.cli("batch", b.ID, "--wait")
	if got.code != 0 {
		t.Fatalf("batch --wait: exit %d\n%s\n%s", got.code, got.stdout, got.stderr)
	}
	c.sayLines(got.stdout)
	if took := c.waitBatchEnd(b.ID, time.Minute); took.State != api.BatchSucceeded {
		t.Fatalf("batch %s", took.State)
	}
}

// TestBatchRightAfterUpSucceeds: the batch of the issue, made as soon as the
// API of chiffon up answers, before its agents are all online, succeeds on
// infra-1 and prints its output. The CLI finds the API from the run of up
// before, on the same port, so it reaches it while up still starts.
func TestBatchRightAfterUpSucceeds(t *testing.T) {
	dir := t.TempDir()
	port := strconv.Itoa(freePort(t))
	stop, _ := startUp(t, dir, "--http-port", port)
	if end := stop(); end.code != 0 {
		t.Fatalf("the first chiffon up: exit %d\n%s", end.code, end.stderr)
	}
	up := exec.Command(chiffonBin, "up", "--nats-port", "0", "--http-port", port)
	up.Dir = dir
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = up.Process.Signal(syscall.SIGINT)
		_ = up.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for chiffonIn(t, dir, nil, "", "batches").code != 0 { // the API answers
		if time.Now().After(deadline) {
			t.Fatal("the API of chiffon up did not answer in 30s")
		}
	}
	got := chiffonIn(t, dir, nil, "", "submit", "--to", "infra", "--work-type", "echo", "--param", "message=hi", "--all", "--wait")
	if got.code != 0 || got.stdout != "infra-1: hi\n" {
		t.Fatalf("submit --all --wait: exit %d, stdout %q\n%s", got.code, got.stdout, got.stderr)
	}
	m := regexp.MustCompile(`batch (\S+): 1 agent`).FindStringSubmatch(got.stderr)
	if m == nil {
		t.Fatalf("no batch id in:\n%s", got.stderr)
	}
	b := chiffonIn(t, dir, nil, "", "batch", m[1], "--json")
	t.Logf("made while infra-1 registered: %v\n%s", strings.Contains(b.stdout, "register_until"), got.stderr)
}
