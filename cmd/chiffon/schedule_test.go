package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
)

// scheduleAPI is a fake of the orchestrator's schedule endpoints, over the
// schedules it holds, recording every request.
type scheduleAPI struct {
	rec recorder
	mu  sync.Mutex
	ss  map[string]*api.Schedule
}

var (
	schedCreated = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	schedNext    = time.Date(2026, 3, 2, 3, 30, 0, 0, time.UTC)
	schedLast    = time.Date(2026, 3, 1, 3, 30, 0, 0, time.UTC)
)

func newScheduleAPI(t *testing.T, ss ...*api.Schedule) (*scheduleAPI, []string) {
	sa := &scheduleAPI{ss: map[string]*api.Schedule{}}
	for _, s := range ss {
		sa.ss[s.Name] = s
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/schedules", func(w http.ResponseWriter, r *http.Request) {
		body := sa.rec.add(r)
		var spec api.ScheduleSpec
		dec := json.NewDecoder(strings.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			writeAPIError(w, http.StatusBadRequest, "invalid_json", "", err.Error())
			return
		}
		sa.mu.Lock()
		defer sa.mu.Unlock()
		if sa.ss[spec.Name] != nil {
			writeAPIError(w, http.StatusConflict, "exists", "name", "a schedule of that name exists; remove it first")
			return
		}
		s := &api.Schedule{ScheduleSpec: spec, CreatedAt: schedCreated}
		if !s.Paused {
			s.Next = &schedNext
		}
		sa.ss[spec.Name] = s
		writeAPIJSON(w, http.StatusCreated, s)
	})
	mux.HandleFunc("GET /api/v1/schedules", func(w http.ResponseWriter, r *http.Request) {
		sa.rec.add(r)
		sa.mu.Lock()
		defer sa.mu.Unlock()
		list := []*api.Schedule{}
		for _, name := range []string{"backup", "nightly", "patch"} {
			if s := sa.ss[name]; s != nil {
				list = append(list, s)
			}
		}
		writeAPIJSON(w, http.StatusOK, list)
	})
	one := func(h func(w http.ResponseWriter, r *http.Request, s *api.Schedule)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			sa.rec.add(r)
			sa.mu.Lock()
			defer sa.mu.Unlock()
			s := sa.ss[r.PathValue("name")]
			if s == nil {
				writeAPIError(w, http.StatusNotFound, "not_found", "name", "no such schedule")
				return
			}
			h(w, r, s)
		}
	}
	mux.HandleFunc("GET /api/v1/schedules/{name}", one(func(w http.ResponseWriter, _ *http.Request, s *api.Schedule) {
		writeAPIJSON(w, http.StatusOK, s)
	}))
	mux.HandleFunc("POST /api/v1/schedules/{name}/{verb}", one(func(w http.ResponseWriter, r *http.Request, s *api.Schedule) {
		switch r.PathValue("verb") {
		case "pause":
			s.Paused, s.Next = true, nil
		case "resume":
			s.Paused, s.Next = false, &schedNext
		default:
			http.NotFound(w, r)
			return
		}
		writeAPIJSON(w, http.StatusOK, s)
	}))
	mux.HandleFunc("DELETE /api/v1/schedules/{name}", one(func(w http.ResponseWriter, r *http.Request, s *api.Schedule) {
		delete(sa.ss, s.Name)
		w.WriteHeader(http.StatusNoContent)
	}))
	return sa, serveAPI(t, mux)
}

