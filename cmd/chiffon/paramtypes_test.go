package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/worktype"
)

// patchSchema is the parameter schema of infra/patch in these tests.
var patchSchema = map[string]any{
	"type":     "object",
	"required": []any{"n"},
	"properties": map[string]any{
		"n":     map[string]any{"type": "integer", "description": "how many hosts at once"},
		"ratio": map[string]any{"type": "number"},
		"dry":   map[string]any{"type": "boolean", "default": false},
		"ports": map[string]any{"type": "array", "items": map[string]any{"type": "integer"}},
		"tags":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"level": map[string]any{"type": "string", "enum": []any{"low", "high"}},
		"opts":  map[string]any{"type": "object"},
		"note":  map[string]any{"type": "string"},
	},
}

// closedSchema takes only n.
var closedSchema = map[string]any{
	"type": "object", "additionalProperties": false,
	"properties": map[string]any{"n": map[string]any{"type": "integer"}, "m": map[string]any{"type": "integer"}},
}

func TestParseKeyValuesTypesTextByTheSchema(t *testing.T) {
	cases := []struct {
		name   string
		schema map[string]any
		base   string
		pairs  []string
		want   map[string]any
	}{
		{"integer", patchSchema, "", []string{"n=2"}, map[string]any{"n": int64(2)}},
		{"number and boolean", patchSchema, "", []string{"ratio=0.5", "dry=true"}, map[string]any{"ratio": 0.5, "dry": true}},
		{"arrays split on commas", patchSchema, "", []string{"ports=80,443", "tags=a,b"},
			map[string]any{"ports": []any{int64(80), int64(443)}, "tags": []any{"a", "b"}}},
		{"an allowed value", patchSchema, "", []string{"level=high"}, map[string]any{"level": "high"}},
		{"a string stays", patchSchema, "", []string{"note=42"}, map[string]any{"note": "42"}},
		{"k:=JSON stays as given", patchSchema, "", []string{`n:="2"`}, map[string]any{"n": "2"}},
		{"undeclared, open schema: a string", patchSchema, "", []string{"extra=7"}, map[string]any{"extra": "7"}},
		{"the later pair wins", patchSchema, `{"n": 1}`, []string{"n=3", `n:="x"`, "n=4"}, map[string]any{"n": int64(4)}},
		{"no schema: strings", nil, "", []string{"n=2", "dry=true"}, map[string]any{"n": "2", "dry": "true"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s *paramSchema
			if tc.schema != nil {
				s = newParamSchema("infra/patch", tc.schema)
			}
			got, err := parseKeyValues(tc.base, tc.pairs, s)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestParseKeyValuesRefusesWhatTheSchemaRefuses(t *testing.T) {
	cases := []struct {
		name, base string
		schema     map[string]any
		pairs      []string
		pointer    string
		msg        []string
	}{
		{"not an integer", "", patchSchema, []string{"n=two"}, "/n", []string{`want an integer, got "two"`}},
		{"not a boolean", "", patchSchema, []string{"dry=maybe"}, "/dry", []string{"want true or false"}},
		{"an array item", "", patchSchema, []string{"ports=80,http"}, "/ports", []string{`item "http"`, "want an integer"}},
		{"not an allowed value", "", patchSchema, []string{"level=mid"}, "/level", []string{`must be one of "low", "high", got "mid"`}},
		{"an object as text", "", patchSchema, []string{"opts=x"}, "/opts", []string{"name:=JSON"}},
		{"undeclared, closed schema", "", closedSchema, []string{"n=1", "x=1"}, "/x",
			[]string{"not a parameter of infra/patch, which takes m, n"}},
		{"undeclared in --params-json, closed schema", `{"y~/": 1}`, closedSchema, []string{"n=1"}, "/y~0~1", []string{"which takes m, n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseKeyValues(tc.base, tc.pairs, newParamSchema("infra/patch", tc.schema))
			var pe *worktype.ParamError
			if !errors.As(err, &pe) || pe.Pointer != tc.pointer {
				t.Fatalf("error %v, want a parameter error at %s", err, tc.pointer)
			}
			for _, m := range tc.msg {
				if !strings.Contains(pe.Message, m) {
					t.Errorf("message %q lacks %q", pe.Message, m)
				}
			}
		})
	}
}

// catalogueAPI serves the catalogue (404 when list is nil) and records every
// request; a POST is answered by answer.
func catalogueAPI(t *testing.T, list []api.WorkType, answer http.HandlerFunc) (*recorder, []string) {
	t.Helper()
	var rec recorder
	server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/work-types" && list != nil:
			writeAPIJSON(w, http.StatusOK, list)
		case r.Method == http.MethodPost && answer != nil:
			answer(w, r)
		default:
			writeAPIError(w, http.StatusNotFound, "not_found", "", "no route")
		}
	}))
	return &rec, server
}

