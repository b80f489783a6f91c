// Package ui is Chiffon's web dashboard: pages rendered on the server from
// templates embedded in the binary, over the orchestrator's HTTP API. Every read
// and every action goes through that API with the signed-in person's token, so
// the API's roles hold on the pages too, and in a group of orchestrators a
// standby forwards a submit, a cancel or an approval to the leader as it does
// for the CLI.
// Each page reads without JavaScript; with it, a task's page follows the task's
// event stream, a batch's page the batch's, a workflow run's page the run's
// (its graph drawn again on the server at each change), and the home page
// refreshes its lists.
package ui

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configures the dashboard.
type Options struct {
	// API is the orchestrator's HTTP API (orchestrator.Orchestrator.Handler).
	API http.Handler
	// Authenticate returns the role of an API token, and false for an unknown one
	// (orchestrator.Orchestrator.Authenticate).
	Authenticate func(token string) (role string, ok bool)
	// Secure marks the cookies Secure: set it when the pages are served over
	// HTTPS, such as behind a proxy that ends TLS. A request that came over TLS
	// gets Secure cookies without it.
	Secure bool
	// SessionTTL is how long a sign-in lasts; 0 means 12 hours.
	SessionTTL time.Duration
	// Logger receives the dashboard's warnings; nil means slog.Default().
	Logger *slog.Logger
	// Path is where the dashboard is mounted, ending in "/"; "" means "/". Its
	// links and cookies are under it.
	Path string
}

// UI is the dashboard, an http.Handler for the path it is mounted at.
type UI struct {
	api      http.Handler
	path     string
	auth     func(string) (string, bool)
	secure   bool
	sessions *sessions
	log      *slog.Logger
	pages    map[string]*template.Template
	mux      *http.ServeMux
}

// New builds the dashboard.
func New(opts Options) (*UI, error) {
	if opts.API == nil || opts.Authenticate == nil {
		return nil, fmt.Errorf("ui: the API and Authenticate are required")
	}
	if opts.SessionTTL == 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Path == "" {
		opts.Path = "/"
	}
	u := &UI{api: opts.API, path: opts.Path, auth: opts.Authenticate, secure: opts.Secure, log: opts.Logger,
		sessions: newSessions(opts.SessionTTL), pages: map[string]*template.Template{}}
	for _, name := range []string{"login", "home", "tasks", "task", "agents", "agent", "submit", "error",
		"batches", "batch", "schedules", "remove", "schedule", "workflows", "workflow", "runform", "run"} {
		t, err := template.New("base.html").Funcs(funcs).ParseFS(templateFS, "templates/base.html", "templates/partials.html",
			"templates/workfields.html", "templates/graph.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("ui: template %s: %w", name, err)
		}
		u.pages[name] = t
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.Handle("GET /static/", http.StripPrefix("/static/", cacheFor(http.FileServerFS(static))))
	m.HandleFunc("GET /login", u.loginPage)
	m.HandleFunc("POST /login", u.login)
	m.HandleFunc("POST /logout", u.signedIn(u.logout))
	m.HandleFunc("GET /{$}", u.signedIn(u.home))
	m.HandleFunc("GET /tasks", u.signedIn(u.tasks))
	m.HandleFunc("GET /tasks/find", u.signedIn(u.findTask))
	m.HandleFunc("GET /tasks/{id}", u.signedIn(u.task))
	m.HandleFunc("GET /tasks/{id}/output", u.signedIn(u.output))
	m.HandleFunc("GET /tasks/{id}/events", u.signedIn(u.events))
	m.HandleFunc("POST /tasks/{id}/cancel", u.signedIn(u.cancel))
	m.HandleFunc("POST /tasks/{id}/rerun", u.signedIn(u.rerun))
	m.HandleFunc("POST /tasks/{id}/approve", u.signedIn(u.decide("tasks", true)))
	m.HandleFunc("POST /tasks/{id}/reject", u.signedIn(u.decide("tasks", false)))
	m.HandleFunc("GET /agents", u.signedIn(u.agents))
	m.HandleFunc("GET /agents/{id}", u.signedIn(u.agent))
	m.HandleFunc("GET /submit", u.signedIn(u.submitPage))
	m.HandleFunc("POST /submit", u.signedIn(u.submit))
	m.HandleFunc("GET /batches", u.signedIn(u.batches))
	m.HandleFunc("GET /batches/{id}", u.signedIn(u.batch))
	m.HandleFunc("GET /batches/{id}/events", u.signedIn(u.batchEvents))
	m.HandleFunc("POST /batches/{id}/approve", u.signedIn(u.decide("batches", true)))
	m.HandleFunc("POST /batches/{id}/reject", u.signedIn(u.decide("batches", false)))
	m.HandleFunc("GET /workflows", u.signedIn(u.workflows))
	m.HandleFunc("GET /workflows/{name}", u.signedIn(u.workflow))
	m.HandleFunc("GET /workflows/{name}/run", u.signedIn(u.runFormPage))
	m.HandleFunc("POST /workflows/{name}/run", u.signedIn(u.startRun))
	m.HandleFunc("GET /workflow-runs/{id}", u.signedIn(u.workflowRun))
	m.HandleFunc("GET /workflow-runs/{id}/events", u.signedIn(u.runEvents))
	m.HandleFunc("POST /workflow-runs/{id}/cancel", u.signedIn(u.cancelRun))
	m.HandleFunc("POST /workflow-runs/{id}/steps/{step}/approve", u.signedIn(u.decideStep(true)))
	m.HandleFunc("POST /workflow-runs/{id}/steps/{step}/reject", u.signedIn(u.decideStep(false)))
	m.HandleFunc("GET /schedules", u.signedIn(u.schedules))
	m.HandleFunc("POST /schedules/{name}/pause", u.signedIn(u.pauseSchedule(true)))
	m.HandleFunc("POST /schedules/{name}/resume", u.signedIn(u.pauseSchedule(false)))
	m.HandleFunc("GET /schedules/new", u.signedIn(u.newSchedulePage))
	m.HandleFunc("POST /schedules/new", u.signedIn(u.addSchedule))
	m.HandleFunc("GET /schedules/{name}/edit", u.signedIn(u.editSchedulePage))
	m.HandleFunc("POST /schedules/{name}/edit", u.signedIn(u.editSchedule))
	m.HandleFunc("GET /schedules/{name}/remove", u.signedIn(u.removePage))
	m.HandleFunc("POST /schedules/{name}/remove", u.signedIn(u.removeSchedule))
	u.mux = m
	return u, nil
}

// ServeHTTP serves the dashboard's pages, with headers that keep them out of
// frames and other origins' scripts.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	u.mux.ServeHTTP(w, r)
}

// cacheFor lets browsers keep the static files for an hour.
func cacheFor(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// Pages is orchestrator.Options.Pages for the dashboard: secure says the
// orchestrator serves HTTPS.
func Pages(secure bool, log *slog.Logger) func(http.Handler, func(string) (string, bool), string) (http.Handler, error) {
	return func(api http.Handler, authenticate func(string) (string, bool), path string) (http.Handler, error) {
		return New(Options{API: api, Authenticate: authenticate, Secure: secure, Logger: log, Path: path})
	}
}
