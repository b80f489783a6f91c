package ui

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
)

// callsOf are the bodies of every call the API got of call (a method and a
// path), in order.
func (l *apiLog) callsOf(call string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for i, c := range l.calls {
		if c == call {
			out = append(out, l.bodies[i])
		}
	}
	return out
}

// changes are the API's calls that are not reads, in order.
func (l *apiLog) changes() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, c := range l.calls {
		if !strings.HasPrefix(c, "GET ") {
			out = append(out, c)
		}
	}
	return out
}

// greeterForm is the schedule form posted for a schedule of code/form: its
// inputs as typed text, and the JSON box.
func greeterForm(csrf string) url.Values {
	return url.Values{"csrf": {csrf}, "name": {"greeter"}, "cron": {"0 3 * * *"}, "tz": {"Europe/Paris"},
		"catch_up": {"latest"}, "paused": {"true"}, "target": {"code/form"}, "p.n": {"4"}, "p.verbose": {"true"},
		"p.level": {"high"}, "p.name": {"Ada"}, "p.tags": {"x, y"}, "params_json": {`{"extra": {"k": 2}}`},
		"max_duration_seconds": {"60"}}
}

// TestScheduleFormIsForOperators: an operator's Schedules page links to the
// new schedule's form and to each task schedule's edit; the form carries the
// CSRF token and the chosen work type's typed inputs. A viewer gets neither
// link, and the forms are 403 to them.
func TestScheduleFormIsForOperators(t *testing.T) {
	srv, _ := newServer(t, "/")
	c := browserClient(t)
	csrf := signIn(t, c, srv.URL+"/", operatorToken)
	_, list := get(t, c, srv.URL+"/schedules")
	for _, want := range []string{`href="/schedules/new"`, `action="/schedules/greeter/edit"`, `action="/schedules/hourly/edit"`} {
		if !strings.Contains(list, want) {
			t.Errorf("the operator's Schedules page lacks %s", want)
		}
	}
	if strings.Contains(list, `action="/schedules/nightly/edit"`) {
		t.Errorf("the schedule that makes a batch has an Edit: the form makes tasks only")
	}
	resp, form := get(t, c, srv.URL+"/schedules/new?target=code/form")
	for _, want := range []string{`action="/schedules/new"`, `data-choose="/schedules/new"`, `name="csrf" value="` + csrf + `"`,
		`id="sched-name" name="name"`, `id="sched-cron" name="cron"`, `<option value="none" selected>none</option>`,
		`id="sched-paused" name="paused"`, `type="number" id="param-n" name="p.n" step="1" min="1" max="10" value="3"`,
		`<option value="code/form" selected>`} {
		if !strings.Contains(form, want) {
			t.Errorf("the new schedule's form (%d) lacks %s:\n%s", resp.StatusCode, want, form)
		}
	}
	v := browserClient(t)
	signIn(t, v, srv.URL+"/", viewerToken)
	if _, vlist := get(t, v, srv.URL+"/schedules"); strings.Contains(vlist, "/schedules/new") || strings.Contains(vlist, "/edit") {
		t.Errorf("a viewer's Schedules page offers to add or edit:\n%s", vlist)
	}
	for _, path := range []string{"/schedules/new", "/schedules/greeter/edit"} {
		if resp, _ := get(t, v, srv.URL+path); resp.StatusCode != http.StatusForbidden {
			t.Errorf("a viewer's %s: %d, want 403", path, resp.StatusCode)
		}
	}
}

