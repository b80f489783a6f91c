package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/workflow"
)

// The fake API's runs of workflow release: one running (build done, test
// running), one whose gate waits for an operator, one that failed; and a run
// of workflow odd, whose names are HTML.
const (
	runRunningID = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaa1"
	runGateID    = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaa2"
	runFailedID  = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaa3"
	runOddID     = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaa4"
	runStartedID = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaa5"
	stepTaskID   = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbb1"
	stepBatchID  = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbb2"
	oddName      = `<i>odd</i>`
)

var runAt = time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)

// releaseSpec builds, tests on every infra agent, waits for a yes, deploys;
// rolls back when the deploy fails and notifies however it ended.
func releaseSpec() api.WorkflowSpec {
	task := func(wt string) *api.SubmitRequest { return &api.SubmitRequest{ToAgent: "code", WorkType: wt} }
	return api.WorkflowSpec{Name: "release", Description: "Build, test, approve & deploy",
		Params: map[string]api.WorkflowParam{
			"version": {Type: "string", Required: true, Description: "The version to ship."},
			"count":   {Type: "integer", Default: 2.0},
			"dry":     {Type: "boolean"},
		},
		Steps: []api.WorkflowStep{
			{Name: "build", Task: task("build")},
			{Name: "test", Needs: []api.WorkflowNeed{{Step: "build"}}, Batch: &api.BatchRequest{ToAgent: "infra", WorkType: "sleep"}},
			{Name: "approve", Needs: []api.WorkflowNeed{{Step: "test"}}, Approval: &api.WorkflowGate{Note: "Ship it to production?"}},
			{Name: "deploy", Needs: []api.WorkflowNeed{{Step: "approve"}}, Task: task("deploy")},
			{Name: "rollback", Needs: []api.WorkflowNeed{{Step: "deploy", When: api.NeedFailure}}, Task: task("rollback")},
			{Name: "notify", Needs: []api.WorkflowNeed{{Step: "deploy", When: api.NeedAlways}}, Task: task("notify")},
		}}
}

// oddSpec's description and step names are HTML, which the pages escape.
func oddSpec() api.WorkflowSpec {
	return api.WorkflowSpec{Name: "odd", Description: `<script>alert("x")</script>`,
		Steps: []api.WorkflowStep{{Name: oddName, Task: &api.SubmitRequest{ToAgent: "code", WorkType: "<b>w</b>"}}}}
}

// newRun is a run of spec just begun: every step pending.
func newRun(id string, spec api.WorkflowSpec, at time.Time) *api.WorkflowRun {
	r := &api.WorkflowRun{ID: id, Workflow: spec.Name, State: api.RunRunning, Spec: spec, CreatedAt: at, CreatedBy: "alice"}
	for _, st := range spec.Steps {
		r.Steps = append(r.Steps, api.StepRun{Name: st.Name, State: api.StepPending})
	}
	return r
}

// fakeRuns are the fake API's runs, by id.
func fakeRuns() map[string]*api.WorkflowRun {
	running := newRun(runRunningID, releaseSpec(), runAt.Add(2*time.Hour))
	done := runAt.Add(2*time.Hour + time.Minute)
	running.Steps[0] = api.StepRun{Name: "build", State: api.StepSucceeded, TaskID: stepTaskID, StartedAt: &running.CreatedAt, FinishedAt: &done}
	running.Steps[1] = api.StepRun{Name: "test", State: api.StepRunning, BatchID: stepBatchID, StartedAt: &done}

	gate := newRun(runGateID, releaseSpec(), runAt.Add(time.Hour))
	gate.Steps[0].State, gate.Steps[1].State = api.StepSucceeded, api.StepSucceeded
	gate.Steps[2] = api.StepRun{Name: "approve", State: api.StepRunning, StartedAt: &done,
		Approval: &task.Approval{State: task.ApprovalWaiting, RequestedAt: done}}

	failed := newRun(runFailedID, releaseSpec(), runAt)
	failed.State, failed.FinishedAt, failed.Error = api.RunFailed, &done, "step build failed"
	failed.Steps[0] = api.StepRun{Name: "build", State: api.StepFailed, TaskID: stepTaskID, Error: "exit code 2"}
	for i := 1; i < len(failed.Steps); i++ {
		failed.Steps[i].State, failed.Steps[i].SkipReason = api.StepSkipped, "step build failed"
	}
	odd := newRun(runOddID, oddSpec(), runAt)
	return map[string]*api.WorkflowRun{runRunningID: running, runGateID: gate, runFailedID: failed, runOddID: odd}
}