func TestScheduleAddSendsTheSpec(t *testing.T) {
	clearClientEnv(t)
	base := []string{"schedule", "add", "nightly", "--to", "infra", "--work-type", "patch"}
	cases := []struct {
		name string
		args []string
		want map[string]any
		out  string
	}{
		{"a task", []string{"--cron", "30 3 * * *", "--tz", "Europe/Paris", "--catch-up", "latest",
			"--param", "reboot:=true", "--hint", "agent_id=nas-1", "--hint", "max_memory_mb=512"},
			map[string]any{"name": "nightly", "cron": "30 3 * * *", "tz": "Europe/Paris", "catch_up": "latest",
				"task": map[string]any{"to_agent": "infra", "work_type": "patch", "parameters": map[string]any{"reboot": true},
					"hints": map[string]any{"agent_id": "nas-1", "max_memory_mb": 512}}},
			"schedule nightly added; next at " + schedNext.Local().Format(time.DateTime)},
		{"a batch", []string{"--cron", "@daily", "--paused", "--label", "site=attic", "--max-parallel", "1", "--stop-on-failure"},
			map[string]any{"name": "nightly", "cron": "@daily", "catch_up": "none", "paused": true,
				"batch": map[string]any{"to_agent": "infra", "work_type": "patch", "labels": map[string]any{"site": "attic"},
					"max_parallel": 1, "stop_on_failure": true}},
			"schedule nightly added; paused: it does not fire until resumed"},
		{"a batch on named agents", []string{"--cron", "0 * * * *", "--agents", "a,b"},
			map[string]any{"name": "nightly", "cron": "0 * * * *", "catch_up": "none",
				"batch": map[string]any{"to_agent": "infra", "work_type": "patch", "agents": []string{"a", "b"}}},
			"schedule nightly added"},
		{"a batch on every agent", []string{"--cron", "0 * * * *", "--all"},
			map[string]any{"name": "nightly", "cron": "0 * * * *", "catch_up": "none",
				"batch": map[string]any{"to_agent": "infra", "work_type": "patch"}},
			"schedule nightly added"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sa, server := newScheduleAPI(t)
			code, out, errOut := runCLI(t, "", append(append(base, tc.args...), server...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			reqs := sa.rec.all()
			if len(reqs) != 1 || !strings.HasPrefix(reqs[0], "POST /api/v1/schedules ") {
				t.Fatalf("requests %q, want one POST", reqs)
			}
			jsonEqual(t, strings.TrimPrefix(reqs[0], "POST /api/v1/schedules "), tc.want)
			if !strings.HasPrefix(out, tc.out) {
				t.Errorf("stdout %q, want %q", out, tc.out)
			}
		})
	}
}

func TestScheduleAddUsageErrorsNameTheFlag(t *testing.T) {
	clearClientEnv(t)
	sa, server := newScheduleAPI(t)
	task := []string{"--to", "infra", "--work-type", "patch"}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"a bad cron", []string{"nightly", "--cron", "61 * * * *"}, "--cron: "},
		{"a time zone in the cron", []string{"nightly", "--cron", "TZ=Europe/Paris 0 3 * * *"}, "--cron: give the time zone in tz"},
		{"an unknown time zone", []string{"nightly", "--cron", "@daily", "--tz", "Mars/Olympus"}, `--tz: unknown time zone "Mars/Olympus"`},
		{"a bad catch-up", []string{"nightly", "--cron", "@daily", "--catch-up", "some"}, `--catch-up: must be none, latest or all, got "some"`},
		{"a bad name", []string{"Nightly!", "--cron", "@daily"}, "NAME: must be 1 to 63"},
		{"a bad agent type", []string{"nightly", "--cron", "@daily", "--to", "toaster"}, "--to: must be one of"},
		{"--hint agent_id with a batch", []string{"nightly", "--cron", "@daily", "--all", "--hint", "agent_id=a"}, "--hint agent_id is not for a batch"},
		{"--max-parallel without a batch", []string{"nightly", "--cron", "@daily", "--max-parallel", "2"}, "--max-parallel is for a batch"},
		{"a bad agent id", []string{"nightly", "--cron", "@daily", "--agents", "bad id"}, "--agents: agents[0]:"},
		{"no cron", []string{"nightly"}, `required flag(s) "cron"`},
		{"no name", []string{"--cron", "@daily"}, "accepts 1 arg"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append(append([]string{"schedule", "add"}, task...), tc.args...), server...)
			code, _, errOut := runCLI(t, "", args...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 naming %q", code, errOut, tc.want)
			}
		})
	}
	if reqs := sa.rec.all(); len(reqs) != 0 {
		t.Errorf("usage errors sent requests: %q", reqs)
	}
}

