package orchestrator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/core"
	"github.com/chiffon-dev/chiffon/orchestrator/httplimit"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// maxBody bounds a request body.
const maxBody = 1 << 20

func (o *Orchestrator) newAPI() http.Handler {
	mux := http.NewServeMux()
	o.mux = mux
	o.streams = httplimit.NewStreamLimiter(o.cfg.HTTP.Limits, func(r *http.Request) string { return CallerOf(r.Context()) })
	route := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, o.requireToken(h)) }
	// A standby forwards what needs the core to the leader (forward.go); the
	// reads come from the store.
	route("POST /api/v1/tasks", operatorOnly(o.leaderOnly(o.apiSubmit)))
	route("GET /api/v1/tasks", o.apiList)
	route("GET /api/v1/tasks/{id}", o.withTask(func(w http.ResponseWriter, _ *http.Request, id string) {
		t, err := o.Task(id)
		if err != nil {
			writeTaskErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, t)
	}))
	route("GET /api/v1/tasks/{id}/output", o.withTask(o.apiOutput))
	route("GET /api/v1/tasks/{id}/events", o.streams.Stream(o.withTask(o.serveEvents)))
	route("GET /api/v1/tasks/{id}/history", o.withTask(o.apiHistory))
	route("POST /api/v1/tasks/{id}/cancel", operatorOnly(o.leaderOnly(o.withTask(o.apiCancel))))
	route("POST /api/v1/tasks/{id}/approve", operatorOnly(o.leaderOnly(o.withTask(o.apiDecide(true)))))
	route("POST /api/v1/tasks/{id}/reject", operatorOnly(o.leaderOnly(o.withTask(o.apiDecide(false)))))
	route("GET /api/v1/agents", o.leaderOnly(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, o.Agents()) }))
	route("GET /api/v1/webhooks/deliveries", o.leaderOnly(o.apiDeliveries))
	o.routeFleet(route)
	route("/api/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "", "no such API endpoint")
	})
	// The API's own description is open, as the probes are: it says what the API
	// looks like, as the repository does, and nothing of its tasks or agents; client
	// generators and documentation viewers fetch it without credentials.
	mux.HandleFunc("GET /api/v1/openapi.json", serveOpenAPI)
	// /livez is the liveness probe (Kubernetes' name); /healthz is kept for existing
	// checks. Both answer while the process serves HTTP, even closed or cut off from
	// NATS, so a prober restarts the process only when it hangs: /readyz is for traffic.
	alive := func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
	mux.HandleFunc("GET /livez", alive)
	mux.HandleFunc("GET /healthz", alive)
	// In a group, a standby is ready too (it serves reads and forwards the
	// rest), and the answer says which one leads.
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		status, code := "ready", http.StatusOK
		if !o.Ready() {
			status, code = "not ready", http.StatusServiceUnavailable
		}
		writeJSON(w, code, api.Readiness{Status: status, Role: o.Role()})
	})
	mux.Handle("GET /metrics", o.metrics.Handler())
	return mux
}

