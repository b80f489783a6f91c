package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// runPoll is how often a run's event stream looks at the run besides the
// changes the fleet tells of: on a standby, whose fleet tells of none, it is
// how the stream follows the leader's writes.
const runPoll = 500 * time.Millisecond

// routeWorkflows serves the workflow and workflow run endpoints. Operators
// change and run workflows, viewers read them; what changes goes to the leader
// (leaderOnly), the reads come from the store.
func (a *API) routeWorkflows(route func(string, http.HandlerFunc)) {
	route("GET /api/v1/workflows", func(w http.ResponseWriter, _ *http.Request) {
		list, err := a.fleet.Workflows()
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, list)
	})
	route("GET /api/v1/workflows/{name}", func(w http.ResponseWriter, r *http.Request) {
		wf, err := a.fleet.GetWorkflow(r.PathValue("name"))
		if err != nil && !errors.Is(err, task.ErrNotFound) {
			writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
			return
		}
		writeWorkflow(w, http.StatusOK, wf, err)
	})
	route("PUT /api/v1/workflows/{name}", operatorOnly(a.leaderOnly(a.apiPutWorkflow)))
	route("DELETE /api/v1/workflows/{name}", operatorOnly(a.leaderOnly(func(w http.ResponseWriter, r *http.Request) {
		if err := a.fleet.DeleteWorkflow(r.PathValue("name")); err != nil {
			writeWorkflow(w, 0, nil, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})))
	route("POST /api/v1/workflows/{name}/runs", operatorOnly(a.leaderOnly(a.apiStartRun)))
	route("GET /api/v1/workflow-runs", a.apiRuns)
	route("GET /api/v1/workflow-runs/{id}", a.withRun(func(w http.ResponseWriter, _ *http.Request, run *api.WorkflowRun) {
		writeJSON(w, http.StatusOK, run)
	}))
	route("GET /api/v1/workflow-runs/{id}/events", a.streams.Stream(a.withRun(a.serveRunEvents)))
	route("POST /api/v1/workflow-runs/{id}/cancel", operatorOnly(a.leaderOnly(a.withRun(a.apiCancelRun))))
	route("POST /api/v1/workflow-runs/{id}/steps/{step}/approve", operatorOnly(a.leaderOnly(a.withRun(a.apiDecideStep(true)))))
	route("POST /api/v1/workflow-runs/{id}/steps/{step}/reject", operatorOnly(a.leaderOnly(a.withRun(a.apiDecideStep(false)))))
}

// apiPutWorkflow stores the spec of the body under the path's name: a body
// without a name takes it, one with another is refused.
func (a *API) apiPutWorkflow(w http.ResponseWriter, r *http.Request) {
	var spec api.WorkflowSpec
	if !decodeBody(w, r, &spec) {
		return
	}
	name := r.PathValue("name")
	switch spec.Name {
	case "":
		spec.Name = name
	case name:
	default:
		writeError(w, http.StatusBadRequest, "invalid_field", "name",
			fmt.Sprintf("the body names workflow %q, the path %q: give one name, or none in the body", spec.Name, name))
		return
	}
	wf, err := a.fleet.PutWorkflow(spec)
	writeWorkflow(w, http.StatusOK, wf, err)
}

// writeWorkflow answers wf with status, or err.
func writeWorkflow(w http.ResponseWriter, status int, wf *api.Workflow, err error) {
	switch {
	case errors.Is(err, task.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "name", "no such workflow")
	case errors.Is(err, api.ErrWorkflowFromConfig):
		writeError(w, http.StatusConflict, "conflict", "name", err.Error())
	case err != nil:
		writeRequestErr(w, err)
	default:
		writeJSON(w, status, wf)
	}
}

// apiStartRun starts a run of the path's workflow; the body, the run's
// parameters, may be left out.
func (a *API) apiStartRun(w http.ResponseWriter, r *http.Request) {
	var req api.WorkflowRunRequest
	if !decodeOptional(w, r, &req) {
		return
	}
	run, err := a.fleet.StartRun(r.Context(), r.PathValue("name"), req, CallerOf(r.Context()))
	switch {
	case errors.Is(err, task.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "name", "no such workflow")
	case errors.Is(err, api.ErrTooManyRuns):
		writeError(w, http.StatusConflict, "too_many_runs", "name", err.Error())
	case err != nil:
		writeRequestErr(w, err)
	default:
		w.Header().Set("Location", "/api/v1/workflow-runs/"+run.ID)
		writeJSON(w, http.StatusCreated, run)
	}
}

// apiRuns lists the runs, of one workflow with ?workflow=NAME.
func (a *API) apiRuns(w http.ResponseWriter, r *http.Request) {
	limit, ok := queryLimit(w, r)
	if !ok {
		return
	}
	list, err := a.fleet.Runs(r.URL.Query().Get("workflow"), limit)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
		return
	}
	if list == nil {
		list = []*api.WorkflowRun{}
	}
	writeJSON(w, http.StatusOK, list)
}