func TestScheduleAddOfANameTakenSaysSo(t *testing.T) {
	clearClientEnv(t)
	_, server := newScheduleAPI(t, taskSchedule())
	args := []string{"schedule", "add", "nightly", "--cron", "@daily", "--to", "infra", "--work-type", "patch"}
	code, out, errOut := runCLI(t, "", append(args, server...)...)
	if code != 1 || out != "" || !strings.Contains(errOut, `chiffon: a schedule named "nightly" exists already (HTTP 409)`) ||
		!strings.Contains(errOut, "chiffon schedule rm nightly") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = runCLI(t, "", append(append(args, "--json"), server...)...)
	var e errorJSON
	if code != 1 || json.Unmarshal([]byte(errOut), &e) != nil || e.Error.Code != "exists" || e.Error.HTTPStatus != 409 ||
		e.Error.Field != "name" {
		t.Errorf("--json: exit %d, stderr %q", code, errOut)
	}
}

// taskSchedule is schedule nightly, of a task, fired once.
func taskSchedule() *api.Schedule {
	return &api.Schedule{
		ScheduleSpec: api.ScheduleSpec{Name: "nightly", Cron: "30 3 * * *", TZ: "Europe/Paris", CatchUp: api.CatchUpLatest,
			Task: &api.SubmitRequest{ToAgent: "infra", WorkType: "patch", Parameters: map[string]any{"reboot": true}}},
		CreatedAt: schedCreated, Next: &schedNext, Last: &api.Firing{At: schedLast, TaskID: taskA},
	}
}

// batchSchedule is schedule backup, of a batch, paused, never fired.
func batchSchedule() *api.Schedule {
	return &api.Schedule{
		ScheduleSpec: api.ScheduleSpec{Name: "backup", Cron: "@daily", CatchUp: api.CatchUpNone, Paused: true,
			Batch: &api.BatchRequest{ToAgent: "desktop", WorkType: "backup", Labels: map[string]string{"site": "attic"}, MaxParallel: 1}},
		CreatedAt: schedCreated,
	}
}

