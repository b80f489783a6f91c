package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// The workflow API, through HTTP, against a real orchestrator and real agents.

// configWorkflow is a workflow of the orchestrator's config, which the API
// cannot change.
var configWorkflow = api.WorkflowSpec{Name: "from-config", Steps: []api.WorkflowStep{
	{Name: "only", Task: &api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"}},
}}

// gatedSpec is a workflow of a gate, then an echo task; maxRuns bounds its
// runs.
func gatedSpec(maxRuns int) string {
	return `{"max_runs": ` + strconv.Itoa(maxRuns) + `, "steps": [
		{"name": "gate", "approval": {"note": "go?"}},
		{"name": "work", "needs": [{"step": "gate"}], "task": {"to_agent": "code", "work_type": "echo"}}]}`
}

// echoLog runs a real agent code-1 whose echo answers {"n": 2} as its
// structured output and keeps the parameters of each task it ran, by task id.
type echoLog struct {
	mu     sync.Mutex
	params map[string]map[string]any
}

func (l *echoLog) handle(_ context.Context, r *agent.Request, _ agent.Progress) (agent.Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.params[r.TaskID] = r.Parameters
	return agent.Result{Structured: map[string]any{"n": 2}}, nil
}

func (l *echoLog) of(id string) map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.params[id]
}

// workflowEnv is an orchestrator with configWorkflow in its config, a real
// agent code-1, and a client of its API.
func workflowEnv(t *testing.T) (*env, *orchestrator.Orchestrator, *client.Client, *echoLog) {
	e := newEnv(t, "code-1")
	e.cfg.Workflows = orchestrator.WorkflowsConfig{configWorkflow}
	log := &echoLog{params: map[string]map[string]any{}}
	o := e.open()
	e.realAgent("code-1", log.handle)
	return e, o, e.client(o), log
}

// apiError reads the code and field of an error answer.
func apiError(t *testing.T, body string) (code, field string) {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal([]byte(body), &eb); err != nil {
		t.Fatalf("not an error body: %s", body)
	}
	return eb.Error.Code, eb.Error.Field
}

// wantError fails unless the answer is status with code and field.
func wantError(t *testing.T, what string, status int, body string, wantStatus int, wantCode, wantField string) {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("%s: HTTP %d %s, want %d", what, status, body, wantStatus)
	}
	if code, field := apiError(t, body); code != wantCode || field != wantField {
		t.Fatalf("%s: %s on %q, want %s on %q (%s)", what, code, field, wantCode, wantField, body)
	}
}

// waitRun waits until run id has ended and returns it.
func waitRun(t *testing.T, o *orchestrator.Orchestrator, id string) *api.WorkflowRun {
	t.Helper()
	var r *api.WorkflowRun
	waitFor(t, "run "+id+" to end", func() bool {
		var err error
		r, err = o.GetRun(id)
		return err == nil && r.State.Final()
	})
	return r
}

// waitGate waits until step name of run id is a gate awaiting approval.
func waitGate(t *testing.T, o *orchestrator.Orchestrator, id, name string) {
	t.Helper()
	waitFor(t, "gate "+name+" to wait", func() bool {
		r, err := o.GetRun(id)
		if err != nil {
			return false
		}
		s := r.Step(name)
		return s.State == api.StepRunning && s.Approval != nil && s.Approval.State == task.ApprovalWaiting
	})
}

