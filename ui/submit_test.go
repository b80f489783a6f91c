package ui

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/worktype"
)

// fakeWorkTypes are the fake API's catalogue: code-1's echo and form.
func fakeWorkTypes() []api.WorkType {
	var form map[string]any
	_ = json.Unmarshal([]byte(fakeFormSchema), &form)
	return []api.WorkType{
		{AgentType: "code", Name: "echo", Agents: []string{"code-1"}, Spec: worktype.Spec{Description: "Prints its message.",
			Parameters: map[string]any{"type": "object", "required": []any{"message"},
				"properties": map[string]any{"message": map[string]any{"type": "string"}}}}},
		{AgentType: "code", Name: "form", Agents: []string{"code-1"}, ApprovalAgents: []string{"code-1"},
			Spec: worktype.Spec{Description: "Greets someone, typed.", Parameters: form}},
	}
}

// workTypeRoutes answers on m the work types' calls as the API does, and a
// submission: 403 to a viewer, 422 unknown_work_type or invalid_parameter
// (checked with the work type's schema) before anything is stored, else 201.
func workTypeRoutes(m *http.ServeMux) {
	find := func(typ, name string) *api.WorkType {
		for _, wt := range fakeWorkTypes() {
			if string(wt.AgentType) == typ && wt.Name == name {
				return &wt
			}
		}
		return nil
	}
	m.HandleFunc("GET /api/v1/work-types", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(fakeWorkTypes())
	})
	m.HandleFunc("GET /api/v1/work-types/{type}/{name}", func(w http.ResponseWriter, r *http.Request) {
		if wt := find(r.PathValue("type"), r.PathValue("name")); wt != nil {
			_ = json.NewEncoder(w).Encode(wt)
			return
		}
		api.WriteError(w, http.StatusNotFound, "not_found", "", "no such work type")
	})
	m.HandleFunc("POST /api/v1/tasks", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+operatorToken {
			api.WriteError(w, http.StatusForbidden, "forbidden", "", "viewer")
			return
		}
		var req api.SubmitRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			api.WriteError(w, http.StatusBadRequest, "invalid_json", "", err.Error())
			return
		}
		wt := find(string(req.ToAgent), req.WorkType)
		if wt == nil {
			api.WriteError(w, http.StatusUnprocessableEntity, "unknown_work_type", "work_type", "no agent of "+string(req.ToAgent)+" offers "+req.WorkType)
			return
		}
		s, err := worktype.Compile(wt.Parameters)
		var pe *worktype.ParamError
		if err == nil && errors.As(s.Check(req.Parameters), &pe) {
			api.WriteErrorDetail(w, http.StatusUnprocessableEntity, api.APIErrorDetail{Code: "invalid_parameter",
				Field: "parameters", Pointer: pe.Pointer, Message: pe.Message})
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "00000000-0000-4000-8000-000000000001", "state": "pending",
			"created_at": "2026-11-24T00:00:00Z"})
	})
}

// TestSubmitFormShowsTypedInputs: the form lists the work types by agent
// type; with one chosen (by the query, or by the button a browser without
// JavaScript posts) it shows its description and one labelled input per
// parameter, typed, with the constraints the browser checks.
func TestSubmitFormShowsTypedInputs(t *testing.T) {
	srv, _ := newServer(t, "/")
	c := browserClient(t)
	csrf := signIn(t, c, srv.URL+"/", operatorToken)
	_, blank := get(t, c, srv.URL+"/submit")
	for _, want := range []string{`<optgroup label="code">`, `<option value="code/echo">code · echo</option>`, `<option value="code/form">`, "Choose a work type"} {
		if !strings.Contains(blank, want) {
			t.Errorf("the blank form lacks %s", want)
		}
	}
	if strings.Contains(blank, `name="p.`) {
		t.Error("the blank form shows parameters")
	}
	_, byQuery := get(t, c, srv.URL+"/submit?target=code%2fform")
	_, byButton := post(t, c, srv.URL+"/submit", url.Values{"csrf": {csrf}, "target": {"code/form"}, "action": {"choose"}, "p.name": {"x"}})
	for how, page := range map[string]string{"query": byQuery, "button": byButton} {
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`<option value="code/form" selected>`),
			regexp.MustCompile(`id="work-description">Greets someone, typed.<`),
			regexp.MustCompile(`waits for an operator's approval`),
			regexp.MustCompile(`<label for="param-n"><span class="pname">n</span> <span class="type">integer</span></label>`),
			regexp.MustCompile(`<input type="number" id="param-n" name="p.n" step="1" min="1" max="10" value="3" aria-describedby="param-n-help">`),
			regexp.MustCompile(`<small class="help" id="param-n-help">How many times.</small>`),
			regexp.MustCompile(`<input type="number" id="param-ratio" name="p.ratio" step="any" min="0" value="">`),
			regexp.MustCompile(`<label class="check" for="param-verbose"><input type="checkbox" id="param-verbose" name="p.verbose" value="true" aria-describedby="param-verbose-help"> <span class="pname">verbose</span>`),
			regexp.MustCompile(`<select id="param-level" name="p.level">\s*<option value="">— not given</option><option value="low" selected>low</option><option value="high">high</option>`),
			regexp.MustCompile(`<label for="param-name"><span class="pname">name</span> <span class="req" aria-hidden="true" title="required">\*</span><span class="sr-only">\(required\)</span>`),
			regexp.MustCompile(`<input type="text" id="param-name" name="p.name" value="" required aria-describedby="param-name-help">`),
			regexp.MustCompile(`<input type="text" id="param-sizes" name="p.sizes" value="1, 2" placeholder="a, b, c">`),
			regexp.MustCompile(`id="param-extra"><span class="pname">extra</span> <span class="type">object</span>: give it in the JSON object below`),
		} {
			if !want.MatchString(page) {
				t.Errorf("chosen by %s: the form lacks %s", how, want)
			}
		}
	}
}

