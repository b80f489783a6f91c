package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

func (a *API) apiSubmit(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitRequest
	if !decodeBody(w, r, &req) {
		return
	}
	t, err := a.core.Submit(r.Context(), req, CallerOf(r.Context()))
	if err != nil {
		writeRequestErr(w, err)
		return
	}
	w.Header().Set("Location", "/api/v1/tasks/"+t.ID)
	writeJSON(w, http.StatusCreated, t)
}

func (a *API) apiList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	opts := api.ListOptions{State: task.State(q.Get("state")), AgentType: envelope.AgentType(q.Get("agent_type")),
		AgentID: q.Get("agent_id"), WorkType: q.Get("work_type")}
	if opts.State != "" && !opts.State.Valid() {
		writeError(w, http.StatusBadRequest, "invalid_field", "state", "must be one of pending, dispatched, running, succeeded, failed, cancelled, error")
		return
	}
	if opts.AgentType != "" && (!opts.AgentType.Valid() || opts.AgentType == envelope.Orchestrator) {
		writeError(w, http.StatusBadRequest, "invalid_field", "agent_type", "must be one of infra, desktop, code, research")
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, "invalid_field", "limit", "must be an integer from 1 to 1000")
			return
		}
		opts.Limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100000 {
			writeError(w, http.StatusBadRequest, "invalid_field", "offset", "must be an integer from 0 to 100000")
			return
		}
		opts.Offset = n
	}
	tasks, err := a.core.Tasks(opts)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
		return
	}
	if tasks == nil {
		tasks = []*task.Task{}
	}
	writeJSON(w, http.StatusOK, tasks)
}

func (a *API) apiOutput(w http.ResponseWriter, _ *http.Request, id string) {
	a.core.WaitWritten(id) // the output placed so far is stored
	t, err := a.core.Task(id)
	if err != nil {
		writeTaskErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Chiffon-Output-Complete", strconv.FormatBool(t.OutputComplete))
	w.Header().Set("X-Chiffon-Task-State", string(t.State))
	if _, err := a.st.WriteOutput(id, w); err != nil {
		a.log.Warn("write output", "task_id", id, "err", err)
	}
}

func (a *API) apiCancel(w http.ResponseWriter, r *http.Request, id string) {
	var req api.CancelRequest
	if !decodeOptional(w, r, &req) {
		return
	}
	t, err := a.core.Cancel(r.Context(), id, req.Reason, CallerOf(r.Context()))
	var fe *api.FieldError
	switch {
	case errors.As(err, &fe):
		writeError(w, http.StatusBadRequest, "invalid_field", fe.Field, fe.Message)
	case errors.Is(err, api.ErrFinished):
		writeError(w, http.StatusConflict, "finished", "id", fmt.Sprintf("task already %s", t.State))
	case err != nil:
		writeTaskErr(w, err)
	default:
		writeJSON(w, http.StatusAccepted, t)
	}
}

// apiHistory answers a task's audit trail: its stored events but its progress
// reports, oldest first.
func (a *API) apiHistory(w http.ResponseWriter, _ *http.Request, id string) {
	evs, err := a.core.History(id)
	if err != nil {
		writeTaskErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, evs)
}

// apiDecide approves or rejects a task waiting for approval.
func (a *API) apiDecide(approve bool) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, id string) {
		var req api.DecisionRequest
		if !decodeOptional(w, r, &req) {
			return
		}
		t, err := a.core.Decide(r.Context(), id, approve, req.Note, CallerOf(r.Context()))
		var fe *api.FieldError
		switch {
		case errors.As(err, &fe):
			writeError(w, http.StatusBadRequest, "invalid_field", fe.Field, fe.Message)
		case errors.Is(err, api.ErrNotAwaitingApproval):
			writeError(w, http.StatusConflict, "not_awaiting_approval", "id", fmt.Sprintf("the task is %s, not awaiting approval", t.State))
		case err != nil:
			writeTaskErr(w, err)
		default:
			writeJSON(w, http.StatusOK, t)
		}
	}
}

// apiWorkType answers one work type of one agent type, or 404.
func (a *API) apiWorkType(w http.ResponseWriter, r *http.Request) {
	typ, name := envelope.AgentType(r.PathValue("agent_type")), r.PathValue("work_type")
	for _, wt := range a.core.WorkTypes() {
		if wt.AgentType == typ && wt.Name == name {
			writeJSON(w, http.StatusOK, wt)
			return
		}
	}
	writeError(w, http.StatusNotFound, "not_found", "work_type",
		fmt.Sprintf("no registered %s agent offers work type %q", typ, name))
}