// patchCatalogue is the catalogue with infra/patch of schema.
func patchCatalogue(schema map[string]any) []api.WorkType {
	return []api.WorkType{{AgentType: "infra", Name: "patch", Spec: worktype.Spec{Description: "Patches hosts.", Parameters: schema},
		Agents: []string{"nas-1"}}}
}

// accepted answers a POST as the orchestrator would: a task, a batch or a
// schedule.
func accepted(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/v1/batches":
		writeAPIJSON(w, http.StatusCreated, testBatch(api.BatchRunning, "waiting", "waiting", false))
	case "/api/v1/schedules":
		writeAPIJSON(w, http.StatusCreated, map[string]any{"name": "nightly", "cron": "@daily"})
	default:
		writeAPIJSON(w, http.StatusCreated, map[string]any{"id": taskA, "state": "pending"})
	}
}

// postedParams is the parameters of the one POST rec holds (those of its
// task, for a schedule).
func postedParams(t *testing.T, rec *recorder) map[string]any {
	t.Helper()
	var posts []string
	for _, r := range rec.all() {
		if strings.HasPrefix(r, "POST ") {
			posts = append(posts, r)
		}
	}
	if len(posts) != 1 {
		t.Fatalf("requests %q, want one POST", rec.all())
	}
	var body struct {
		Parameters map[string]any `json:"parameters"`
		Task       *struct {
			Parameters map[string]any `json:"parameters"`
		} `json:"task"`
	}
	js := strings.SplitN(posts[0], " ", 3)[2]
	if err := json.Unmarshal([]byte(js), &body); err != nil {
		t.Fatalf("body %q: %v", js, err)
	}
	if body.Task != nil {
		return body.Task.Parameters
	}
	return body.Parameters
}

func TestSubmitTypesParamsByTheCatalogue(t *testing.T) {
	clearClientEnv(t)
	typed := map[string]any{"n": 2.0, "tags": []any{"a", "b"}, "note": "x"}
	strs := map[string]any{"n": "2", "tags": "a,b", "note": "x"}
	cases := []struct {
		name    string
		list    []api.WorkType
		command []string
		want    map[string]any
	}{
		{"submit", patchCatalogue(patchSchema), []string{"submit"}, typed},
		{"submit --all", patchCatalogue(patchSchema), []string{"submit", "--all"}, typed},
		{"schedule add", patchCatalogue(patchSchema), []string{"schedule", "add", "nightly", "--cron", "@daily"}, typed},
		{"an older orchestrator (404)", nil, []string{"submit"}, strs},
		{"a work type no agent declares", []api.WorkType{}, []string{"submit"}, strs},
		{"declared without a schema", patchCatalogue(nil), []string{"submit"}, strs},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, server := catalogueAPI(t, tc.list, accepted)
			args := append(tc.command, "--to", "infra", "--work-type", "patch", "--param", "n=2", "--param", "tags=a,b", "--param", "note=x")
			if code, _, errOut := runCLI(t, "", append(args, server...)...); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got := postedParams(t, rec); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("parameters %#v, want %#v", got, tc.want)
			}
		})
	}
}