// startRun starts a run of workflow name through the API and returns it.
func startRun(t *testing.T, c *client.Client, name, body string) *api.WorkflowRun {
	t.Helper()
	status, out := call(t, c, "POST", "/api/v1/workflows/"+name+"/runs", c.Token, body)
	if status != http.StatusCreated {
		t.Fatalf("start a run of %s: HTTP %d %s", name, status, out)
	}
	var r api.WorkflowRun
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// TestWorkflowDefinitionsThroughTheAPI: a workflow is stored (its name from
// the path), read, listed beside the config's, replaced and deleted; a spec
// the check refuses is 400 naming its field, a body naming another workflow
// 400 on name, a change to a config workflow 409, an unknown one 404.
func TestWorkflowDefinitionsThroughTheAPI(t *testing.T) {
	_, _, c, _ := workflowEnv(t)
	tok := c.Token
	spec := `{"description": "one step", "steps": [{"name": "a", "task": {"to_agent": "code", "work_type": "echo"}}]}`
	status, body := call(t, c, "PUT", "/api/v1/workflows/build", tok, spec)
	var w api.Workflow
	if status != http.StatusOK || json.Unmarshal([]byte(body), &w) != nil || w.Name != "build" || w.Source != api.WorkflowFromAPI {
		t.Fatalf("PUT build: HTTP %d %s", status, body)
	}
	got, err := c.Workflow(context.Background(), "build")
	if err != nil || got.Description != "one step" || len(got.Steps) != 1 {
		t.Fatalf("GET build: %+v %v", got, err)
	}
	list, err := c.Workflows(context.Background())
	if err != nil || len(list) != 2 || list[0].Name != "build" || list[1].Name != "from-config" || list[1].Source != api.WorkflowFromConfig {
		t.Fatalf("GET workflows: %+v %v", list, err)
	}
	replaced := strings.Replace(spec, "one step", "two", 1)
	if status, body := call(t, c, "PUT", "/api/v1/workflows/build", tok, replaced); status != http.StatusOK || !strings.Contains(body, `"description":"two"`) {
		t.Fatalf("PUT build again: HTTP %d %s", status, body)
	}

	cases := []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"another name", "PUT", "/api/v1/workflows/build", `{"name": "other", "steps": []}`, 400, "invalid_field", "name"},
		{"no steps", "PUT", "/api/v1/workflows/empty", `{"steps": []}`, 400, "invalid_field", "steps"},
		{"unknown need", "PUT", "/api/v1/workflows/bad", `{"steps": [{"name": "a", "needs": [{"step": "z"}], "approval": {}}]}`,
			400, "invalid_field", "steps[0].needs[0].step"},
		{"two kinds", "PUT", "/api/v1/workflows/bad", `{"steps": [{"name": "a", "approval": {}, "task": {"to_agent": "code", "work_type": "echo"}}]}`,
			400, "invalid_field", "steps[0]"},
		{"bad path name", "PUT", "/api/v1/workflows/Bad!", `{"steps": [{"name": "a", "approval": {}}]}`, 400, "invalid_field", "name"},
		{"unknown field", "PUT", "/api/v1/workflows/bad", `{"stepz": []}`, 400, "unknown_field", "stepz"},
		{"config workflow", "PUT", "/api/v1/workflows/from-config", `{"steps": [{"name": "a", "approval": {}}]}`, 409, "conflict", "name"},
		{"delete config workflow", "DELETE", "/api/v1/workflows/from-config", "", 409, "conflict", "name"},
		{"delete unknown", "DELETE", "/api/v1/workflows/nope", "", 404, "not_found", "name"},
		{"get unknown", "GET", "/api/v1/workflows/nope", "", 404, "not_found", "name"},
		{"get a name no workflow may have", "GET", "/api/v1/workflows/No.Such", "", 404, "not_found", "name"},
	}
	for _, tc := range cases {
		status, body := call(t, c, tc.method, tc.path, tok, tc.body)
		wantError(t, tc.name, status, body, tc.status, tc.code, tc.field)
	}
	if _, err := c.Workflow(context.Background(), "bad"); status404(err) != nil {
		t.Fatalf("a refused spec was stored: %v", err)
	}

	if status, body := call(t, c, "DELETE", "/api/v1/workflows/build", tok, ""); status != http.StatusNoContent {
		t.Fatalf("DELETE build: HTTP %d %s", status, body)
	}
	if _, err := c.Workflow(context.Background(), "build"); status404(err) != nil {
		t.Fatalf("GET build after its delete: %v", err)
	}
}

// status404 is nil when err is the API's 404, else err (or an error for nil).
func status404(err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return nil
	}
	if err == nil {
		return errors.New("found")
	}
	return err
}