// fakeFlows is the fake API's workflows and their runs. A test changes a run
// with set; each of the run's event streams then sends it, as the API's do.
type fakeFlows struct {
	mu      sync.Mutex
	flows   []*api.Workflow
	runs    map[string]*api.WorkflowRun
	changed chan struct{} // closed, and made again, at each change
	// holdEnd keeps a stream open after the run's end, unlike the API's, until
	// the page closes it; closed then gets the run's id.
	holdEnd bool
	closed  chan string
}

func newFakeFlows() *fakeFlows {
	return &fakeFlows{runs: fakeRuns(), changed: make(chan struct{}), closed: make(chan string, 16),
		flows: []*api.Workflow{{WorkflowSpec: releaseSpec(), Source: api.WorkflowFromConfig, UpdatedAt: runAt},
			{WorkflowSpec: oddSpec(), Source: api.WorkflowFromAPI, UpdatedAt: runAt}}}
}

// set changes run id with change, and tells its streams.
func (f *fakeFlows) set(id string, change func(*api.WorkflowRun)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f.runs[id])
	close(f.changed)
	f.changed = make(chan struct{})
}

// run is a copy of run id as it is now, and the channel its next change
// closes; nil for an unknown run.
func (f *fakeFlows) run(id string) (*api.WorkflowRun, chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs[id]
	if r == nil {
		return nil, f.changed
	}
	b, _ := json.Marshal(r)
	var out api.WorkflowRun
	_ = json.Unmarshal(b, &out)
	return &out, f.changed
}

// apiFail answers an API error.
func apiFail(w http.ResponseWriter, status int, code, field, msg string) {
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: api.APIErrorDetail{Code: code, Field: field, Message: msg}})
}

// routes answers the workflow calls as the API does; the changes for an
// operator's token only.
func (f *fakeFlows) routes() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /api/v1/workflows", func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(f.flows) })
	m.HandleFunc("GET /api/v1/workflows/{name}", func(w http.ResponseWriter, r *http.Request) {
		if wf := f.flow(r.PathValue("name")); wf != nil {
			_ = json.NewEncoder(w).Encode(wf)
			return
		}
		apiFail(w, http.StatusNotFound, "not_found", "", "no such workflow")
	})
	m.HandleFunc("POST /api/v1/workflows/{name}/runs", operatorOnly(f.startRun))
	m.HandleFunc("GET /api/v1/workflow-runs", func(w http.ResponseWriter, r *http.Request) {
		var out []*api.WorkflowRun
		for _, id := range []string{runFailedID, runRunningID, runGateID, runOddID} { // as stored: not newest first
			if run, _ := f.run(id); run.Workflow == r.URL.Query().Get("workflow") {
				out = append(out, run)
			}
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	m.HandleFunc("GET /api/v1/workflow-runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if run, _ := f.run(r.PathValue("id")); run != nil {
			_ = json.NewEncoder(w).Encode(run)
			return
		}
		apiFail(w, http.StatusNotFound, "not_found", "", "no such run")
	})
	m.HandleFunc("GET /api/v1/workflow-runs/{id}/events", f.events)
	m.HandleFunc("POST /api/v1/workflow-runs/{id}/cancel", operatorOnly(f.cancel))
	m.HandleFunc("POST /api/v1/workflow-runs/{id}/steps/{step}/approve", operatorOnly(f.decide(true)))
	m.HandleFunc("POST /api/v1/workflow-runs/{id}/steps/{step}/reject", operatorOnly(f.decide(false)))
	return m
}

func (f *fakeFlows) flow(name string) *api.Workflow {
	i := slices.IndexFunc(f.flows, func(w *api.Workflow) bool { return w.Name == name })
	if i < 0 {
		return nil
	}
	return f.flows[i]
}

// operatorOnly refuses a viewer's token, as the API does.
func operatorOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+operatorToken {
			apiFail(w, http.StatusForbidden, "forbidden", "", "operators only")
			return
		}
		h(w, r)
	}
}

