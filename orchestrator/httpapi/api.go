// Package httpapi is the orchestrator's HTTP API: the /api/v1 routes, the API
// tokens and their roles, the Server-Sent Events of tasks, batches and
// workflow runs, the OpenAPI document, the probes and metrics, and a standby's
// forwarding of what needs the core to the leader over NATS. It serves a Backend, a Fleet and a
// Store, which package orchestrator implements; it does not import it.
package httpapi

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/internal/ratelog"
	"github.com/chiffon-dev/chiffon/orchestrator/httplimit"
	"github.com/nats-io/nats.go"
)

// maxBody bounds a request body.
const maxBody = 1 << 20

// Params is what an API serves and how.
type Params struct {
	// Backend is the orchestrator's core.
	Backend Backend
	// Fleet runs the batches and the schedules.
	Fleet Fleet
	// Enrollments enrolls, joins and revokes agent hosts; nil when the
	// orchestrator cannot.
	Enrollments Enrollments
	// Store is the task store, which the event streams follow.
	Store Store
	// Tokens are the API tokens; the first is api_token_file's, an operator's.
	Tokens []Token
	// Limits bound the event streams, per token and in all.
	Limits httplimit.Limits
	// Metrics serves GET /metrics.
	Metrics http.Handler
	// InGroup says the orchestrator is one of a group (ha.enabled): a stream of
	// a task it does not run follows the store.
	InGroup bool
	// Serving reports whether this orchestrator runs the core; when not, what
	// needs the core is forwarded to the leader. nil means always.
	Serving func() bool
	// Done is closed when the orchestrator closes; it ends the event streams.
	Done <-chan struct{}
	// Log receives the API's logs; nil means slog.Default().
	Log *slog.Logger
	// AuthLog logs refused answers at a bounded rate; nil means one over Log.
	AuthLog *ratelog.Logger
	// Forward is how a standby reaches the leader.
	Forward Forward
}

// Forward is how a standby forwards requests to the leader, and how the leader
// answers them (forward.go).
type Forward struct {
	// Conn publishes the leader's answers.
	Conn *nats.Conn
	// Requester sends a standby's requests and takes their answers.
	Requester *broker.Requester
	// Subjects names the group's subjects.
	Subjects broker.Subjects
	// OrchID is the group's orch_id.
	OrchID string
	// Signer signs and checks the answers.
	Signer Signer
}

// API is the HTTP API of one orchestrator. Its methods are safe for concurrent use.
type API struct {
	core    Backend
	fleet   Fleet
	enroll  Enrollments
	st      Store
	tokens  []Token
	inGroup bool
	serving func() bool
	done    <-chan struct{}
	log     *slog.Logger
	authLog *ratelog.Logger
	fwd     Forward
	mux     *http.ServeMux
	// streams caps the API's event streams (package httplimit).
	streams *httplimit.StreamLimiter
}

// New builds the API p describes.
func New(p Params) *API {
	a := &API{core: p.Backend, fleet: p.Fleet, enroll: p.Enrollments, st: p.Store, tokens: p.Tokens, inGroup: p.InGroup,
		serving: p.Serving, done: p.Done, log: p.Log, authLog: p.AuthLog, fwd: p.Forward}
	if a.serving == nil {
		a.serving = func() bool { return true }
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.authLog == nil {
		a.authLog = ratelog.New(a.log, ratelog.Policy{})
	}
	a.streams = httplimit.NewStreamLimiter(p.Limits, func(r *http.Request) string { return CallerOf(r.Context()) })
	a.mux = a.routes(p.Metrics)
	return a
}

// Handler returns the API's handler, the ServeMux of its routes.
func (a *API) Handler() http.Handler { return a.mux }

// MountPages serves the handler pages makes at path, beside the API: pages gets
// the API, the check of an API token (Authenticate) and the path.
func (a *API) MountPages(path string, pages func(http.Handler, func(string) (string, bool), string) (http.Handler, error)) error {
	h, err := pages(a.mux, a.Authenticate, path)
	if err != nil {
		return err
	}
	if path != "/" {
		h = http.StripPrefix(strings.TrimSuffix(path, "/"), h)
	}
	a.mux.Handle(path, h)
	return nil
}

// routes registers every route of the API on a new ServeMux.
func (a *API) routes(metrics http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	route := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, a.requireToken(h)) }
	// A standby forwards what needs the core to the leader (forward.go); the
	// reads come from the store.
	route("POST /api/v1/tasks", operatorOnly(a.leaderOnly(a.apiSubmit)))
	route("GET /api/v1/tasks", a.apiList)
	route("GET /api/v1/tasks/{id}", a.withTask(func(w http.ResponseWriter, _ *http.Request, id string) {
		t, err := a.core.Task(id)
		if err != nil {
			writeTaskErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, t)
	}))
	route("GET /api/v1/tasks/{id}/output", a.withTask(a.apiOutput))
	route("GET /api/v1/tasks/{id}/events", a.streams.Stream(a.withTask(a.serveEvents)))
	route("GET /api/v1/tasks/{id}/history", a.withTask(a.apiHistory))
	route("POST /api/v1/tasks/{id}/cancel", operatorOnly(a.leaderOnly(a.withTask(a.apiCancel))))
	route("POST /api/v1/tasks/{id}/approve", operatorOnly(a.leaderOnly(a.withTask(a.apiDecide(true)))))
	route("POST /api/v1/tasks/{id}/reject", operatorOnly(a.leaderOnly(a.withTask(a.apiDecide(false)))))
	route("GET /api/v1/agents", a.leaderOnly(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, a.core.Agents()) }))
	route("GET /api/v1/work-types", a.leaderOnly(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, a.core.WorkTypes())
	}))
	route("GET /api/v1/work-types/{agent_type}/{work_type}", a.leaderOnly(a.apiWorkType))
	route("GET /api/v1/webhooks/deliveries", a.leaderOnly(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, a.core.Deliveries())
	}))
	a.routeFleet(route)
	a.routeWorkflows(route)
	a.routeEnrollments(route)
	route("/api/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "", "no such API endpoint")
	})
	// The API's own description is open, as the probes are: it says what the API
	// looks like, as the repository does, and nothing of its tasks or agents; client
	// generators and documentation viewers fetch it without credentials.
	mux.HandleFunc("GET /api/v1/openapi.json", serveOpenAPI)
	// A joining host has no API token: its one-time code is its credential
	// (enroll.go).
	mux.HandleFunc("POST /api/v1/join", a.apiJoin)
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
		if !a.core.Ready() {
			status, code = "not ready", http.StatusServiceUnavailable
		}
		writeJSON(w, code, api.Readiness{Status: status, Role: a.core.Role()})
	})
	mux.Handle("GET /metrics", metrics)
	return mux
}
