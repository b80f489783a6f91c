package ui

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// fakeSchedules are the fake API's schedules: nightly, active, which made the
// fake batch; hourly, paused, which made a task.
func fakeSchedules() []*api.Schedule {
	next := time.Now().Add(3*time.Hour + 30*time.Minute)
	return []*api.Schedule{
		{ScheduleSpec: api.ScheduleSpec{Name: "hourly", Cron: "0 * * * *", TZ: "Europe/Paris", CatchUp: api.CatchUpLatest, Paused: true,
			Task: &api.SubmitRequest{ToAgent: "infra", WorkType: "echo"}},
			Last: &api.Firing{At: fakeFireTime, TaskID: fakeTaskID}},
		{ScheduleSpec: api.ScheduleSpec{Name: "nightly", Cron: "0 3 * * *", CatchUp: api.CatchUpNone,
			Batch: &api.BatchRequest{ToAgent: "code", WorkType: "echo"}},
			Last: &api.Firing{At: fakeFireTime, BatchID: fakeBatchID}, Next: &next},
		{ScheduleSpec: api.ScheduleSpec{Name: "greeter", Cron: "@every 10m", TZ: "Europe/Paris", CatchUp: api.CatchUpAll, Paused: true,
			Task: &api.SubmitRequest{ToAgent: "code", WorkType: "form", Hints: &task.Hints{MaxDurationSeconds: 30, AgentID: "code-1", GPUVRAMMB: &greeterGPU},
				Parameters: map[string]any{"n": 5.0, "verbose": true, "name": "Ada", "tags": []any{"a", "b"}, "extra": map[string]any{"k": 1.0}}}}},
	}
}

// scheduleRoutes answers the schedule calls on m; pause, resume and remove
// for an operator's token only, as the API does.
func scheduleRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /api/v1/schedules", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(fakeSchedules())
	})
	one := func(h func(http.ResponseWriter, *http.Request, *api.Schedule)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			for _, s := range fakeSchedules() {
				if s.Name == r.PathValue("name") {
					h(w, r, s)
					return
				}
			}
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no such schedule"}}`)
		}
	}
	operator := func(h func(http.ResponseWriter, *http.Request, *api.Schedule)) http.HandlerFunc {
		return one(func(w http.ResponseWriter, r *http.Request, s *api.Schedule) {
			if r.Header.Get("Authorization") != "Bearer "+operatorToken {
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, `{"error":{"code":"forbidden","message":"operators only"}}`)
				return
			}
			h(w, r, s)
		})
	}
	m.HandleFunc("GET /api/v1/schedules/{name}", one(func(w http.ResponseWriter, _ *http.Request, s *api.Schedule) {
		_ = json.NewEncoder(w).Encode(s)
	}))
	for op, paused := range map[string]bool{"pause": true, "resume": false} {
		m.HandleFunc("POST /api/v1/schedules/{name}/"+op, operator(func(w http.ResponseWriter, _ *http.Request, s *api.Schedule) {
			s.Paused = paused
			_ = json.NewEncoder(w).Encode(s)
		}))
	}
	m.HandleFunc("POST /api/v1/schedules", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+operatorToken {
			api.WriteError(w, http.StatusForbidden, "forbidden", "", "operators only")
			return
		}
		var spec api.ScheduleSpec
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			api.WriteError(w, http.StatusBadRequest, "invalid_json", "", err.Error())
			return
		}
		if spec.Task != nil && spec.Task.WorkType == "nosuch" {
			api.WriteError(w, http.StatusUnprocessableEntity, "unknown_work_type", "work_type", "no agent of code offers nosuch")
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&api.Schedule{ScheduleSpec: spec})
	})
	m.HandleFunc("DELETE /api/v1/schedules/{name}", operator(func(w http.ResponseWriter, _ *http.Request, _ *api.Schedule) {
		w.WriteHeader(http.StatusNoContent)
	}))
}

