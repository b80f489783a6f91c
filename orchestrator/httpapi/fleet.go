package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// batchPoll is how often a batch's event stream looks at the batch besides the
// changes the runner tells of: a task's progress, and on a standby everything.
const batchPoll = 500 * time.Millisecond

// routeFleet serves the batch and schedule endpoints on mux.
func (a *API) routeFleet(route func(string, http.HandlerFunc)) {
	route("POST /api/v1/batches", operatorOnly(a.leaderOnly(a.apiCreateBatch)))
	route("GET /api/v1/batches", a.apiBatches)
	route("GET /api/v1/batches/{id}", a.withBatch(func(w http.ResponseWriter, _ *http.Request, b *api.Batch) {
		writeJSON(w, http.StatusOK, b)
	}))
	route("GET /api/v1/batches/{id}/events", a.streams.Stream(a.withBatch(a.serveBatchEvents)))
	route("POST /api/v1/batches/{id}/approve", operatorOnly(a.leaderOnly(a.withBatch(a.apiDecideBatch(true)))))
	route("POST /api/v1/batches/{id}/reject", operatorOnly(a.leaderOnly(a.withBatch(a.apiDecideBatch(false)))))
	route("POST /api/v1/schedules", operatorOnly(a.leaderOnly(a.apiAddSchedule)))
	route("GET /api/v1/schedules", func(w http.ResponseWriter, _ *http.Request) {
		list, err := a.fleet.Schedules()
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, list)
	})
	route("GET /api/v1/schedules/{name}", func(w http.ResponseWriter, r *http.Request) {
		s, err := a.fleet.GetSchedule(r.PathValue("name"))
		writeSchedule(w, http.StatusOK, s, err)
	})
	route("POST /api/v1/schedules/{name}/pause", operatorOnly(a.leaderOnly(a.apiPause(true))))
	route("POST /api/v1/schedules/{name}/resume", operatorOnly(a.leaderOnly(a.apiPause(false))))
	route("DELETE /api/v1/schedules/{name}", operatorOnly(a.leaderOnly(func(w http.ResponseWriter, r *http.Request) {
		if err := a.fleet.RemoveSchedule(r.PathValue("name")); err != nil {
			writeSchedule(w, 0, nil, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})))
}

func (a *API) apiCreateBatch(w http.ResponseWriter, r *http.Request) {
	var req api.BatchRequest
	if !decodeBody(w, r, &req) {
		return
	}
	b, err := a.fleet.CreateBatch(r.Context(), req, CallerOf(r.Context()))
	switch {
	case errors.Is(err, api.ErrBatchNoTargets):
		writeError(w, http.StatusUnprocessableEntity, "no_agents", "",
			fmt.Sprintf("no %s agent matches: none is known with those labels and ids", req.ToAgent))
	case err != nil:
		writeRequestErr(w, err)
	default:
		w.Header().Set("Location", "/api/v1/batches/"+b.ID)
		writeJSON(w, http.StatusCreated, b)
	}
}

func (a *API) apiBatches(w http.ResponseWriter, r *http.Request) {
	limit, ok := queryLimit(w, r)
	if !ok {
		return
	}
	list, err := a.fleet.Batches(limit)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// queryLimit reads the ?limit= of a list, 1 to 1000 (0 when absent: the
// list's default); it answers a bad one itself and reports false.
func queryLimit(w http.ResponseWriter, r *http.Request) (int, bool) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		writeError(w, http.StatusBadRequest, "invalid_field", "limit", "must be an integer from 1 to 1000")
		return 0, false
	}
	return n, true
}

// withBatch reads the batch the {id} path value names: its id, its short id or
// a prefix of it.
func (a *API) withBatch(h func(http.ResponseWriter, *http.Request, *api.Batch)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := resolveID(w, r.PathValue("id"), "batch", a.fleet.BatchIDs)
		if !ok {
			return
		}
		b, err := a.fleet.GetBatch(id)
		switch {
		case errors.Is(err, task.ErrNotFound):
			writeError(w, http.StatusNotFound, "not_found", "id", "no such batch")
		case err != nil:
			writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
		default:
			h(w, r, b)
		}
	}
}

// serveBatchEvents streams batch b as it changes: a "batch" event with the whole
// batch each time, the last once its end is stored.
func (a *API) serveBatchEvents(w http.ResponseWriter, req *http.Request, b *api.Batch) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", "", "streaming unsupported")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(batchPoll)
	defer tick.Stop()
	var sent []byte
	for n := 1; ; n++ {
		data, err := json.Marshal(b)
		if err != nil {
			return
		}
		if !bytes.Equal(data, sent) {
			if _, err := fmt.Fprintf(w, "id: %d\nevent: batch\ndata: %s\n\n", n, data); err != nil {
				return
			}
			flusher.Flush()
			sent = data
		}
		if b.FinishedAt != nil {
			return
		}
		changed := a.fleet.BatchChanges()
		select {
		case <-req.Context().Done():
			return
		case <-changed:
		case <-tick.C:
		}
		if b, err = a.fleet.GetBatch(b.ID); err != nil {
			return
		}
	}
}

// apiDecideBatch approves or rejects a batch waiting for approval.
func (a *API) apiDecideBatch(approve bool) func(http.ResponseWriter, *http.Request, *api.Batch) {
	return func(w http.ResponseWriter, r *http.Request, b *api.Batch) {
		var req api.DecisionRequest
		if !decodeOptional(w, r, &req) {
			return
		}
		got, err := a.fleet.DecideBatch(r.Context(), b.ID, approve, req.Note, CallerOf(r.Context()))
		switch {
		case errors.Is(err, api.ErrNotAwaitingApproval):
			writeError(w, http.StatusConflict, "not_awaiting_approval", "id", fmt.Sprintf("the batch is %s, not awaiting approval", b.State))
		case err != nil:
			writeRequestErr(w, err)
		default:
			writeJSON(w, http.StatusOK, got)
		}
	}
}

func (a *API) apiAddSchedule(w http.ResponseWriter, r *http.Request) {
	var spec api.ScheduleSpec
	if !decodeBody(w, r, &spec) {
		return
	}
	s, err := a.fleet.AddSchedule(spec)
	if err == nil {
		w.Header().Set("Location", "/api/v1/schedules/"+s.Name)
	}
	writeSchedule(w, http.StatusCreated, s, err)
}

func (a *API) apiPause(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := a.fleet.PauseSchedule(r.PathValue("name"), pause)
		writeSchedule(w, http.StatusOK, s, err)
	}
}

// writeSchedule answers s with status, or err.
func writeSchedule(w http.ResponseWriter, status int, s *api.Schedule, err error) {
	switch {
	case errors.Is(err, task.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "name", "no such schedule")
	case errors.Is(err, api.ErrScheduleExists):
		writeError(w, http.StatusConflict, "exists", "name", "a schedule of that name exists; remove it first")
	case err != nil:
		writeRequestErr(w, err)
	default:
		writeJSON(w, status, s)
	}
}
