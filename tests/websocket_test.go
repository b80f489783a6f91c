package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestAgentBeyondTheLANRunsATaskOverWebSocket: a site made by `chiffon init
// --websocket`, its broker run by `chiffon broker --config`, an agent whose
// config has only the broker's wss:// URL, and another on nats://: a task pinned
// to each runs end to end.
func TestAgentBeyondTheLANRunsATaskOverWebSocket(t *testing.T) {
	c := newCluster(t, 2)
	wsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	c.initSite([]string{"code=code-1", "code=code-2"}, "--force", "--websocket", wsAddr)
	// code-2 is beyond the LAN: it dials the WebSocket port, with the same NKey and CA.
	path := filepath.Join(c.dir, "code-2.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wss := "wss://" + wsAddr
	cfg := strings.Replace(string(b), "urls: ["+c.natsURL()+"]", "urls: ["+wss+"]", 1)
	if cfg == string(b) {
		t.Fatalf("no NATS URL to replace in %s:\n%s", path, b)
	}
	c.write("code-2.yaml", cfg)

	c.start()
	if log := strings.Join(c.logs()["broker.log"], "\n"); !strings.Contains(log, "url="+wss) {
		t.Fatalf("the broker does not serve %s:\n%s", wss, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, id := range []string{"code-2", "code-1"} {
		tsk, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "count",
			Parameters: map[string]any{"n": i}, Hints: &task.Hints{AgentID: id}})
		if err != nil {
			t.Fatal(err)
		}
		got := c.waitTask(ctx, tsk.ID)
		want := fmt.Sprintf("out %d %s\n", i, tsk.RequestID)
		if out := c.output(ctx, tsk.ID); got.State != task.StateSucceeded || got.AgentID != id || out != want {
			t.Fatalf("task for %s: %s on %s, output %q; want succeeded with %q", id, got.State, got.AgentID, out, want)
		}
	}
	c.assertNoTokenLogged()
}
