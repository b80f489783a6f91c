package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chromedp/chromedp"
)

// stepIs is a JavaScript test that the run graph's box of step is in state,
// and has class too when it is not "".
func stepIs(step, state, class string) string {
	js := `document.getElementById("step-` + step + `").dataset.state === "` + state + `"`
	if class != "" {
		js += ` && document.getElementById("step-` + step + `").classList.contains("` + class + `")`
	}
	return js
}

// A run's page in a browser follows the run without a reload: as the API's
// stream brings each change, a step's box goes from running to succeeded
// (green) and the next from pending to running, a gate that waits gets its
// Approve and Reject; a note typed there stays through a change elsewhere;
// Approve posts the API's approve with the note. The page stops following at
// the run's end, and fits a 390 px screen, the graph scrolling in its box.
func TestBrowserRunPageFollowsTheRunLive(t *testing.T) {
	srv, seen, flows := newFlowServer(t)
	flows.holdEnd = true
	b := newBrowser(t)
	b.signIn(srv.URL+"/", operatorToken)
	b.do("the run's page", chromedp.Navigate(srv.URL+"/workflow-runs/"+runRunningID))
	b.waitJS("the graph", stepIs("test", "running", "running")+" && "+stepIs("approve", "pending", "pending"))
	_ = evalJS[bool](b, `window.sameLoad = true`)

	flows.set(runRunningID, func(r *api.WorkflowRun) {
		now := time.Now().UTC()
		r.Steps[1].State, r.Steps[1].FinishedAt = api.StepSucceeded, &now
		r.Steps[2] = api.StepRun{Name: "approve", State: api.StepRunning, StartedAt: &now,
			Approval: &task.Approval{State: task.ApprovalWaiting, RequestedAt: now, ExpiresAt: now.Add(24 * time.Hour)}}
	})
	b.waitJS("test succeeded and the gate waiting, live", `window.sameLoad && `+stepIs("test", "succeeded", "succeeded")+
		` && `+stepIs("approve", "running", "waiting")+` && document.querySelector("#gate-approve button.approve") !== null`)
	if stroke := evalJS[string](b, `getComputedStyle(document.querySelector("#step-test rect")).stroke`); stroke != "rgb(26, 127, 55)" {
		t.Errorf("the succeeded box is drawn %s, not green", stroke)
	}
	if got := evalJS[string](b, `document.getElementById("run-done").textContent`); got != "2/6 steps done" {
		t.Errorf("the count, live: %q", got)
	}
	b.docShot("workflow-run-1280")

	b.do("a note", chromedp.SendKeys(chromedp.CSS("#gate-approve-note"), "ship it"))
	flows.set(runRunningID, func(r *api.WorkflowRun) { r.Steps[0].Error = "a warning that changes the steps table" })
	b.waitJS("the steps table, live", `document.getElementById("run-steps").textContent.includes("a warning that changes")`)
	if note := evalJS[string](b, `document.getElementById("gate-approve-note").value`); note != "ship it" {
		t.Errorf("the note typed is %q after a change elsewhere", note)
	}

	b.do("approve", chromedp.Click(chromedp.CSS("#gate-approve button.approve")))
	b.waitJS("the page after Approve", `!window.sameLoad && `+stepIs("approve", "succeeded", "")+
		` && document.getElementById("gate-approve") === null`)
	if got := seen.body("POST /api/v1/workflow-runs/" + runRunningID + "/steps/approve/approve"); got != `{"note":"ship it"}` {
		t.Errorf("the API's approve got %q", got)
	}

	_ = evalJS[bool](b, `window.sameLoad = true`)
	flows.set(runRunningID, func(r *api.WorkflowRun) { r.Steps[3].State, r.Steps[3].TaskID = api.StepRunning, stepTaskID })
	b.waitJS("deploy running, live", `window.sameLoad && `+stepIs("deploy", "running", "running")+
		` && document.querySelector('#step-deploy a[href="/tasks/`+stepTaskID+`"]') !== null`)
	flows.set(runRunningID, func(r *api.WorkflowRun) {
		now := time.Now().UTC()
		r.Steps[3].State, r.Steps[5].State = api.StepSucceeded, api.StepSucceeded
		r.Steps[4].State, r.Steps[4].SkipReason = api.StepSkipped, "a condition of its needs does not hold"
		r.State, r.FinishedAt = api.RunSucceeded, &now
	})
	b.waitJS("the run's end, live", `window.sameLoad && document.getElementById("run-live").dataset.final === "true" &&
		document.getElementById("run-state").textContent === "succeeded" && document.getElementById("cancel-run") === null && `+
		stepIs("rollback", "skipped", "skipped"))
	b.shot("workflow-run-done")
	select {
	case id := <-flows.closed:
		if id != runRunningID {
			t.Errorf("the page closed the stream of run %s", id)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("the page did not stop following the run at its end")
	}

	b.do("a phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(srv.URL+"/workflow-runs/"+runGateID))
	b.waitJS("the gate's page", `document.getElementById("gate-approve") !== null`)
	b.docShot("workflow-run-390")
	if w := evalJS[int](b, "document.documentElement.scrollWidth"); w > 390 {
		t.Errorf("on a 390 px screen the run's page is %d px wide", w)
	}
	if !evalJS[bool](b, `(function () { const g = document.querySelector("#run-graph .graph-box"); return g.scrollWidth > g.clientWidth; })()`) {
		t.Errorf("on a 390 px screen the graph does not scroll in its box")
	}
	for _, path := range []string{"workflows", "workflows/release", "workflows/release/run"} {
		b.do(path, chromedp.Navigate(srv.URL+"/"+path))
		b.waitJS(path, `document.readyState === "complete" && document.querySelector("main h1") !== null`)
		b.shot(strings.ReplaceAll(path, "/", "-") + "-390")
		if w := evalJS[int](b, "document.documentElement.scrollWidth"); w > 390 {
			t.Errorf("on a 390 px screen /%s is %d px wide", path, w)
		}
	}
}
