package tests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestAgentFirstSIGTERMDrainsSecondStopsAtOnce runs the built binary: the first SIGTERM
// makes the agent drain (it reports draining and keeps its running task), the second
// cancels the task at once, which ends `cancelled`, and the agent exits.
func TestAgentFirstSIGTERMDrainsSecondStopsAtOnce(t *testing.T) {
	c := newCluster(t, 1)
	id := c.agentIDs[0]
	// A drain timeout far past the test's deadlines: only the second signal can end it.
	cfgPath := filepath.Join(c.dir, id+".yaml")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	c.write(id+".yaml", strings.Replace(string(cfg), "drain_timeout: 5s", "drain_timeout: 10m", 1))
	c.start()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tsk, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "hang",
		Parameters: map[string]any{"seconds": 600}, Hints: &task.Hints{MaxDurationSeconds: 900}})
	if err != nil {
		t.Fatal(err)
	}
	state := func() task.State {
		got, err := c.client.Get(ctx, tsk.ID)
		if err != nil {
			return ""
		}
		return got.State
	}
	c.waitFor("task running", 30*time.Second, func() bool { return state() == task.StateRunning })

	agentProc := c.agents[id]
	_ = agentProc.cmd.Process.Signal(syscall.SIGTERM)
	c.waitFor("agent draining", 30*time.Second, func() bool {
		as, err := c.client.Agents(ctx)
		for _, a := range as {
			if err == nil && a.ID == id && a.Status == "draining" {
				return true
			}
		}
		return false
	})
	if !agentProc.alive() || state() != task.StateRunning {
		t.Fatalf("after one SIGTERM: agent alive %v, task %s; want a draining agent still running it", agentProc.alive(), state())
	}

	_ = agentProc.cmd.Process.Signal(syscall.SIGTERM)
	agentProc.wait(t, 30*time.Second)
	c.waitFor("task cancelled", 30*time.Second, func() bool { return state() == task.StateCancelled })
}