// Without a --param k=v nothing needs typing: the catalogue is not asked for.
func TestSubmitWithoutTextParamsAsksNoCatalogue(t *testing.T) {
	clearClientEnv(t)
	rec, server := catalogueAPI(t, patchCatalogue(patchSchema), accepted)
	args := []string{"submit", "--to", "infra", "--work-type", "patch", "--param", "n:=2"}
	if code, _, errOut := runCLI(t, "", append(args, server...)...); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if n := rec.count("GET /api/v1/work-types"); n != 0 {
		t.Fatalf("asked for the catalogue %d times: %q", n, rec.all())
	}
}

// A parameter error, the CLI's or the orchestrator's 422, exits 65 naming the
// value; --json reports the code and pointer; other 422s stay errors of exit 1.
func TestParamErrorsExitWithTheirOwnCode(t *testing.T) {
	clearClientEnv(t)
	refuse := func(code, field, pointer, msg string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			writeAPIJSON(w, http.StatusUnprocessableEntity, api.ErrorBody{Error: api.APIErrorDetail{
				Code: code, Field: field, Pointer: pointer, Message: msg}})
		}
	}
	cases := []struct {
		name    string
		param   string
		answer  http.HandlerFunc
		exit    int
		stderr  string
		json    map[string]any
		posted  int
		command []string
	}{
		{"the CLI's", "n=two", accepted, exitParamError, `chiffon: parameter /n: want an integer, got "two"` + "\n",
			map[string]any{"code": "invalid_parameter", "field": "parameters", "pointer": "/n", "exit_code": 65.0}, 0, nil},
		{"the CLI's, for a batch", "level=mid", accepted, exitParamError, `chiffon: parameter /level: must be one of "low", "high", got "mid"` + "\n",
			map[string]any{"code": "invalid_parameter", "pointer": "/level", "exit_code": 65.0}, 0, []string{"--all"}},
		{"the orchestrator's", `n:="2"`, refuse("invalid_parameter", "parameters", "/n", "got string, want integer"), exitParamError,
			"chiffon: parameter /n: got string, want integer (HTTP 422)\n",
			map[string]any{"code": "invalid_parameter", "field": "parameters", "pointer": "/n", "http_status": 422.0, "exit_code": 65.0}, 1, nil},
		{"an unknown work type", `n:=2`, refuse("unknown_work_type", "work_type", "", "no agent of type infra offers patch"), exitParamError,
			"chiffon: work_type: no agent of type infra offers patch (HTTP 422)\n",
			map[string]any{"code": "unknown_work_type", "field": "work_type", "http_status": 422.0, "exit_code": 65.0}, 1, nil},
		{"another 422", `n:=2`, refuse("invalid_request", "hints", "", "too long"), 1,
			"chiffon: hints: too long (HTTP 422)\n",
			map[string]any{"code": "invalid_request", "http_status": 422.0, "exit_code": 1.0}, 1, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, server := catalogueAPI(t, patchCatalogue(patchSchema), tc.answer)
			args := append(append([]string{"submit", "--to", "infra", "--work-type", "patch", "--param", tc.param}, tc.command...), server...)
			code, _, errOut := runCLI(t, "", args...)
			if code != tc.exit || errOut != tc.stderr {
				t.Fatalf("exit %d, stderr %q; want %d, %q", code, errOut, tc.exit, tc.stderr)
			}
			if n := rec.count("POST "); n != tc.posted {
				t.Fatalf("%d POSTs, want %d: %q", n, tc.posted, rec.all())
			}
			code, _, errOut = runCLI(t, "", append(args, "--json")...)
			var got struct{ Error map[string]any }
			if err := json.Unmarshal([]byte(errOut), &got); err != nil || code != tc.exit {
				t.Fatalf("--json: exit %d, stderr %q", code, errOut)
			}
			for k, v := range tc.json {
				if got.Error[k] != v {
					t.Errorf("--json error %s = %v, want %v (%s)", k, got.Error[k], v, errOut)
				}
			}
		})
	}
}
