package ui

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
)

// TestRunPageDrawsEachStepInItsState: a run's page draws each step in its
// state, linked to what it made, with its needs' edges; a skipped step says
// why and a failed one its error; an unknown run is the API's 404.
func TestRunPageDrawsEachStepInItsState(t *testing.T) {
	srv, _, _ := newFlowServer(t)
	c := browserClient(t)
	signIn(t, c, srv.URL+"/", viewerToken)
	resp, page := get(t, c, srv.URL+"/workflow-runs/"+runRunningID)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the run's page: %d\n%s", resp.StatusCode, page)
	}
	for _, want := range []string{"<title>Workflow run · Chiffon</title>", `href="/workflows/release" id="workflow-link"`,
		`data-events="/workflow-runs/` + runRunningID + `/events" data-final="false"`, `<span id="run-done">1/6 steps done</span>`,
		`<g class="node succeeded" id="step-build" data-step="build" data-state="succeeded" transform="translate(10 10)">`,
		`<a href="/tasks/` + stepTaskID + `">`, `<g class="node running" id="step-test"`, `<a href="/batches/` + stepBatchID + `">`,
		`<g class="node pending" id="step-deploy"`, `<text x="10" y="36" class="node-kind">batch · infra/sleep</text>`,
		`<g class="edge always" data-from="deploy" data-to="notify">`, `class="edge-label">always</text>`,
		`<a href="/tasks/` + stepTaskID + `">task bbbbbbb1</a>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the run's page lacks %s", want)
		}
	}
	_, failed := get(t, c, srv.URL+"/workflow-runs/"+runFailedID)
	for _, want := range []string{`data-final="true"`, `<p class="problem" id="run-error">step build failed</p>`,
		"<title>build · task · code/build · failed · exit code 2</title>", `<rect width="176" height="60" rx="8" fill="url(#stripes)"/>`,
		"<title>deploy · task · code/deploy · skipped · step build failed</title>"} {
		if !strings.Contains(failed, want) {
			t.Errorf("the failed run's page lacks %s", want)
		}
	}
	if resp, _ := get(t, c, srv.URL+"/workflow-runs/cccccccc-cccc-4ccc-8ccc-cccccccccccc"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown run's page: %d, want 404", resp.StatusCode)
	}
}

// TestRunPageEscapesNames: a workflow's description, step names and work,
// HTML, are text on its pages and in the run's graph.
func TestRunPageEscapesNames(t *testing.T) {
	srv, _, _ := newFlowServer(t)
	c := browserClient(t)
	signIn(t, c, srv.URL+"/", viewerToken)
	for _, path := range []string{"/workflows/odd", "/workflow-runs/" + runOddID} {
		_, page := get(t, c, srv.URL+path)
		if strings.Contains(page, oddName) || strings.Contains(page, "<b>w</b>") || strings.Contains(page, "<script>alert") {
			t.Errorf("%s: a name is not escaped:\n%s", path, page)
		}
		if !strings.Contains(page, `<text x="10" y="19" class="node-name">&lt;i&gt;odd&lt;/i&gt;</text>`) ||
			!strings.Contains(page, `data-step="&lt;i&gt;odd&lt;/i&gt;"`) || !strings.Contains(page, "code/&lt;b&gt;w&lt;/b&gt;") {
			t.Errorf("%s: the odd step is not drawn as text:\n%s", path, page)
		}
	}
}

// TestRunPageButtonsAreForOperators: a gate that waits has Approve and Reject
// (with the session's CSRF token) and a running run Cancel, for an operator;
// a viewer gets neither, and is told why; an ended run has no Cancel.
func TestRunPageButtonsAreForOperators(t *testing.T) {
	srv, _, _ := newFlowServer(t)
	for _, tc := range []struct {
		token   string
		buttons bool
	}{{operatorToken, true}, {viewerToken, false}} {
		c := browserClient(t)
		csrf := signIn(t, c, srv.URL+"/", tc.token)
		_, page := get(t, c, srv.URL+"/workflow-runs/"+runGateID)
		for _, want := range []string{`<section class="approval waiting" id="gate-approve"`, `<p class="gate-note">Ship it to production?</p>`,
			`<g class="node running waiting" id="step-approve"`, `<a href="#gate-approve">`, `class="node-state">awaiting approval</text>`} {
			if !strings.Contains(page, want) {
				t.Errorf("%s: the gate's page lacks %s", tc.token, want)
			}
		}
		approve := `<form method="post" action="/workflow-runs/` + runGateID + `/steps/approve/approve" class="decide">
    <input type="hidden" name="csrf" value="` + csrf + `">`
		reject := `formaction="/workflow-runs/` + runGateID + `/steps/approve/reject">Reject</button>`
		cancel := `<form method="post" action="/workflow-runs/` + runGateID + `/cancel" class="actions">
    <input type="hidden" name="csrf" value="` + csrf + `">`
		for _, want := range []string{approve, reject, cancel} {
			if strings.Contains(page, want) != tc.buttons {
				t.Errorf("%s: %s shown %v, want %v", tc.token, want, !tc.buttons, tc.buttons)
			}
		}
		if viewerNote := strings.Contains(page, "your token's role (viewer) may not"); viewerNote == tc.buttons {
			t.Errorf("%s: the viewer's note shown %v", tc.token, viewerNote)
		}
		if _, ended := get(t, c, srv.URL+"/workflow-runs/"+runFailedID); strings.Contains(ended, `id="cancel-run"`) {
			t.Errorf("%s: an ended run has Cancel", tc.token)
		}
	}
}

// TestGateDecisionsAndCancelPostTheAPI: Approve posts the gate's approve
// with the note, Reject its reject, Cancel the run's cancel, each back to the
// run's page; without the CSRF token each is refused and reaches no API; a
// decision on a gate that no longer waits shows the API's 409.
func TestGateDecisionsAndCancelPostTheAPI(t *testing.T) {
	srv, seen, _ := newFlowServer(t)
	c := browserClient(t)
	csrf := signIn(t, c, srv.URL+"/", operatorToken)
	base := srv.URL + "/workflow-runs/" + runGateID
	for _, path := range []string{"/steps/approve/approve", "/steps/approve/reject", "/cancel"} {
		if resp, _ := post(t, c, base+path, url.Values{"note": {"x"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s without its CSRF token: %d, want 403", path, resp.StatusCode)
		}
		if seen.called("POST /api/v1/workflow-runs/" + runGateID + path) {
			t.Errorf("%s without its CSRF token reached the API", path)
		}
	}
	resp, _ := post(t, c, base+"/steps/approve/approve", url.Values{"csrf": {csrf}, "note": {" ship it "}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/workflow-runs/"+runGateID {
		t.Fatalf("Approve: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := seen.body("POST /api/v1/workflow-runs/" + runGateID + "/steps/approve/approve"); got != `{"note":"ship it"}` {
		t.Errorf("the API's approve got %q", got)
	}
	resp, page := post(t, c, base+"/steps/approve/reject", url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(page, "Someone decided already") {
		t.Errorf("Reject after the approval: %d\n%s", resp.StatusCode, page)
	}
	resp, _ = post(t, c, base+"/cancel", url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusSeeOther || !seen.called("POST /api/v1/workflow-runs/"+runGateID+"/cancel") {
		t.Errorf("Cancel: %d, the API asked %v", resp.StatusCode, seen.called("POST /api/v1/workflow-runs/"+runGateID+"/cancel"))
	}
	if _, page := get(t, c, base); !strings.Contains(page, `id="cancel-asked"`) || strings.Contains(page, `id="cancel-run"`) {
		t.Errorf("the run's page after Cancel lacks the cancel asked:\n%s", page)
	}
	viewer := browserClient(t)
	vcsrf := signIn(t, viewer, srv.URL+"/", viewerToken)
	if resp, _ := post(t, viewer, srv.URL+"/workflow-runs/"+runRunningID+"/cancel", url.Values{"csrf": {vcsrf}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a viewer's Cancel: %d, want the API's 403", resp.StatusCode)
	}
}

// TestRunRelayDrawsEachChange: the run's stream reaches the page as "run"
// events whose data is the page's live part drawn for the run at that
// change: the run as it is, then a step gone from running to succeeded and
// the next from pending to running, then the run's end, after which the
// stream ends. An unknown run's stream is the API's 404.
func TestRunRelayDrawsEachChange(t *testing.T) {
	srv, _, flows := newFlowServer(t)
	c := browserClient(t)
	signIn(t, c, srv.URL+"/", operatorToken)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/workflow-runs/"+runRunningID+"/events", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("the relay: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := bufio.NewScanner(resp.Body)
	next := func() (id, html string) {
		t.Helper()
		var data []string
		for events.Scan() {
			line := events.Text()
			switch {
			case line == "" && data != nil:
				return id, strings.Join(data, "\n")
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			case line != "event: run" && line != "":
				t.Fatalf("a line of no run event: %q", line)
			}
		}
		t.Fatalf("the stream ended: %v", events.Err())
		return "", ""
	}
	id, first := next()
	if id != "1" || !strings.Contains(first, `<div id="run-live"`) || !strings.Contains(first, `<g class="node running" id="step-test"`) ||
		!strings.Contains(first, `<form method="post" action="/workflow-runs/`+runRunningID+`/cancel"`) {
		t.Fatalf("the first event, %s:\n%s", id, first)
	}
	flows.set(runRunningID, func(r *api.WorkflowRun) {
		r.Steps[1].State, r.Steps[2].State = api.StepSucceeded, api.StepRunning
	})
	if id, second := next(); id != "2" || !strings.Contains(second, `<g class="node succeeded" id="step-test"`) ||
		!strings.Contains(second, `<g class="node running" id="step-approve"`) || !strings.Contains(second, "2/6 steps done") {
		t.Fatalf("the second event, %s:\n%s", id, second)
	}
	flows.set(runRunningID, func(r *api.WorkflowRun) { r.State = api.RunCancelled })
	if _, last := next(); !strings.Contains(last, `data-final="true"`) || strings.Contains(last, `id="cancel-run"`) {
		t.Fatalf("the last event:\n%s", last)
	}
	if events.Scan() {
		t.Errorf("the stream goes on after the run's end: %q", events.Text())
	}
	if resp, _ := get(t, c, srv.URL+"/workflow-runs/cccccccc-cccc-4ccc-8ccc-cccccccccccc/events"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown run's stream: %d, want 404", resp.StatusCode)
	}
}

// TestRunBlockPassesOtherEvents: an event that is not a run's, or whose data
// is no run, goes to the page as the API sent it.
func TestRunBlockPassesOtherEvents(t *testing.T) {
	u := &UI{}
	for _, block := range [][]string{{": keep-alive"}, {"event: error", "data: {\"code\":\"gone\"}"}, {"id: 3", "event: run", "data: not json"}} {
		if got, want := u.runBlock(block, &session{}), strings.Join(block, "\n")+"\n"; got != want {
			t.Errorf("runBlock(%q) = %q, want it unchanged", block, got)
		}
	}
}
