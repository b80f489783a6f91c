package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// previousRelease is the commit of the release before this one, the first to
// keep one release of skew (docs/operations.md, "Rolling upgrades"): the
// orchestrator of either release works with the agents of the other. A
// release that changes what the daemons say to each other moves it on.
const previousRelease = "7d92213448f235d4eda9ef7510d5a20b83fcfeca"

var (
	previousOnce sync.Once
	previousBin  string
	previousErr  error
)

// previousBinary builds chiffon at previousRelease, from the repository's own
// history, once. A checkout without that history skips the test, unless
// CHIFFON_REQUIRE_SKEW is set (.ci/run sets it on a full clone).
func previousBinary(t *testing.T) string {
	t.Helper()
	if err := exec.Command("git", "-C", "..", "cat-file", "-e", previousRelease+"^{commit}").Run(); err != nil {
		if os.Getenv("CHIFFON_REQUIRE_SKEW") != "" {
			t.Fatalf("commit %s of the previous release is not in this checkout's history: %v", previousRelease, err)
		}
		t.Skipf("commit %s of the previous release is not in this checkout's history (a shallow clone?)", previousRelease)
	}
	previousOnce.Do(func() {
		src := filepath.Join(filepath.Dir(chiffonBin), "previous-src")
		previousBin = filepath.Join(filepath.Dir(chiffonBin), "chiffon-previous")
		script := fmt.Sprintf("mkdir -p %q && git -C .. archive %s | tar -x -C %q && cd %q && go build -o %q ./cmd/chiffon",
			src, previousRelease, src, src, previousBin)
		if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
			previousErr = fmt.Errorf("build chiffon at %s: %v\n%s", previousRelease, err, out)
		}
	})
	if previousErr != nil {
		t.Fatal(previousErr)
	}
	return previousBin
}

// runCount submits task n of the count work type and waits for its end; it
// must succeed.
func (c *cluster) runCount(n int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tk, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "count", Parameters: map[string]any{"n": n}})
	if err != nil {
		c.t.Fatalf("submit task %d: %v", n, err)
	}
	c.waitFor(fmt.Sprintf("task %d to end", n), time.Minute, func() bool {
		got, err := c.client.Get(ctx, tk.ID)
		if err == nil && got.State.Final() {
			tk = got
			return true
		}
		return false
	})
	if tk.State != task.StateSucceeded {
		c.t.Fatalf("task %d ended %s: %+v", n, tk.State, tk.Error)
	}
	var out strings.Builder
	if _, err := c.client.Output(ctx, tk.ID, &out); err != nil || out.String() != fmt.Sprintf("out %d %s\n", n, tk.RequestID) {
		c.t.Fatalf("task %d output %q, %v", n, out.String(), err)
	}
}

// TestOneReleaseOfSkew: an orchestrator and an agent one release apart, each
// way round, run tasks, also after either restarts: the rolling upgrade
// docs/operations.md describes.
func TestOneReleaseOfSkew(t *testing.T) {
	prev := previousBinary(t)
	c := newCluster(t, 1)
	c.bin = chiffonBin // the production builds on both sides
	c.startBroker()
	n := 0
	run := func(what string) {
		t.Helper()
		n++
		c.runCount(n)
		t.Logf("task %d succeeded: %s", n, what)
	}
	startOrch := func(bin string) {
		c.bin = bin
		c.startOrchestrator()
	}
	startAgent := func(bin string) {
		c.bin = bin
		c.startAgent("code-1")
	}
	stop := func(p *proc) { p.stop(t) }

	// This release's orchestrator, the previous release's agent.
	startOrch(chiffonBin)
	startAgent(prev)
	run("new orchestrator, previous agent")
	stop(c.orch)
	startOrch(chiffonBin)
	run("after the new orchestrator restarted")
	stop(c.agents["code-1"])
	startAgent(prev)
	run("after the previous agent restarted")

	// The previous release's orchestrator, this release's agent: a rollback of
	// the orchestrator, or agents upgraded first.
	stop(c.orch)
	startOrch(prev)
	stop(c.agents["code-1"])
	startAgent(chiffonBin)
	run("previous orchestrator, new agent")
	stop(c.orch)
	startOrch(prev)
	run("after the previous orchestrator restarted")
	stop(c.agents["code-1"])
	startAgent(chiffonBin)
	run("after the new agent restarted")
}
