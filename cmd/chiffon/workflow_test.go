package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/internal/taskview"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// `chiffon workflow` is package workflowcli's (tested there against a whole
// Chiffon); these tests check what this package gives it: the exit codes
// of submit --wait, the client flags, --json errors, and that its --wait
// follows a broken stream.

const runID = "33333333-3333-4333-8333-333333333333"

// testRun is run runID in state, its step check in checkState with task A.
func testRun(state api.RunState, checkState api.StepState) *api.WorkflowRun {
	r := &api.WorkflowRun{ID: runID, Workflow: "deploy", State: state, CreatedAt: batchCreated,
		Steps: []api.StepRun{{Name: "check", State: checkState, TaskID: taskA}}}
	if state.Final() {
		at := batchCreated.Add(time.Minute)
		r.FinishedAt = &at
	}
	return r
}

// runStreamAPI serves run runID: no workflow of its name, its event stream
// (the runs events gives, by how many streams were opened before; nil: 503),
// the run as get gives it (nil: 503), and task A as taskState with exit
// code 3.
func runStreamAPI(t *testing.T, rec *recorder, events func(n int) []*api.WorkflowRun, get func(n int) *api.WorkflowRun,
	taskState task.State) []string {
	t.Helper()
	var mu sync.Mutex
	streams, gets := 0, 0
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/workflows/{name}", func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		writeAPIError(w, http.StatusNotFound, "not_found", "name", "no such workflow")
	})
	mux.HandleFunc("GET /api/v1/workflow-runs/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		mu.Lock()
		n := streams
		streams++
		mu.Unlock()
		runs := events(n)
		if runs == nil {
			writeAPIError(w, http.StatusServiceUnavailable, "unavailable", "", "no leader")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i, run := range runs {
			data, _ := json.Marshal(run)
			fmt.Fprintf(w, "id: %d\nevent: run\ndata: %s\n\n", i+1, data)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("GET /api/v1/workflow-runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		if r.PathValue("id") != runID {
			writeAPIError(w, http.StatusNotFound, "not_found", "id", "no such workflow run")
			return
		}
		mu.Lock()
		n := gets
		gets++
		mu.Unlock()
		if run := get(n); run != nil {
			writeAPIJSON(w, http.StatusOK, run)
			return
		}
		writeAPIError(w, http.StatusServiceUnavailable, "unavailable", "", "no leader")
	})
	mux.HandleFunc("GET /api/v1/tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		writeAPIJSON(w, http.StatusOK, &task.Task{ID: taskA, State: taskState, Result: &task.Result{ExitCode: 3}})
	})
	return serveAPI(t, mux)
}

// TestWorkflowRunWaitExitsAsSubmitWaitDoes: a failed run exits as its failed
// step's failed task (its exit code 3), a cancelled one 130, a succeeded one
// 0; a stream that breaks is opened again until the run's end.
func TestWorkflowRunWaitExitsAsSubmitWaitDoes(t *testing.T) {
	clearClientEnv(t)
	running := testRun(api.RunRunning, api.StepRunning)
	cases := []struct {
		name      string
		end       *api.WorkflowRun
		taskState task.State
		code      int
	}{
		{"failed", testRun(api.RunFailed, api.StepFailed), task.StateFailed, 3},
		{"failed, its task in error", testRun(api.RunFailed, api.StepFailed), task.StateError, 1},
		{"cancelled", testRun(api.RunCancelled, api.StepFailed), task.StateCancelled, exitTaskCancelled},
		{"succeeded", testRun(api.RunSucceeded, api.StepSucceeded), task.StateSucceeded, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			// The first stream ends early (an orchestrator restarting): it is
			// opened again, and shows the end.
			server := runStreamAPI(t, &rec, func(n int) []*api.WorkflowRun {
				if n == 0 {
					return []*api.WorkflowRun{running}
				}
				return []*api.WorkflowRun{running, tc.end}
			}, func(int) *api.WorkflowRun { return running }, tc.taskState)
			code, out, errOut := runCLI(t, "", append([]string{"workflow", "run", runID, "--wait"}, server...)...)
			if code != tc.code || !strings.Contains(out, "run "+runID+" "+string(tc.end.State)) {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			if n := rec.count("GET /api/v1/workflow-runs/" + runID + "/events"); n != 2 {
				t.Errorf("%d streams, want 2: %q", n, rec.all())
			}
		})
	}
}

