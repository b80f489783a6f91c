package orchestrator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// batchPoll is how often a batch's event stream looks at the batch besides the
// changes the runner tells of: a task's progress, and on a standby everything.
const batchPoll = 500 * time.Millisecond

// routeFleet serves the batch and schedule endpoints on mux.
func (o *Orchestrator) routeFleet(route func(string, http.HandlerFunc)) {
	route("POST /api/v1/batches", operatorOnly(o.leaderOnly(o.apiCreateBatch)))
	route("GET /api/v1/batches", o.apiBatches)
	route("GET /api/v1/batches/{id}", o.withBatch(func(w http.ResponseWriter, _ *http.Request, b *api.Batch) {
		writeJSON(w, http.StatusOK, b)
	}))
	route("GET /api/v1/batches/{id}/events", o.streams.Stream(o.withBatch(o.serveBatchEvents)))
	route("POST /api/v1/batches/{id}/approve", operatorOnly(o.leaderOnly(o.withBatch(o.apiDecideBatch(true)))))
	route("POST /api/v1/batches/{id}/reject", operatorOnly(o.leaderOnly(o.withBatch(o.apiDecideBatch(false)))))
	route("POST /api/v1/schedules", operatorOnly(o.leaderOnly(o.apiAddSchedule)))
	route("GET /api/v1/schedules", func(w http.ResponseWriter, _ *http.Request) {
		list, err := o.Schedules()
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, list)
	})
	route("GET /api/v1/schedules/{name}", func(w http.ResponseWriter, r *http.Request) {
		s, err := o.GetSchedule(r.PathValue("name"))
		writeSchedule(w, http.StatusOK, s, err)
	})
	route("POST /api/v1/schedules/{name}/pause", operatorOnly(o.leaderOnly(o.apiPause(true))))
	route("POST /api/v1/schedules/{name}/resume", operatorOnly(o.leaderOnly(o.apiPause(false))))
	route("DELETE /api/v1/schedules/{name}", operatorOnly(o.leaderOnly(func(w http.ResponseWriter, r *http.Request) {
		if err := o.RemoveSchedule(r.PathValue("name")); err != nil {
			writeSchedule(w, 0, nil, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})))
}

// decodeBody decodes a request's JSON body into v strictly: no unknown field,
// one value. It answers the error itself and reports false.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		writeDecodeErr(w, err)
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "invalid_json", "", "body holds more than one JSON value")
		return false
	}
	return true
}

// decodeOptional decodes a request's optional JSON body into v, as decodeBody
// does; an empty body leaves v as it is.
func decodeOptional(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		writeDecodeErr(w, err)
		return false
	}
	return true
}

// writeRequestErr answers an error of a request that makes something.
func writeRequestErr(w http.ResponseWriter, err error) {
	var fe *api.FieldError
	var tle *TooLargeError
	switch {
	case errors.As(err, &fe):
		writeError(w, http.StatusBadRequest, "invalid_field", fe.Field, fe.Message)
	case errors.As(err, &tle):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", "parameters", tle.Error())
	case errors.Is(err, ErrClosed):
		writeError(w, http.StatusServiceUnavailable, "unavailable", "", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
	}
}

func (o *Orchestrator) apiCreateBatch(w http.ResponseWriter, r *http.Request) {
	var req api.BatchRequest
	if !decodeBody(w, r, &req) {
		return
	}
	b, err := o.CreateBatch(r.Context(), req)
	switch {
	case errors.Is(err, ErrBatchNoTargets):
		writeError(w, http.StatusUnprocessableEntity, "no_agents", "",
			fmt.Sprintf("no %s agent matches: none is known with those labels and ids", req.ToAgent))
	case err != nil:
		writeRequestErr(w, err)
	default:
		w.Header().Set("Location", "/api/v1/batches/"+b.ID)
		writeJSON(w, http.StatusCreated, b)
	}
}

func (o *Orchestrator) apiBatches(w http.ResponseWriter, r *http.Request) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, "invalid_field", "limit", "must be an integer from 1 to 1000")
			return
		}
		limit = n
	}
	list, err := o.Batches(limit)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// withBatch reads the batch the {id} path value names.
func (o *Orchestrator) withBatch(h func(http.ResponseWriter, *http.Request, *api.Batch)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := envelope.ParseID(r.PathValue("id"))
		if !ok {
			writeError(w, http.StatusBadRequest, "invalid_field", "id", "must be a batch id (a UUID)")
			return
		}
		b, err := o.GetBatch(id)
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
func (o *Orchestrator) serveBatchEvents(w http.ResponseWriter, req *http.Request, b *api.Batch) {
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
		changed := o.fleet.Changes()
		select {
		case <-req.Context().Done():
			return
		case <-changed:
		case <-tick.C:
		}
		if b, err = o.GetBatch(b.ID); err != nil {
			return
		}
	}
}

// apiDecideBatch approves or rejects a batch waiting for approval.
func (o *Orchestrator) apiDecideBatch(approve bool) func(http.ResponseWriter, *http.Request, *api.Batch) {
	return func(w http.ResponseWriter, r *http.Request, b *api.Batch) {
		var req api.DecisionRequest
		if !decodeOptional(w, r, &req) {
			return
		}
		got, err := o.DecideBatch(r.Context(), b.ID, approve, req.Note)
		switch {
		case errors.Is(err, ErrNotAwaitingApproval):
			writeError(w, http.StatusConflict, "not_awaiting_approval", "id", fmt.Sprintf("the batch is %s, not awaiting approval", b.State))
		case err != nil:
			writeRequestErr(w, err)
		default:
			writeJSON(w, http.StatusOK, got)
		}
	}
}

func (o *Orchestrator) apiAddSchedule(w http.ResponseWriter, r *http.Request) {
	var spec api.ScheduleSpec
	if !decodeBody(w, r, &spec) {
		return
	}
	s, err := o.AddSchedule(spec)
	if err == nil {
		w.Header().Set("Location", "/api/v1/schedules/"+s.Name)
	}
	writeSchedule(w, http.StatusCreated, s, err)
}

func (o *Orchestrator) apiPause(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := o.PauseSchedule(r.PathValue("name"), pause)
		writeSchedule(w, http.StatusOK, s, err)
	}
}

// writeSchedule answers s with status, or err.
func writeSchedule(w http.ResponseWriter, status int, s *api.Schedule, err error) {
	switch {
	case errors.Is(err, task.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "name", "no such schedule")
	case errors.Is(err, ErrScheduleExists):
		writeError(w, http.StatusConflict, "exists", "name", "a schedule of that name exists; remove it first")
	case err != nil:
		writeRequestErr(w, err)
	default:
		writeJSON(w, status, s)
	}
}