// TestAddScheduleSendsTheTypedSpec: the form posted without its CSRF token
// reaches no API; with it, the API gets the schedule with its task's
// parameters typed from the schema (4 and true, not "4" and "true"), the JSON
// box merged in, and the page goes to the schedule's row. A cron the API
// would refuse is refused on the form, typed values kept, before any call.
func TestAddScheduleSendsTheTypedSpec(t *testing.T) {
	srv, seen := newServer(t, "/")
	c := browserClient(t)
	csrf := signIn(t, c, srv.URL+"/", operatorToken)
	form := greeterForm(csrf)
	form.Del("csrf")
	if resp, _ := post(t, c, srv.URL+"/schedules/new", form); resp.StatusCode != http.StatusForbidden || len(seen.changes()) != 0 {
		t.Fatalf("the form without its CSRF token: %d, calls %v", resp.StatusCode, seen.changes())
	}
	bad := greeterForm(csrf)
	bad.Set("cron", "every day")
	resp, page := post(t, c, srv.URL+"/schedules/new", bad)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, `id="problem"`) || !strings.Contains(page, "cron") ||
		!strings.Contains(page, `value="every day"`) || !strings.Contains(page, `name="p.name" value="Ada"`) || len(seen.changes()) != 0 {
		t.Fatalf("a bad cron: %d, calls %v\n%s", resp.StatusCode, seen.changes(), page)
	}
	resp, page = post(t, c, srv.URL+"/schedules/new", greeterForm(csrf))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/schedules#schedule-greeter" {
		t.Fatalf("the form: %d to %q\n%s", resp.StatusCode, resp.Header.Get("Location"), page)
	}
	want := `{"name":"greeter","cron":"0 3 * * *","tz":"Europe/Paris","catch_up":"latest","paused":true,` +
		`"task":{"to_agent":"code","work_type":"form","parameters":{"extra":{"k":2},"level":"high","n":4,"name":"Ada","tags":["x","y"],"verbose":true},` +
		`"hints":{"max_duration_seconds":60}}}`
	if got := seen.body("POST /api/v1/schedules"); !sameJSON(t, got, want) {
		t.Errorf("the API got\n%s\nwant\n%s", got, want)
	}
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("want: %v", err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// TestEditScheduleShowsItAndReplacesIt: the edit form holds the schedule as it
// is (each parameter in its typed input, the one without an input in the JSON
// box, the hints, catch-up, paused) and says that saving replaces it; saved, it
// removes the schedule and adds the form's under the same name, whatever name
// was posted.
func TestEditScheduleShowsItAndReplacesIt(t *testing.T) {
	srv, seen := newServer(t, "/")
	c := browserClient(t)
	csrf := signIn(t, c, srv.URL+"/", operatorToken)
	_, page := get(t, c, srv.URL+"/schedules/greeter/edit")
	for _, want := range []string{`action="/schedules/greeter/edit"`, `id="replace-note"`, `value="greeter"`, "readonly",
		`value="@every 10m"`, `value="Europe/Paris"`, `<option value="all" selected>all</option>`, `value="true" checked> Paused`,
		`name="p.n" step="1" min="1" max="10" value="5"`, `name="p.verbose" value="true" checked`, `name="p.name" value="Ada"`,
		`name="p.tags" value="a, b"`, `{&#34;extra&#34;:{&#34;k&#34;:1}}`, `name="max_duration_seconds" type="number" min="1" step="1" value="30"`,
		`name="agent_id" value="code-1"`, `name="gpu_vram_mb" type="number" min="1" step="1" value="2048"`, "Save (replaces it)"} {
		if !strings.Contains(page, want) {
			t.Errorf("the edit form lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("the edit form:\n%s", page)
	}
	form := greeterForm(csrf)
	form.Set("name", "renamed")
	resp, body := post(t, c, srv.URL+"/schedules/greeter/edit", form)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/schedules#schedule-greeter" {
		t.Fatalf("the edit: %d to %q\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if got := strings.Join(seen.changes(), ", "); got != "DELETE /api/v1/schedules/greeter, POST /api/v1/schedules" {
		t.Errorf("the edit made the calls %s", got)
	}
	var spec api.ScheduleSpec
	if err := json.Unmarshal([]byte(seen.body("POST /api/v1/schedules")), &spec); err != nil || spec.Name != "greeter" ||
		spec.Cron != "0 3 * * *" || spec.Task.Parameters["n"] != 4.0 {
		t.Errorf("the edit added %+v, %v", spec, err)
	}
}

// TestEditPutsTheScheduleBackWhenRefused: a schedule the API refuses in its
// edit (a work type no agent offers) is added back as it was, and the form
// shows the refusal, says it was put back, and keeps what was typed.
func TestEditPutsTheScheduleBackWhenRefused(t *testing.T) {
	srv, seen := newServer(t, "/")
	c := browserClient(t)
	csrf := signIn(t, c, srv.URL+"/", operatorToken)
	form := greeterForm(csrf)
	form.Set("target", "code/nosuch")
	resp, page := post(t, c, srv.URL+"/schedules/greeter/edit", form)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "no agent of code offers nosuch") ||
		!strings.Contains(page, "put back as it was") || !strings.Contains(page, `value="0 3 * * *"`) {
		t.Fatalf("the refused edit: %d\n%s", resp.StatusCode, page)
	}
	adds := seen.callsOf("POST /api/v1/schedules")
	if got := strings.Join(seen.changes(), ", "); got != "DELETE /api/v1/schedules/greeter, POST /api/v1/schedules, POST /api/v1/schedules" || len(adds) != 2 {
		t.Fatalf("the refused edit made the calls %s", got)
	}
	var old *api.Schedule
	for _, s := range fakeSchedules() {
		if s.Name == "greeter" {
			old = s
		}
	}
	want, _ := json.Marshal(old.ScheduleSpec)
	if !sameJSON(t, adds[1], string(want)) {
		t.Errorf("put back\n%s\nwant the old one\n%s", adds[1], want)
	}
}