// TestWorkflowRunWaitStopsWhenTheOrchestratorStaysAway: exit 75, as a task's
// or a batch's wait, saying how to follow the run again.
func TestWorkflowRunWaitStopsWhenTheOrchestratorStaysAway(t *testing.T) {
	clearClientEnv(t)
	old := taskview.BatchGiveUp
	taskview.BatchGiveUp = 300 * time.Millisecond
	t.Cleanup(func() { taskview.BatchGiveUp = old })
	var rec recorder
	running := testRun(api.RunRunning, api.StepRunning)
	server := runStreamAPI(t, &rec, func(int) []*api.WorkflowRun { return nil }, func(n int) *api.WorkflowRun {
		if n == 0 { // run ID finds it, then the orchestrator is gone
			return running
		}
		return nil
	}, task.StateRunning)
	code, _, errOut := runCLI(t, "", append([]string{"workflow", "run", runID, "--wait"}, server...)...)
	if code != exitNotFinished || !strings.Contains(errOut, "no answer from the orchestrator") ||
		!strings.Contains(errOut, "chiffon workflow run "+runID+" --wait") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if rec.count("GET /api/v1/workflow-runs/"+runID+"/events") < 2 {
		t.Errorf("not retried: %q", rec.all())
	}
}

// TestWorkflowErrorsAsJSON: a --param the workflow refuses exits 65 and, with
// --json, says so as the API's error; a usage mistake exits 2.
func TestWorkflowErrorsAsJSON(t *testing.T) {
	clearClientEnv(t)
	var rec recorder
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/workflows/{name}", func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		// n as the CLI sees it; count as the orchestrator's check refuses it.
		writeAPIJSON(w, http.StatusOK, &api.Workflow{WorkflowSpec: api.WorkflowSpec{Name: "deploy",
			Params: map[string]api.WorkflowParam{"n": {Type: "integer"}, "count": {}}}, Source: api.WorkflowFromAPI})
	})
	mux.HandleFunc("POST /api/v1/workflows/{name}/runs", func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		writeAPIError(w, http.StatusBadRequest, "invalid_field", "params.count", "must be an integer")
	})
	server := serveAPI(t, mux)
	code, _, errOut := runCLI(t, "", append([]string{"workflow", "run", "deploy", "--param", "n=many", "--json"}, server...)...)
	var got errorJSON
	if code != exitParamError || json.Unmarshal([]byte(errOut), &got) != nil || got.Error.Code != "invalid_field" ||
		got.Error.Field != "params.n" || got.Error.ExitCode != exitParamError || rec.count("POST") != 0 {
		t.Fatalf("a --param the CLI refuses, --json: exit %d %s", code, errOut)
	}
	code, _, errOut = runCLI(t, "", append([]string{"workflow", "run", "deploy", "--param", "count=x", "--json"}, server...)...)
	if code != exitParamError || json.Unmarshal([]byte(errOut), &got) != nil || got.Error.Code != "invalid_field" ||
		got.Error.Field != "params.count" || got.Error.HTTPStatus != http.StatusBadRequest || got.Error.ExitCode != exitParamError {
		t.Fatalf("a --param the orchestrator refuses, --json: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", append([]string{"workflow", "run", "deploy", "--param", "count"}, server...)...); code != 2 {
		t.Fatalf("a malformed --param: exit %d %s", code, errOut)
	}
	if code, _, _ := runCLI(t, "", append([]string{"workflow", "approve", runID}, server...)...); code != 2 {
		t.Fatalf("approve without its step: exit %d", code)
	}
}

