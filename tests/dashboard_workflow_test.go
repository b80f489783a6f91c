package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chromedp/chromedp"
)

// stepState is a JS expression: step name's state as its box in the run
// graph shows it.
func stepState(name string) string {
	return fmt.Sprintf(`(document.querySelector("#step-%s") || {dataset: {}}).dataset.state`, name)
}

// A run's page on a real orchestrator: the gate's box waits with its Approve
// button; the operator approves it on the page; from the page that comes
// back, the graph follows the run without a reload: produce's box goes from
// running to succeeded and consume's to succeeded as the agent runs them.
func TestDashboardRunGraphFollowsARealRun(t *testing.T) {
	chromiumPath(t)
	c, _ := newWorkflowCluster(t, 1, fmt.Sprintf(gateWorkflow, "4"))
	c.start()
	d := openDash(t, "http://"+c.httpAddr+"/", c.secretsDir())
	d.login(d.token("api.token"))
	ctx := context.Background()
	r, err := d.client.StartRun(ctx, "gated", api.WorkflowRunRequest{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor("the gate to wait", 30*time.Second, func() bool {
		got, err := d.client.Run(ctx, r.ID)
		return err == nil && got.Step("approve").State == api.StepRunning
	})
	d.do("the run's page", chromedp.Navigate(d.base+"workflow-runs/"+r.ID), chromedp.WaitVisible(chromedp.CSS("#step-approve")))
	if got := eval[string](d, stepState("produce")); got != "pending" {
		t.Fatalf("produce's box shows %q before the approval, want pending", got)
	}
	// The gate's form posts and the page comes back; from then on it follows
	// the run without a reload.
	d.do("approve the gate", chromedp.Click(chromedp.CSS("#gate-approve button.approve")))
	d.waitJS("the page back, produce running", stepState("produce")+` === "running"`, 30*time.Second)
	_ = eval[bool](d, `window.sameLoad = true`)
	d.shot("workflow-run-live")
	d.waitJS("produce succeeded, consume and the run's end, live", `window.sameLoad && `+stepState("produce")+` === "succeeded" && `+
		stepState("consume")+` === "succeeded"`, 60*time.Second)
	end := waitRunEnd(t, d.client, r.ID, 30*time.Second)
	if end.State != api.RunSucceeded || end.Step("approve").Approval.By == "" {
		t.Fatalf("run %s, gate %+v", end.State, end.Step("approve").Approval)
	}
}