// TestWorkflowRunsEndToEndThroughTheAPI: a run of two task steps, the second
// needing the first and given its output typed through a template, runs on
// a real agent: 201 with its Location, each step's task made by the run, the
// run succeeded; it is listed newest first, by workflow; a bad limit is 400.
func TestWorkflowRunsEndToEndThroughTheAPI(t *testing.T) {
	_, o, c, log := workflowEnv(t)
	spec := `{"params": {"label": {"type": "string", "required": true}}, "steps": [
		{"name": "first", "task": {"to_agent": "code", "work_type": "echo", "parameters": {"text": "${params.label}"}}},
		{"name": "second", "needs": [{"step": "first"}], "task": {"to_agent": "code", "work_type": "echo",
			"parameters": {"count": "${steps.first.output.n}", "after": "${steps.first.task_id}"}}}]}`
	if status, body := call(t, c, "PUT", "/api/v1/workflows/pipeline", c.Token, spec); status != http.StatusOK {
		t.Fatalf("PUT pipeline: HTTP %d %s", status, body)
	}
	req, _ := http.NewRequest("POST", c.BaseURL+"/api/v1/workflows/pipeline/runs", strings.NewReader(`{"params": {"label": "nightly"}}`))
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var r api.WorkflowRun
	err = json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated || resp.Header.Get("Location") != "/api/v1/workflow-runs/"+r.ID {
		t.Fatalf("POST a run: HTTP %d, Location %q, %+v %v", resp.StatusCode, resp.Header.Get("Location"), r, err)
	}
	if r.State != api.RunRunning || r.CreatedBy == "" || r.Params["label"] != "nightly" {
		t.Fatalf("the run as made: %+v", r)
	}
	end := waitRun(t, o, r.ID)
	if end.State != api.RunSucceeded || end.Step("first").State != api.StepSucceeded || end.Step("second").State != api.StepSucceeded {
		t.Fatalf("run ended %s: %+v", end.State, end.Steps)
	}
	first, second := end.Step("first"), end.Step("second")
	for _, s := range []*api.StepRun{first, second} {
		tk, err := o.Task(s.TaskID)
		if err != nil || tk.WorkflowRun != r.ID || tk.State != task.StateSucceeded {
			t.Fatalf("step %s's task: %+v %v", s.Name, tk, err)
		}
	}
	if got := log.of(first.TaskID); got["text"] != "nightly" {
		t.Fatalf("first was given %v", got)
	}
	if got := log.of(second.TaskID); got["count"] != json.Number("2") || got["after"] != first.TaskID {
		t.Fatalf("second was given %v; want count the number 2 and after %s", got, first.TaskID)
	}
	got, err := c.Run(context.Background(), r.ID)
	if err != nil || got.State != api.RunSucceeded {
		t.Fatalf("GET the run: %+v %v", got, err)
	}

	newer := startRun(t, c, "pipeline", `{"params": {"label": "again"}}`)
	waitRun(t, o, newer.ID)
	runs, err := c.Runs(context.Background(), "pipeline", 0)
	if err != nil || len(runs) != 2 || runs[0].ID != newer.ID || runs[1].ID != r.ID {
		t.Fatalf("GET runs of pipeline: %d runs %v", len(runs), err)
	}
	if runs, err := c.Runs(context.Background(), "pipeline", 1); err != nil || len(runs) != 1 || runs[0].ID != newer.ID {
		t.Fatalf("GET runs, limit 1: %d runs %v", len(runs), err)
	}
	if runs, err := c.Runs(context.Background(), "from-config", 0); err != nil || len(runs) != 0 {
		t.Fatalf("GET runs of from-config: %d runs %v", len(runs), err)
	}
	for _, limit := range []string{"0", "1001", "x"} {
		status, body := call(t, c, "GET", "/api/v1/workflow-runs?limit="+limit, c.Token, "")
		wantError(t, "limit "+limit, status, body, 400, "invalid_field", "limit")
	}
}

