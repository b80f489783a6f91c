package ui

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestWorkflowsPageListsThemWithRunForOperators: the Workflows page, linked
// from every page's navigation, lists each workflow's name, description,
// steps and source, escaped; an operator gets a Run button on each, a viewer
// none.
func TestWorkflowsPageListsThemWithRunForOperators(t *testing.T) {
	srv, _, _ := newFlowServer(t)
	for _, tc := range []struct {
		token string
		run   bool
	}{{operatorToken, true}, {viewerToken, false}} {
		c := browserClient(t)
		signIn(t, c, srv.URL+"/", tc.token)
		resp, page := get(t, c, srv.URL+"/workflows")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the Workflows page: %d", resp.StatusCode)
		}
		for _, want := range []string{`<a href="/workflows">Workflows</a>`, `href="/workflows/release"`, "Build, test, approve &amp; deploy",
			"6: build, test, approve, deploy, rollback, notify", "<td>config</td>", "<td>api</td>",
			`&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;`, "1: &lt;i&gt;odd&lt;/i&gt;"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s: the Workflows page lacks %s:\n%s", tc.token, want, page)
			}
		}
		if strings.Contains(page, "<script>alert") || strings.Contains(page, oddName) {
			t.Errorf("the Workflows page does not escape the odd workflow:\n%s", page)
		}
		if got := strings.Contains(page, `href="/workflows/release/run">Run…</a>`); got != tc.run {
			t.Errorf("%s: a Run button %v, want %v", tc.token, got, tc.run)
		}
	}
}

// TestWorkflowPageShowsTheDefinitionAndTheRunsNewestFirst: a workflow's page
// lists its parameters, its steps with their needs and conditions, draws
// them, and lists its runs newest first, each with its state, steps done and
// a link; an unknown workflow is the API's 404.
func TestWorkflowPageShowsTheDefinitionAndTheRunsNewestFirst(t *testing.T) {
	srv, _, _ := newFlowServer(t)
	c := browserClient(t)
	signIn(t, c, srv.URL+"/", viewerToken)
	resp, page := get(t, c, srv.URL+"/workflows/release")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the workflow's page: %d\n%s", resp.StatusCode, page)
	}
	for _, want := range []string{"<code>version</code></td><td>string</td><td>yes</td>", "<code>count</code></td><td>integer</td><td>no</td>",
		"<td>deploy (failure)</td>", "<td>deploy (always)</td>", "<td>approve</td>", "Ship it to production?",
		`<g class="node def" id="step-deploy"`, `<g class="edge failure" data-from="deploy" data-to="rollback">`,
		`href="/workflow-runs/` + runGateID + `"`, "<td>2/6</td>", "<td>6/6</td>", `<span class="state failed">failed</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the workflow's page lacks %s", want)
		}
	}
	if strings.Contains(page, `id="run-workflow"`) {
		t.Errorf("a viewer gets the Run button")
	}
	order := []int{strings.Index(page, `data-run="`+runRunningID), strings.Index(page, `data-run="`+runGateID), strings.Index(page, `data-run="`+runFailedID)}
	if order[0] < 0 || order[0] > order[1] || order[1] > order[2] {
		t.Errorf("the runs are not newest first: at %v", order)
	}
	if resp, _ := get(t, c, srv.URL+"/workflows/nothing"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown workflow's page: %d, want 404", resp.StatusCode)
	}
}

// TestRunFormIsTypedAndShowsARefusalBesideItsField: the run form has an input
// per parameter, typed as declared (a required text, a whole number with its
// default, a checkbox) for an operator and is refused to a viewer; a value
// that is not its type is refused beside its input before the API is asked,
// the API's 400 for a parameter beside its input, with what was typed kept;
// a good form starts the run with typed parameters and goes to its page.
func TestRunFormIsTypedAndShowsARefusalBesideItsField(t *testing.T) {
	srv, seen, _ := newFlowServer(t)
	viewer := browserClient(t)
	signIn(t, viewer, srv.URL+"/", viewerToken)
	if resp, _ := get(t, viewer, srv.URL+"/workflows/release/run"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a viewer's run form: %d, want 403", resp.StatusCode)
	}
	c := browserClient(t)
	csrf := signIn(t, c, srv.URL+"/", operatorToken)
	_, form := get(t, c, srv.URL+"/workflows/release/run")
	for _, want := range []string{`<input type="text" id="param-version" name="p.version" value="" required aria-describedby="param-version-help">`,
		`<input type="number" id="param-count" name="p.count" step="1" value="2">`,
		`<input type="checkbox" id="param-dry" name="p.dry" value="true">`, "The version to ship."} {
		if !strings.Contains(form, want) {
			t.Errorf("the run form lacks %s:\n%s", want, form)
		}
	}
	const start = "POST /api/v1/workflows/release/runs"
	resp, page := post(t, c, srv.URL+"/workflows/release/run", url.Values{"csrf": {csrf}, "p.version": {"1.2"}, "p.count": {"two"}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, `<small class="field-error" id="param-count-error">want an integer, got &#34;two&#34;</small>`) ||
		!strings.Contains(page, `value="1.2"`) || seen.called(start) {
		t.Errorf("a count that is no integer: %d, asked the API %v:\n%s", resp.StatusCode, seen.called(start), page)
	}
	resp, page = post(t, c, srv.URL+"/workflows/release/run", url.Values{"csrf": {csrf}, "p.count": {"3"}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, `<small class="field-error" id="param-version-error">is required</small>`) ||
		!strings.Contains(page, "params.version: is required") || !strings.Contains(page, `name="p.count" step="1" value="3"`) {
		t.Errorf("the API's 400 for version: %d:\n%s", resp.StatusCode, page)
	}
	resp, _ = post(t, c, srv.URL+"/workflows/release/run", url.Values{"csrf": {csrf}, "p.version": {"1.2"}, "p.count": {"3"}, "p.dry": {"true"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/workflow-runs/"+runStartedID {
		t.Fatalf("a good run form: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := seen.body(start); got != `{"params":{"count":3,"dry":true,"version":"1.2"}}` {
		t.Errorf("the API got %s", got)
	}
	if resp, _ := post(t, c, srv.URL+"/workflows/release/run", url.Values{"p.version": {"1.3"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a run form without its CSRF token: %d, want 403", resp.StatusCode)
	}
}