func TestScheduleListAndShow(t *testing.T) {
	clearClientEnv(t)
	_, server := newScheduleAPI(t, taskSchedule(), batchSchedule())
	code, out, errOut := runCLI(t, "", append([]string{"schedule", "list"}, server...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	next, last := schedNext.Local().Format(time.DateTime), schedLast.Local().Format(time.DateTime)
	want := []string{
		"NAME     CRON        TZ            CATCH-UP  STATE   NEXT                 LAST                 WORK",
		"backup   @daily      UTC           none      paused  -                    -                    batch desktop/backup",
		"nightly  30 3 * * *  Europe/Paris  latest    active  " + next + "  " + last + "  task infra/patch",
	}
	if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("schedule list:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	code, out, _ = runCLI(t, "", append([]string{"schedule", "list", "--json"}, server...)...)
	var ss []api.Schedule
	if code != 0 || json.Unmarshal([]byte(out), &ss) != nil || len(ss) != 2 || ss[0].Batch == nil || ss[1].Task == nil {
		t.Errorf("list --json: exit %d, %q", code, out)
	}

	cases := []struct {
		name string
		want []string
	}{
		{"nightly", []string{"Name:        nightly", "State:       active", "Cron:        30 3 * * *", "TZ:          Europe/Paris",
			"Catch-up:    latest", "Makes:       a task", "Work:        infra/patch", `Parameters:  {"reboot":true}`,
			"Next:        " + next, "Last:        " + last + ": task " + taskA}},
		{"backup", []string{"State:            paused", "TZ:               UTC", "Makes:            a batch", "Work:             desktop/backup",
			"Selector:         every desktop agent labelled site=attic", "Max parallel:     1", "Stop on failure:  no",
			"Next:             -", "Last:             never"}},
	}
	for _, tc := range cases {
		code, out, errOut := runCLI(t, "", append([]string{"schedule", "show", tc.name}, server...)...)
		if code != 0 {
			t.Fatalf("show %s: exit %d: %s", tc.name, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("show %s lacks %q:\n%s", tc.name, w, out)
			}
		}
	}
	code, out, _ = runCLI(t, "", append([]string{"schedule", "show", "nightly", "--json"}, server...)...)
	var s api.Schedule
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.Name != "nightly" || s.Last == nil || s.Last.TaskID != taskA {
		t.Errorf("show --json: exit %d, %q", code, out)
	}
}

func TestSchedulePauseResumeRemove(t *testing.T) {
	clearClientEnv(t)
	sa, server := newScheduleAPI(t, taskSchedule())
	next := schedNext.Local().Format(time.DateTime)
	steps := []struct {
		args    []string
		request string
		out     string
	}{
		{[]string{"pause", "nightly"}, "POST /api/v1/schedules/nightly/pause", "schedule nightly paused: it does not fire until resumed\n"},
		{[]string{"resume", "nightly"}, "POST /api/v1/schedules/nightly/resume", "schedule nightly resumed; next at " + next + "\n"},
		{[]string{"pause", "nightly", "--json"}, "POST /api/v1/schedules/nightly/pause", `"paused": true`},
		{[]string{"rm", "nightly"}, "DELETE /api/v1/schedules/nightly", "schedule nightly removed\n"},
	}
	for _, st := range steps {
		before := len(sa.rec.all())
		code, out, errOut := runCLI(t, "", append(append([]string{"schedule"}, st.args...), server...)...)
		if code != 0 || !strings.Contains(out, st.out) {
			t.Fatalf("%v: exit %d, stdout %q, want %q; stderr %q", st.args, code, out, st.out, errOut)
		}
		if reqs := sa.rec.all()[before:]; len(reqs) != 1 || reqs[0] != st.request {
			t.Errorf("%v: requests %q, want %q", st.args, reqs, st.request)
		}
	}
	// Gone: each command says so.
	for _, args := range [][]string{{"show", "nightly"}, {"pause", "nightly"}, {"resume", "nightly"}, {"rm", "nightly"}} {
		code, _, errOut := runCLI(t, "", append(append([]string{"schedule"}, args...), server...)...)
		if code != 1 || !strings.Contains(errOut, `chiffon: no schedule named "nightly" (HTTP 404)`) {
			t.Errorf("%v of a removed schedule: exit %d, stderr %q", args, code, errOut)
		}
	}
	code, _, errOut := runCLI(t, "", append([]string{"schedule", "rm", "nightly", "--json"}, server...)...)
	var e errorJSON
	if code != 1 || json.Unmarshal([]byte(errOut), &e) != nil || e.Error.Code != "not_found" || e.Error.HTTPStatus != 404 {
		t.Errorf("rm --json of a removed schedule: exit %d, stderr %q", code, errOut)
	}
	api2, server2 := newScheduleAPI(t, taskSchedule())
	code, out, _ := runCLI(t, "", append([]string{"schedule", "rm", "nightly", "--json"}, server2...)...)
	var rm scheduleRemoved
	if code != 0 || json.Unmarshal([]byte(out), &rm) != nil || rm != (scheduleRemoved{Name: "nightly", Removed: true}) {
		t.Errorf("rm --json: exit %d, %q", code, out)
	}
	if reqs := api2.rec.all(); len(reqs) != 1 || reqs[0] != "DELETE /api/v1/schedules/nightly" {
		t.Errorf("rm --json: requests %q", reqs)
	}
}