// TestWorkflowRunRefusals: parameters the workflow refuses are 400 on
// params.NAME and make no run; an unknown workflow is 404; a workflow that
// runs max_runs runs refuses another with 409 too_many_runs.
func TestWorkflowRunRefusals(t *testing.T) {
	_, o, c, _ := workflowEnv(t)
	spec := `{"params": {"n": {"type": "integer", "required": true}}, "steps": [{"name": "a", "task": {"to_agent": "code", "work_type": "echo"}}]}`
	if status, body := call(t, c, "PUT", "/api/v1/workflows/typed", c.Token, spec); status != http.StatusOK {
		t.Fatalf("PUT typed: HTTP %d %s", status, body)
	}
	cases := []struct{ name, body, field string }{
		{"missing required", `{}`, "params.n"},
		{"no body", ``, "params.n"},
		{"not an integer", `{"params": {"n": "many"}}`, "params.n"},
		{"a fraction", `{"params": {"n": 1.5}}`, "params.n"},
		{"undeclared", `{"params": {"n": 1, "m": 2}}`, "params.m"},
	}
	for _, tc := range cases {
		status, body := call(t, c, "POST", "/api/v1/workflows/typed/runs", c.Token, tc.body)
		wantError(t, tc.name, status, body, 400, "invalid_field", tc.field)
	}
	status, body := call(t, c, "POST", "/api/v1/workflows/typed/runs", c.Token, `{"params": {"n": 1}, "extra": true}`)
	wantError(t, "unknown field", status, body, 400, "unknown_field", "extra")
	if runs, err := o.Runs("typed", 0); err != nil || len(runs) != 0 {
		t.Fatalf("refused runs were made: %d %v", len(runs), err)
	}
	status, body = call(t, c, "POST", "/api/v1/workflows/nope/runs", c.Token, `{}`)
	wantError(t, "unknown workflow", status, body, 404, "not_found", "name")

	if status, body := call(t, c, "PUT", "/api/v1/workflows/gated", c.Token, gatedSpec(1)); status != http.StatusOK {
		t.Fatalf("PUT gated: HTTP %d %s", status, body)
	}
	first := startRun(t, c, "gated", "")
	status, body = call(t, c, "POST", "/api/v1/workflows/gated/runs", c.Token, "")
	wantError(t, "a second run of max_runs 1", status, body, 409, "too_many_runs", "name")
	if _, err := c.CancelRun(context.Background(), first.ID); err != nil {
		t.Fatal(err)
	}
	waitRun(t, o, first.ID)
	startRun(t, c, "gated", "") // the first ended: room again
}

// TestWorkflowRunCancelThroughTheAPI: a cancel is 202 with cancel_asked; the
// run then ends cancelled, its gate failed and its task step skipped; a
// cancel again is 409 finished; an unknown run, or an id that is none, is 404.
func TestWorkflowRunCancelThroughTheAPI(t *testing.T) {
	_, o, c, _ := workflowEnv(t)
	if status, body := call(t, c, "PUT", "/api/v1/workflows/gated", c.Token, gatedSpec(1)); status != http.StatusOK {
		t.Fatalf("PUT gated: HTTP %d %s", status, body)
	}
	r := startRun(t, c, "gated", "")
	waitGate(t, o, r.ID, "gate")
	status, body := call(t, c, "POST", "/api/v1/workflow-runs/"+r.ID+"/cancel", c.Token, "")
	var asked api.WorkflowRun
	if status != http.StatusAccepted || json.Unmarshal([]byte(body), &asked) != nil || asked.CancelAsked == nil {
		t.Fatalf("cancel: HTTP %d %s", status, body)
	}
	end := waitRun(t, o, r.ID)
	if end.State != api.RunCancelled || end.Step("work").State != api.StepSkipped {
		t.Fatalf("run ended %s: %+v", end.State, end.Steps)
	}
	status, body = call(t, c, "POST", "/api/v1/workflow-runs/"+r.ID+"/cancel", c.Token, "")
	wantError(t, "cancel again", status, body, 409, "finished", "id")

	missing := "00000000-0000-4000-8000-000000000000"
	for _, tc := range []struct{ method, path string }{
		{"GET", "/api/v1/workflow-runs/" + missing},
		{"GET", "/api/v1/workflow-runs/not.a.run"},
		{"GET", "/api/v1/workflow-runs/" + missing + "/events"},
		{"POST", "/api/v1/workflow-runs/" + missing + "/cancel"},
		{"POST", "/api/v1/workflow-runs/" + missing + "/steps/gate/approve"},
	} {
		status, body := call(t, c, tc.method, tc.path, c.Token, "")
		wantError(t, tc.method+" "+tc.path, status, body, 404, "not_found", "id")
	}
}