// TestSchedulesPageActionsAreForOperators: the Schedules page shows each
// schedule's cron, time zone, catch-up, state, next firing and what it last
// made; an operator gets Pause or Resume and Remove, each form with the
// session's CSRF token, and a viewer none of them (nor the removal's page).
func TestSchedulesPageActionsAreForOperators(t *testing.T) {
	srv, _ := newServer(t, "/")
	actions := []string{`action="/schedules/nightly/pause"`, `action="/schedules/hourly/resume"`,
		`action="/schedules/nightly/remove"`, `action="/schedules/hourly/remove"`, ">Pause</button>", ">Resume</button>", "Remove…"}
	for _, who := range []struct {
		token    string
		operator bool
	}{{operatorToken, true}, {viewerToken, false}} {
		c := browserClient(t)
		csrf := signIn(t, c, srv.URL+"/", who.token)
		_, page := get(t, c, srv.URL+"/schedules")
		for _, want := range []string{`<tr id="schedule-nightly">`, "<code>0 3 * * *</code>", "Europe/Paris", "latest",
			`<span class="sched-state paused">paused</span>`, `<span class="sched-state active">active</span>`, "in 3h",
			`href="/batches/` + fakeBatchID + `"`, `href="/tasks/` + fakeTaskID + `"`, "a batch code/echo", "a task infra/echo"} {
			if !strings.Contains(page, want) {
				t.Errorf("the Schedules page lacks %s:\n%s", want, page)
			}
		}
		for _, a := range actions {
			if strings.Contains(page, a) != who.operator {
				t.Errorf("operator %v: the page shows %s: %v", who.operator, a, !who.operator)
			}
		}
		if who.operator && strings.Count(page, `name="csrf" value="`+csrf+`"`) != 1+3 { // sign-out, and a pause or resume each
			t.Errorf("the operator's forms do not all carry the CSRF token:\n%s", page)
		}
		resp, confirm := get(t, c, srv.URL+"/schedules/nightly/remove")
		if who.operator && (resp.StatusCode != http.StatusOK || !strings.Contains(confirm, `action="/schedules/nightly/remove"`) ||
			!strings.Contains(confirm, `name="csrf" value="`+csrf+`"`)) {
			t.Errorf("the operator's removal page: %d\n%s", resp.StatusCode, confirm)
		}
		if !who.operator && resp.StatusCode != http.StatusForbidden {
			t.Errorf("a viewer's removal page: %d, want 403", resp.StatusCode)
		}
	}
}

// TestScheduleFormsNeedTheCSRFToken: Pause, Resume and Remove posted without
// the session's CSRF token, or with a forged one, are refused and reach no
// API; with it they call the API's pause, resume and delete and go back to the
// list. A viewer's, CSRF token and all, is the API's 403.
func TestScheduleFormsNeedTheCSRFToken(t *testing.T) {
	srv, seen := newServer(t, "/")
	c := browserClient(t)
	csrf := signIn(t, c, srv.URL+"/", operatorToken)
	for path, call := range map[string]string{
		"/schedules/nightly/pause":  "POST /api/v1/schedules/nightly/pause",
		"/schedules/hourly/resume":  "POST /api/v1/schedules/hourly/resume",
		"/schedules/nightly/remove": "DELETE /api/v1/schedules/nightly",
	} {
		for _, form := range []url.Values{{}, {"csrf": {"forged"}}} {
			if resp, body := post(t, c, srv.URL+path, form); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
				t.Errorf("%s with %v: %d, want 403", path, form, resp.StatusCode)
			}
		}
		if seen.called(call) {
			t.Fatalf("%s without its token reached the API", path)
		}
		resp, _ := post(t, c, srv.URL+path, url.Values{"csrf": {csrf}})
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/schedules") {
			t.Errorf("%s: %d to %q, want 303 to the list", path, resp.StatusCode, resp.Header.Get("Location"))
		}
		if !seen.called(call) {
			t.Errorf("%s did not call %s", path, call)
		}
	}
	if resp, _ := post(t, c, srv.URL+"/schedules/nightly/pause", url.Values{"csrf": {csrf}}); resp.Header.Get("Location") != "/schedules#schedule-nightly" {
		t.Errorf("pause goes back to %q, want the schedule's row", resp.Header.Get("Location"))
	}
	v := browserClient(t)
	vcsrf := signIn(t, v, srv.URL+"/", viewerToken)
	if resp, body := post(t, v, srv.URL+"/schedules/nightly/pause", url.Values{"csrf": {vcsrf}}); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "viewer") {
		t.Errorf("a viewer's pause: %d, want the API's 403\n%s", resp.StatusCode, body)
	}
	if resp, _ := post(t, c, srv.URL+"/schedules/nosuch/pause", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("pausing an unknown schedule: %d, want 404", resp.StatusCode)
	}
}