// withRun reads the run the {id} path value names: its whole id. Anything but
// a UUID names no run.
func (a *API) withRun(h func(http.ResponseWriter, *http.Request, *api.WorkflowRun)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, _, ok := task.ParseIDRef(r.PathValue("id"))
		var run *api.WorkflowRun
		err := task.ErrNotFound
		if ok && id != "" {
			run, err = a.fleet.GetRun(id)
		}
		switch {
		case errors.Is(err, task.ErrNotFound):
			writeError(w, http.StatusNotFound, "not_found", "id", "no such workflow run")
		case err != nil:
			writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
		default:
			h(w, r, run)
		}
	}
}

// apiCancelRun asks a run to stop: 202, as it ends once its runner has
// cancelled its running steps.
func (a *API) apiCancelRun(w http.ResponseWriter, r *http.Request, run *api.WorkflowRun) {
	got, err := a.fleet.CancelRun(r.Context(), run.ID, CallerOf(r.Context()))
	switch {
	case errors.Is(err, api.ErrRunFinished):
		writeError(w, http.StatusConflict, "finished", "id", fmt.Sprintf("workflow run already %s", got.State))
	case errors.Is(err, task.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "id", "no such workflow run")
	case err != nil:
		writeRequestErr(w, err)
	default:
		writeJSON(w, http.StatusAccepted, got)
	}
}

// apiDecideStep approves or rejects a gate step of a run.
func (a *API) apiDecideStep(approve bool) func(http.ResponseWriter, *http.Request, *api.WorkflowRun) {
	return func(w http.ResponseWriter, r *http.Request, run *api.WorkflowRun) {
		var req api.DecisionRequest
		if !decodeOptional(w, r, &req) {
			return
		}
		step := r.PathValue("step")
		got, err := a.fleet.DecideStep(r.Context(), run.ID, step, approve, req.Note, CallerOf(r.Context()))
		switch {
		case errors.Is(err, api.ErrNotAwaitingApproval):
			state := api.StepState("")
			if s := got.Step(step); s != nil {
				state = s.State
			}
			writeError(w, http.StatusConflict, "not_awaiting_approval", "step",
				fmt.Sprintf("step %s of a %s run is %s, not a gate awaiting approval", step, got.State, state))
		case errors.Is(err, task.ErrNotFound):
			writeError(w, http.StatusNotFound, "not_found", "id", "no such workflow run")
		case err != nil:
			writeRequestErr(w, err)
		default:
			writeJSON(w, http.StatusOK, got)
		}
	}
}

// serveRunEvents streams run as it changes: a "run" event with the whole run
// each time, the last once its end is stored.
func (a *API) serveRunEvents(w http.ResponseWriter, req *http.Request, run *api.WorkflowRun) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", "", "streaming unsupported")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(runPoll)
	defer tick.Stop()
	var sent []byte
	// The run was read before this wait began: a change since shows at the
	// next poll. Each later read comes after its wait began.
	changed := a.fleet.RunChanges()
	for n := 1; ; n++ {
		data, err := json.Marshal(run)
		if err != nil {
			return
		}
		if !bytes.Equal(data, sent) {
			if _, err := fmt.Fprintf(w, "id: %d\nevent: run\ndata: %s\n\n", n, data); err != nil {
				return
			}
			flusher.Flush()
			sent = data
		}
		if run.State.Final() {
			return
		}
		select {
		case <-req.Context().Done():
			return
		case <-a.done:
			return
		case <-changed:
		case <-tick.C:
		}
		changed = a.fleet.RunChanges()
		if run, err = a.fleet.GetRun(run.ID); err != nil {
			return
		}
	}
}