// TestWorkflowGateDecidedThroughTheAPI: a gate approved through the API lets
// the run go on to succeed, with the approval's note and who gave it; a step
// the run does not have is 400 on step, a note too long 400 on note, a step
// that is no waiting gate 409 not_awaiting_approval. A gate rejected fails
// its run.
func TestWorkflowGateDecidedThroughTheAPI(t *testing.T) {
	_, o, c, _ := workflowEnv(t)
	if status, body := call(t, c, "PUT", "/api/v1/workflows/gated", c.Token, gatedSpec(2)); status != http.StatusOK {
		t.Fatalf("PUT gated: HTTP %d %s", status, body)
	}
	r := startRun(t, c, "gated", "")
	waitGate(t, o, r.ID, "gate")
	at := "/api/v1/workflow-runs/" + r.ID + "/steps/"
	status, body := call(t, c, "POST", at+"nope/approve", c.Token, "")
	wantError(t, "unknown step", status, body, 400, "invalid_field", "step")
	status, body = call(t, c, "POST", at+"gate/approve", c.Token, `{"note": "`+strings.Repeat("x", 1025)+`"}`)
	wantError(t, "note too long", status, body, 400, "invalid_field", "note")
	status, body = call(t, c, "POST", at+"work/approve", c.Token, "")
	wantError(t, "a task step", status, body, 409, "not_awaiting_approval", "step")

	status, body = call(t, c, "POST", at+"gate/approve", c.Token, `{"note": "window open"}`)
	var decided api.WorkflowRun
	if status != http.StatusOK || json.Unmarshal([]byte(body), &decided) != nil {
		t.Fatalf("approve: HTTP %d %s", status, body)
	}
	if a := decided.Step("gate").Approval; a == nil || a.State != task.ApprovalApproved || a.Note != "window open" || a.By == "" {
		t.Fatalf("the gate's approval after approve: %+v", a)
	}
	end := waitRun(t, o, r.ID)
	if end.State != api.RunSucceeded || end.Step("gate").State != api.StepSucceeded || end.Step("work").State != api.StepSucceeded {
		t.Fatalf("approved run ended %s: %+v", end.State, end.Steps)
	}
	status, body = call(t, c, "POST", at+"gate/reject", c.Token, "")
	wantError(t, "reject an ended run's gate", status, body, 409, "not_awaiting_approval", "step")

	r = startRun(t, c, "gated", "")
	waitGate(t, o, r.ID, "gate")
	if _, err := c.DecideStep(context.Background(), r.ID, "gate", false, "not today"); err != nil {
		t.Fatal(err)
	}
	end = waitRun(t, o, r.ID)
	if end.State != api.RunFailed || end.Step("gate").State != api.StepFailed || end.Step("work").State != api.StepSkipped {
		t.Fatalf("rejected run ended %s: %+v", end.State, end.Steps)
	}
}