// requireToken refuses a request without an API bearer token, and gives the
// handler the token's role (RoleOf).
func (o *Orchestrator) requireToken(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		name, role, known := o.identify(got)
		if !ok || !known {
			w.Header().Set("WWW-Authenticate", `Bearer realm="chiffon"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "Authorization", "a valid bearer token is required")
			return
		}
		h.ServeHTTP(w, r.WithContext(WithCaller(WithRole(r.Context(), role), name)))
	})
}

// withTask checks the {id} path value is a task id.
func (o *Orchestrator) withTask(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := envelope.ParseID(r.PathValue("id"))
		if !ok {
			writeError(w, http.StatusBadRequest, "invalid_field", "id", "must be a task id (a UUID)")
			return
		}
		h(w, r, id)
	}
}

func (o *Orchestrator) apiSubmit(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitRequest
	if !decodeBody(w, r, &req) {
		return
	}
	t, err := o.Submit(r.Context(), req)
	if err != nil {
		writeRequestErr(w, err)
		return
	}
	w.Header().Set("Location", "/api/v1/tasks/"+t.ID)
	writeJSON(w, http.StatusCreated, t)
}

// writeDecodeErr answers a body that is not a valid submission, naming the field.
func writeDecodeErr(w http.ResponseWriter, err error) {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", "", fmt.Sprintf("body over %d bytes", maxBody))
	case errors.As(err, &te):
		writeError(w, http.StatusBadRequest, "invalid_field", te.Field, fmt.Sprintf("must be %s, got %s", jsonKind(te.Type.Kind().String()), te.Value))
	case errors.As(err, &se), errors.Is(err, io.ErrUnexpectedEOF):
		writeError(w, http.StatusBadRequest, "invalid_json", "", "body is not valid JSON: "+err.Error())
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "invalid_json", "", "body is empty")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		writeError(w, http.StatusBadRequest, "unknown_field", field, "unknown field")
	default:
		writeError(w, http.StatusBadRequest, "invalid_json", "", err.Error())
	}
}

func jsonKind(k string) string {
	switch k {
	case "int", "int64", "int32", "uint32", "uint64":
		return "an integer"
	case "map", "struct":
		return "an object"
	case "ptr":
		return "an object"
	}
	return "a " + k
}

func (o *Orchestrator) apiList(w http.ResponseWriter, r *http.Request) {
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
	tasks, err := o.Tasks(opts)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
		return
	}
	if tasks == nil {
		tasks = []*task.Task{}
	}
	writeJSON(w, http.StatusOK, tasks)
}

func (o *Orchestrator) apiOutput(w http.ResponseWriter, _ *http.Request, id string) {
	o.waitWritten(id) // the output placed so far is stored
	t, err := o.Task(id)
	if err != nil {
		writeTaskErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Chiffon-Output-Complete", strconv.FormatBool(t.OutputComplete))
	w.Header().Set("X-Chiffon-Task-State", string(t.State))
	if _, err := o.st.WriteOutput(id, w); err != nil {
		o.log.Warn("write output", "task_id", id, "err", err)
	}
}

func (o *Orchestrator) apiCancel(w http.ResponseWriter, r *http.Request, id string) {
	var req api.CancelRequest
	if !decodeOptional(w, r, &req) {
		return
	}
	t, err := o.Cancel(r.Context(), id, req.Reason)
	var fe *api.FieldError
	switch {
	case errors.As(err, &fe):
		writeError(w, http.StatusBadRequest, "invalid_field", fe.Field, fe.Message)
	case errors.Is(err, core.ErrFinished):
		writeError(w, http.StatusConflict, "finished", "id", fmt.Sprintf("task already %s", t.State))
	case err != nil:
		writeTaskErr(w, err)
	default:
		writeJSON(w, http.StatusAccepted, t)
	}
}

// apiHistory answers a task's audit trail: its stored events but its progress
// reports, oldest first.
func (o *Orchestrator) apiHistory(w http.ResponseWriter, _ *http.Request, id string) {
	evs, err := o.History(id)
	if err != nil {
		writeTaskErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, evs)
}

// apiDecide approves or rejects a task waiting for approval.
func (o *Orchestrator) apiDecide(approve bool) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, id string) {
		var req api.DecisionRequest
		if !decodeOptional(w, r, &req) {
			return
		}
		t, err := o.Decide(r.Context(), id, approve, req.Note)
		var fe *api.FieldError
		switch {
		case errors.As(err, &fe):
			writeError(w, http.StatusBadRequest, "invalid_field", fe.Field, fe.Message)
		case errors.Is(err, core.ErrNotAwaitingApproval):
			writeError(w, http.StatusConflict, "not_awaiting_approval", "id", fmt.Sprintf("the task is %s, not awaiting approval", t.State))
		case err != nil:
			writeTaskErr(w, err)
		default:
			writeJSON(w, http.StatusOK, t)
		}
	}
}

func writeTaskErr(w http.ResponseWriter, err error) {
	if errors.Is(err, task.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "id", "no such task")
		return
	}
	writeError(w, http.StatusInternalServerError, "internal", "", err.Error())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, field, msg string) {
	api.WriteError(w, status, code, field, msg)
}