// startRun checks the parameters with the workflow package, as the API does,
// and starts runStartedID.
func (f *fakeFlows) startRun(w http.ResponseWriter, r *http.Request) {
	wf := f.flow(r.PathValue("name"))
	if wf == nil {
		apiFail(w, http.StatusNotFound, "not_found", "", "no such workflow")
		return
	}
	var req api.WorkflowRunRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		apiFail(w, http.StatusBadRequest, "invalid_json", "", err.Error())
		return
	}
	params, err := workflow.RunParams(&wf.WorkflowSpec, req.Params)
	var fe *api.FieldError
	if errors.As(err, &fe) {
		apiFail(w, http.StatusBadRequest, "invalid_field", fe.Field, fe.Message)
		return
	}
	run := newRun(runStartedID, wf.WorkflowSpec, time.Now())
	run.Params = params
	f.mu.Lock()
	f.runs[runStartedID] = run
	f.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(run)
}

// events is a run's event stream: the run now, then at each change, until
// it ends.
func (f *fakeFlows) events(w http.ResponseWriter, r *http.Request) {
	run, changed := f.run(r.PathValue("id"))
	if run == nil {
		apiFail(w, http.StatusNotFound, "not_found", "", "no such run")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for n := 1; ; n++ {
		data, _ := json.Marshal(run)
		fmt.Fprintf(w, "id: %d\nevent: run\ndata: %s\n\n", n, data)
		w.(http.Flusher).Flush()
		if run.State.Final() && !f.holdEnd {
			return
		}
		if run.State.Final() {
			<-r.Context().Done()
			f.closed <- run.ID
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
		run, changed = f.run(run.ID)
	}
}

// cancel asks a running run to stop; an ended one is the API's 409.
func (f *fakeFlows) cancel(w http.ResponseWriter, r *http.Request) {
	run, _ := f.run(r.PathValue("id"))
	switch {
	case run == nil:
		apiFail(w, http.StatusNotFound, "not_found", "", "no such run")
	case run.State.Final():
		apiFail(w, http.StatusConflict, "finished", "", "the run ended")
	default:
		now := time.Now()
		f.set(run.ID, func(r *api.WorkflowRun) { r.CancelAsked = &now })
		run, _ = f.run(run.ID)
		_ = json.NewEncoder(w).Encode(run)
	}
}

// decide answers a gate that waits: approved, it succeeds and the steps
// after it start; rejected, it fails. One that does not wait is the API's 409.
func (f *fakeFlows) decide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req api.DecisionRequest
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil {
			apiFail(w, http.StatusBadRequest, "invalid_json", "", err.Error())
			return
		}
		run, _ := f.run(r.PathValue("id"))
		if run == nil {
			apiFail(w, http.StatusNotFound, "not_found", "", "no such run")
			return
		}
		s := run.Step(r.PathValue("step"))
		if s == nil || !gateWaits(run, s) {
			apiFail(w, http.StatusConflict, "not_awaiting_approval", "", "the step does not await approval")
			return
		}
		f.set(run.ID, func(run *api.WorkflowRun) {
			s := run.Step(r.PathValue("step"))
			a := *s.Approval
			a.State, a.By, a.Note, s.State = task.ApprovalApproved, "alice", req.Note, api.StepSucceeded
			if !approve {
				a.State, s.State, s.Error = task.ApprovalRejected, api.StepFailed, "approval rejected by alice"
			}
			s.Approval = &a
		})
		run, _ = f.run(run.ID)
		_ = json.NewEncoder(w).Encode(run)
	}
}

// newFlowServer serves the dashboard over the fake API with its workflows.
func newFlowServer(t *testing.T) (*httptest.Server, *apiLog, *fakeFlows) {
	t.Helper()
	seen := &apiLog{}
	flows := newFakeFlows()
	routes, rest := flows.routes(), fakeAPI(t, seen)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := routes.Handler(r); pattern == "" {
			rest.ServeHTTP(w, r)
			return
		}
		seen.add(r)
		w.Header().Set("Content-Type", "application/json")
		routes.ServeHTTP(w, r)
	})
	return serveDashboard(t, "/", h), seen, flows
}