// TestWorkflowRunEventsFollowTheRunToItsEnd: a run's event stream sends the
// run at once, again as it changes (its gate waiting, approved), and ends
// after the event that shows its end.
func TestWorkflowRunEventsFollowTheRunToItsEnd(t *testing.T) {
	_, o, c, _ := workflowEnv(t)
	if status, body := call(t, c, "PUT", "/api/v1/workflows/gated", c.Token, gatedSpec(1)); status != http.StatusOK {
		t.Fatalf("PUT gated: HTTP %d %s", status, body)
	}
	r := startRun(t, c, "gated", "")
	var seen []*api.WorkflowRun
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := c.RunEvents(ctx, r.ID, func(got *api.WorkflowRun) error {
		seen = append(seen, got)
		if s := got.Step("gate"); s.Approval != nil && s.Approval.State == task.ApprovalWaiting {
			if _, err := o.DecideStep(context.Background(), r.ID, "gate", true, ""); err != nil && !errors.Is(err, api.ErrNotAwaitingApproval) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the stream: %v after %d events", err, len(seen))
	}
	if len(seen) < 3 {
		t.Fatalf("%d events, want the run made, its gate waiting and its end at least", len(seen))
	}
	last := seen[len(seen)-1]
	if last.State != api.RunSucceeded || last.FinishedAt == nil {
		t.Fatalf("the last event shows the run %s", last.State)
	}
	for _, got := range seen[:len(seen)-1] {
		if got.State.Final() {
			t.Fatalf("an event before the last shows the run %s", got.State)
		}
	}
}

// TestWorkflowAPIRolesLetAViewerReadOnly: a viewer's token reads workflows
// and runs, and is refused 403 what changes them: nothing changes.
func TestWorkflowAPIRolesLetAViewerReadOnly(t *testing.T) {
	e := newEnv(t, "code-1")
	viewer := broker.NewToken()
	viewerFile := filepath.Join(t.TempDir(), "viewer.token")
	if err := broker.WriteTokenFile(viewerFile, viewer); err != nil {
		t.Fatal(err)
	}
	e.cfg.APITokens = []orchestrator.APITokenConfig{{TokenFile: viewerFile, Role: orchestrator.RoleViewer}}
	o := e.open()
	c := e.client(o)
	if status, body := call(t, c, "PUT", "/api/v1/workflows/gated", c.Token, gatedSpec(1)); status != http.StatusOK {
		t.Fatalf("PUT gated: HTTP %d %s", status, body)
	}
	r := startRun(t, c, "gated", "")
	waitGate(t, o, r.ID, "gate")
	for _, path := range []string{"/api/v1/workflows", "/api/v1/workflows/gated", "/api/v1/workflow-runs", "/api/v1/workflow-runs/" + r.ID} {
		if status, body := call(t, c, "GET", path, viewer, ""); status != http.StatusOK {
			t.Errorf("viewer GET %s: HTTP %d %s", path, status, body)
		}
	}
	for _, tc := range []struct{ method, path, body string }{
		{"PUT", "/api/v1/workflows/gated", `{"steps": [{"name": "a", "approval": {}}]}`},
		{"PUT", "/api/v1/workflows/new", `{"steps": [{"name": "a", "approval": {}}]}`},
		{"DELETE", "/api/v1/workflows/gated", ""},
		{"POST", "/api/v1/workflows/gated/runs", ""},
		{"POST", "/api/v1/workflow-runs/" + r.ID + "/cancel", ""},
		{"POST", "/api/v1/workflow-runs/" + r.ID + "/steps/gate/approve", ""},
		{"POST", "/api/v1/workflow-runs/" + r.ID + "/steps/gate/reject", ""},
	} {
		status, body := call(t, c, tc.method, tc.path, viewer, tc.body)
		wantError(t, "viewer "+tc.method+" "+tc.path, status, body, 403, "forbidden", "Authorization")
	}
	got, err := o.GetRun(r.ID)
	if err != nil || got.CancelAsked != nil || got.Step("gate").Approval.State != task.ApprovalWaiting {
		t.Fatalf("a viewer's call reached the run: %+v %v", got, err)
	}
	if ws, err := o.Workflows(); err != nil || len(ws) != 1 || len(ws[0].Steps) != 2 {
		t.Fatalf("a viewer's call reached the workflows: %+v %v", ws, err)
	}
}

// TestAScheduleStartsWorkflowRuns: a schedule of a workflow is added through
// the API (refused 400 for a workflow that is not there, or parameters it
// refuses); its firing starts a run, named in the firing, that says which
// schedule and fire time made it.
func TestAScheduleStartsWorkflowRuns(t *testing.T) {
	_, o, c, _ := workflowEnv(t)
	orchestrator.StopFleet(o) // the test fires the schedules itself
	if status, body := call(t, c, "PUT", "/api/v1/workflows/gated", c.Token,
		`{"params": {"env": {"required": true}}, "steps": [{"name": "gate", "approval": {}}]}`); status != http.StatusOK {
		t.Fatalf("PUT gated: HTTP %d %s", status, body)
	}
	for _, tc := range []struct{ name, workflow, field string }{
		{"no such workflow", `{"name": "nope"}`, "workflow.name"},
		{"a parameter missing", `{"name": "gated"}`, "workflow.params.env"},
		{"a task too", `{"name": "gated", "params": {"env": "prod"}}, "task": {"to_agent": "code", "work_type": "echo"}`, "task"},
	} {
		status, body := call(t, c, "POST", "/api/v1/schedules", c.Token, `{"name": "nightly", "cron": "@daily", "workflow": `+tc.workflow+`}`)
		wantError(t, tc.name, status, body, 400, "invalid_field", tc.field)
	}
	status, body := call(t, c, "POST", "/api/v1/schedules", c.Token,
		`{"name": "nightly", "cron": "* * * * * *", "workflow": {"name": "gated", "params": {"env": "prod"}}}`)
	var s api.Schedule
	if status != http.StatusCreated || json.Unmarshal([]byte(body), &s) != nil || s.Workflow == nil {
		t.Fatalf("POST a schedule of gated: HTTP %d %s", status, body)
	}
	at := s.CreatedAt.Truncate(time.Second).Add(time.Second)
	orchestrator.FireDue(o, s.CreatedAt, at.Add(100*time.Millisecond))
	got, err := c.Schedule(context.Background(), "nightly")
	if err != nil || got.Last == nil || got.Last.RunID == "" {
		t.Fatalf("the schedule after its firing: %+v %v", got, err)
	}
	r, err := c.Run(context.Background(), got.Last.RunID)
	if err != nil || r.Workflow != "gated" || r.Schedule != "nightly" || r.FireTime == nil || !r.FireTime.Equal(at) ||
		r.Params["env"] != "prod" || r.CreatedBy != "schedule nightly" {
		t.Fatalf("the run the firing made: %+v %v", r, err)
	}
}