// TestScheduleAddOfAWorkflow: --workflow makes a schedule of runs of it, its
// --param typed by the workflow's parameters; the task's and the batch's
// flags are refused with it, and one of the two is asked for; show says
// what it makes and the run it made last.
func TestScheduleAddOfAWorkflow(t *testing.T) {
	clearClientEnv(t)
	var rec recorder
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/workflows/{name}", func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		if r.PathValue("name") != "deploy" {
			writeAPIError(w, http.StatusNotFound, "not_found", "name", "no such workflow")
			return
		}
		writeAPIJSON(w, http.StatusOK, &api.Workflow{WorkflowSpec: api.WorkflowSpec{Name: "deploy",
			Params: map[string]api.WorkflowParam{"n": {Type: "integer"}, "env": {Required: true}}}, Source: api.WorkflowFromAPI})
	})
	mux.HandleFunc("POST /api/v1/schedules", func(w http.ResponseWriter, r *http.Request) {
		var spec api.ScheduleSpec
		_ = json.Unmarshal([]byte(rec.add(r)), &spec)
		writeAPIJSON(w, http.StatusCreated, &api.Schedule{ScheduleSpec: spec, CreatedAt: schedCreated, Next: &schedNext})
	})
	server := serveAPI(t, mux)
	add := []string{"schedule", "add", "nightly", "--cron", "@daily"}
	code, out, errOut := runCLI(t, "", append(append(add, "--workflow", "deploy", "--param", "n=5", "--param", "env=prod"), server...)...)
	if code != 0 || !strings.HasPrefix(out, "schedule nightly added; next at") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	posts := []string{}
	for _, r := range rec.all() {
		if body, ok := strings.CutPrefix(r, "POST /api/v1/schedules "); ok {
			posts = append(posts, body)
		}
	}
	if len(posts) != 1 {
		t.Fatalf("requests %q, want one POST", rec.all())
	}
	jsonEqual(t, posts[0], map[string]any{"name": "nightly", "cron": "@daily", "catch_up": "none",
		"workflow": map[string]any{"name": "deploy", "params": map[string]any{"n": 5, "env": "prod"}}})

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--workflow", "deploy", "--to", "infra"}, 2, "--workflow: not with --to"},
		{[]string{"--workflow", "deploy", "--all"}, 2, "--workflow: not with"},
		{nil, 2, `required flag(s) "to", "work-type" not set`},
		{[]string{"--workflow", "nope"}, 1, `no workflow named "nope"`},
		{[]string{"--workflow", "No.Pe"}, 2, "--workflow: must name a workflow"},
		{[]string{"--workflow", "deploy", "--param", "n=many", "--param", "env=prod"}, exitParamError, "--param n"},
		{[]string{"--workflow", "deploy", "--param", "n=5"}, exitParamError, "--param env: is required"},
	} {
		code, _, errOut := runCLI(t, "", append(append(add, tc.args...), server...)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("schedule add %v: exit %d %q, want %d naming %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}

	s := &api.Schedule{ScheduleSpec: api.ScheduleSpec{Name: "nightly", Cron: "@daily",
		Workflow: &api.ScheduleWorkflow{Name: "deploy", Params: map[string]any{"n": 5}}}, CreatedAt: schedCreated,
		Last: &api.Firing{At: schedLast, RunID: runID}}
	_, server = newScheduleAPI(t, s)
	code, out, errOut = runCLI(t, "", append([]string{"schedule", "show", "nightly"}, server...)...)
	for _, want := range []string{"Makes:       a run of workflow deploy", `Parameters:  {"n":5}`, "workflow run " + runID} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("schedule show: exit %d, no %q in\n%s%s", code, want, out, errOut)
		}
	}
	code, out, _ = runCLI(t, "", append([]string{"schedule", "list"}, server...)...)
	if code != 0 || !strings.Contains(out, "workflow deploy") {
		t.Fatalf("schedule list: exit %d\n%s", code, out)
	}
}