// TestSubmitSendsTypedParameters: a form's n=3 reaches the API as the
// integer 3, the checkbox as true, a list as an array; the JSON object's
// values override the inputs'.
func TestSubmitSendsTypedParameters(t *testing.T) {
	srv, seen := newServer(t, "/")
	c := browserClient(t)
	csrf := signIn(t, c, srv.URL+"/", operatorToken)
	for _, tc := range []struct {
		name string
		form url.Values
		want string
	}{
		{"typed", url.Values{"p.n": {"3"}, "p.verbose": {"true"}, "p.level": {"high"}, "p.name": {"Ada"}, "p.tags": {"x, y"}, "p.ratio": {""}},
			`{"level":"high","n":3,"name":"Ada","tags":["x","y"],"verbose":true}`},
		{"JSON over the inputs", url.Values{"p.n": {"3"}, "p.name": {"Ada"}, "params_json": {`{"n": 5, "extra": {"a": 1}}`}},
			`{"extra":{"a":1},"n":5,"name":"Ada","verbose":false}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.form.Set("csrf", csrf)
			tc.form.Set("target", "code/form")
			resp, body := post(t, c, srv.URL+"/submit", tc.form)
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("submit: %d\n%s", resp.StatusCode, body)
			}
			var req api.SubmitRequest
			if err := json.Unmarshal([]byte(seen.body("POST /api/v1/tasks")), &req); err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(req.Parameters)
			if string(got) != tc.want || req.ToAgent != "code" || req.WorkType != "form" {
				t.Errorf("the API got %s/%s %s, want %s", req.ToAgent, req.WorkType, got, tc.want)
			}
		})
	}
}

// TestSubmitShowsRefusalsBesideTheirInputs: a value that does not convert is
// refused in the page, beside its input, and reaches no API; the API's 422
// (a value its schema refuses, given in the JSON object; an unknown work type)
// shows with its field, pointer and message, the parameter's input marked.
func TestSubmitShowsRefusalsBesideTheirInputs(t *testing.T) {
	srv, seen := newServer(t, "/")
	c := browserClient(t)
	csrf := signIn(t, c, srv.URL+"/", operatorToken)
	resp, page := post(t, c, srv.URL+"/submit", url.Values{"csrf": {csrf}, "target": {"code/form"}, "p.n": {"three"}, "p.name": {"Ada"}})
	if resp.StatusCode != http.StatusBadRequest || seen.called("POST /api/v1/tasks") {
		t.Fatalf("n=three: %d, the API called: %v", resp.StatusCode, seen.called("POST /api/v1/tasks"))
	}
	for _, want := range []string{`value="three"`, `aria-describedby="param-n-help param-n-error" aria-invalid="true"`,
		`<small class="field-error" id="param-n-error">want an integer, got &#34;three&#34;</small>`, `value="Ada"`} {
		if !strings.Contains(page, want) {
			t.Errorf("n=three: the page lacks %s", want)
		}
	}
	resp, page = post(t, c, srv.URL+"/submit", url.Values{"csrf": {csrf}, "target": {"code/form"}, "p.name": {"Ada"},
		"params_json": {`{"n": "x"}`}})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("n=\"x\" in the JSON: %d\n%s", resp.StatusCode, page)
	}
	for _, want := range []string{`id="problem">parameters /n: got string, want integer</p>`, `id="param-n-error">got string, want integer<`,
		`{&#34;n&#34;: &#34;x&#34;}</textarea>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the API's refusal: the page lacks %s\n%s", want, page)
		}
	}
	resp, page = post(t, c, srv.URL+"/submit", url.Values{"csrf": {csrf}, "target": {"code/gone"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, `id="problem">work_type: no agent of code offers gone</p>`) ||
		!strings.Contains(page, "No agent offers code/gone.") {
		t.Errorf("an unknown work type: %d\n%s", resp.StatusCode, page)
	}
}

// TestPagesShowWhatWorkTypesDo: the Agents page names each agent's work
// types, described in their titles and linked to the form; an agent's page
// lists them with their descriptions; a task's page says what its work type
// does.
func TestPagesShowWhatWorkTypesDo(t *testing.T) {
	srv, _ := newServer(t, "/")
	c := browserClient(t)
	signIn(t, c, srv.URL+"/", operatorToken)
	for path, wants := range map[string][]string{
		"/agents": {`<a href="/submit?target=code%2fecho" title="Prints its message.">echo</a>`,
			`<a href="/submit?target=code%2fform" title="Greets someone, typed.">form</a> <small class="muted">(approval)</small>`},
		"/agents/code-1": {`<a href="/submit?target=code%2fecho">echo</a></td>`, `<td class="wt-about">Prints its message.</td>`,
			`Greets someone, typed. <strong class="note">A task of it here waits for an operator's approval.</strong>`},
		"/tasks/" + fakeTaskID: {`<p class="help" id="work-description">Prints its message.</p>`},
	} {
		resp, page := get(t, c, srv.URL+path)
		for _, want := range wants {
			if resp.StatusCode != http.StatusOK || !strings.Contains(page, want) {
				t.Errorf("%s: %d, lacks %s", path, resp.StatusCode, want)
			}
		}
	}
}
