package tests

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestOperatorSiteRunsATask runs a task end to end on a site that `chiffon init
// --operator` wrote: the broker in NATS operator mode from its broker.conf, the
// orchestrator and the agent each with its .creds.
func TestOperatorSiteRunsATask(t *testing.T) {
	c := newSiteCluster(t, 1, true)
	if conf, err := os.ReadFile(c.brokerConf()); err != nil || !strings.Contains(string(conf), "resolver {") {
		t.Fatal("broker.conf is not in operator mode")
	}
	c.startBroker()
	c.startOrchestrator()
	c.startAgent("code-1")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tsk, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "count", Parameters: map[string]any{"n": 3}})
	if err != nil {
		t.Fatal(err)
	}
	got := c.waitTask(ctx, tsk.ID)
	want := fmt.Sprintf("out 3 %s\n", tsk.RequestID)
	if out := c.output(ctx, tsk.ID); got.State != task.StateSucceeded || out != want {
		t.Fatalf("task on an operator-mode site: %s, output %q; want succeeded with %q", got.State, out, want)
	}
	c.assertNoTokenLogged()
}
