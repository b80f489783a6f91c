package ui

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/worktype"
)

// fakeFormSchema is the parameters schema of the fake API's code/form: one
// property of each kind the submit form takes, as the API's JSON decodes.
const fakeFormSchema = `{
  "type": "object",
  "required": ["name"],
  "additionalProperties": false,
  "properties": {
    "n": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3, "description": "How many times."},
    "verbose": {"type": "boolean", "description": "Say more."},
    "level": {"type": "string", "enum": ["low", "high"], "default": "low"},
    "name": {"type": "string", "description": "Whom to greet."},
    "tags": {"type": "array", "items": {"type": "string"}},
    "sizes": {"type": "array", "items": {"type": "integer"}, "default": [1, 2]},
    "ratio": {"type": "number", "minimum": 0},
    "mode": {"enum": [1, 2]},
    "extra": {"type": "object"}
  }
}`

// decodeSchema is schema as the dashboard gets it from the API.
func decodeSchema(t *testing.T, schema string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(schema), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestParamInputsFollowTheSchema: each parameter gets the input its type
// takes (a number input with step 1 for an integer and the schema's bounds, a
// checkbox for a boolean, a select of the enum, text for a string, a
// comma-separated list for an array of scalars, none for an object), marked
// required when the schema says, holding its default.
func TestParamInputsFollowTheSchema(t *testing.T) {
	inputs := paramInputs(decodeSchema(t, fakeFormSchema), nil, false, nil)
	byName := map[string]paramInput{}
	for _, in := range inputs {
		byName[in.Name] = in
	}
	if inputs[0].Name != "name" {
		t.Errorf("the required parameter is not first: %s", inputs[0].Name)
	}
	for _, tc := range []struct {
		name, kind, step, min, max, value string
		required                          bool
		options                           []string
	}{
		{name: "n", kind: kindNumber, step: "1", min: "1", max: "10", value: "3"},
		{name: "ratio", kind: kindNumber, step: "any", min: "0"},
		{name: "verbose", kind: kindCheckbox, value: ""},
		{name: "level", kind: kindSelect, value: "low", options: []string{"", "low", "high"}},
		{name: "mode", kind: kindSelect, options: []string{"", "1", "2"}},
		{name: "name", kind: kindText, required: true},
		{name: "tags", kind: kindList},
		{name: "sizes", kind: kindList, value: "1, 2"},
		{name: "extra", kind: kindJSON},
	} {
		in, ok := byName[tc.name]
		if !ok {
			t.Errorf("%s: no input", tc.name)
			continue
		}
		if in.Kind != tc.kind || in.Step != tc.step || in.Min != tc.min || in.Max != tc.max || in.Value != tc.value || in.Required != tc.required {
			t.Errorf("%s: kind %q step %q min %q max %q value %q required %v, want %+v", tc.name, in.Kind, in.Step, in.Min, in.Max, in.Value, in.Required, tc)
		}
		var options []string
		for _, o := range in.Options {
			options = append(options, o.Value)
			if o.Selected != (o.Value == tc.value) {
				t.Errorf("%s: option %q selected %v with value %q", tc.name, o.Value, o.Selected, tc.value)
			}
		}
		if !slices.Equal(options, tc.options) {
			t.Errorf("%s: options %q, want %q", tc.name, options, tc.options)
		}
		if in.FormName != paramPrefix+tc.name || in.ID != "param-"+tc.name {
			t.Errorf("%s: name %q id %q", tc.name, in.FormName, in.ID)
		}
	}
	if got := byName["n"].DescribedBy(); got != "param-n-help" {
		t.Errorf("n is described by %q", got)
	}
}

// TestParamInputsKeepWhatWasPosted: shown again, the inputs hold the values
// posted, not the defaults (an unchecked box unchecked), and the refusals.
func TestParamInputsKeepWhatWasPosted(t *testing.T) {
	posted := url.Values{"n": {"7"}, "level": {"high"}, "name": {"Ada"}}
	errs := map[string]string{"n": "must be <= 5"}
	for _, in := range paramInputs(decodeSchema(t, fakeFormSchema), posted, true, errs) {
		want := posted.Get(in.Name)
		if in.Value != want || in.Checked {
			t.Errorf("%s: value %q checked %v, want %q", in.Name, in.Value, in.Checked, want)
		}
		if in.Error != errs[in.Name] {
			t.Errorf("%s: error %q", in.Name, in.Error)
		}
		if in.Name == "n" && in.DescribedBy() != "param-n-help param-n-error" {
			t.Errorf("n is described by %q", in.DescribedBy())
		}
	}
	odd := paramInputs(map[string]any{"properties": map[string]any{"a b": map[string]any{"type": "string"}}}, nil, false, nil)
	if len(odd) != 1 || odd[0].ID != "param-0" || odd[0].FormName != "p.a b" {
		t.Errorf("a name with a space: %+v", odd)
	}
}

// TestFormParamsHaveTheSchemaTypes: the form's text becomes the JSON type
// its schema declares (3, not "3"; true, not "true"), an empty input is left
// out, an unchecked box is false, and a value that is not of its type is
// refused beside its input.
func TestFormParamsHaveTheSchemaTypes(t *testing.T) {
	fields := worktype.Fields(decodeSchema(t, fakeFormSchema))
	for _, tc := range []struct {
		name   string
		form   url.Values
		want   string // the parameters as JSON
		errors []string
	}{
		{"typed", url.Values{"n": {"3"}, "verbose": {"true"}, "level": {"high"}, "name": {" Ada "}, "ratio": {"0.5"}, "mode": {"2"}},
			`{"level":"high","mode":2,"n":3,"name":" Ada ","ratio":0.5,"verbose":true}`, nil},
		{"empty inputs left out, the box unchecked", url.Values{"n": {""}, "name": {"x"}, "tags": {""}},
			`{"name":"x","verbose":false}`, nil},
		{"lists", url.Values{"tags": {"a, b ,c"}, "sizes": {"4,5"}},
			`{"sizes":[4,5],"tags":["a","b","c"],"verbose":false}`, nil},
		{"an object is the JSON box's", url.Values{"extra": {`{"a":1}`}}, `{"verbose":false}`, nil},
		{"not of their types", url.Values{"n": {"3.5"}, "ratio": {"x"}, "level": {"mid"}, "sizes": {"1,two"}, "mode": {"3"}},
			`{"verbose":false}`, []string{"level", "mode", "n", "ratio", "sizes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params, errs := formParams(fields, tc.form)
			got, _ := json.Marshal(params)
			if string(got) != tc.want {
				t.Errorf("parameters %s, want %s", got, tc.want)
			}
			var names []string
			for name, msg := range errs {
				names = append(names, name)
				if msg == "" {
					t.Errorf("%s: refused without a reason", name)
				}
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.errors) {
				t.Errorf("refused %v, want %v (%v)", names, tc.errors, errs)
			}
		})
	}
}

// TestSubmitFormBuildsTheRequest: the inputs' typed values, then the JSON
// object's over them (which also clears an input's refusal), and the hints
// make the task; bad forms are refused with what is wrong.
func TestSubmitFormBuildsTheRequest(t *testing.T) {
	fields := worktype.Fields(decodeSchema(t, fakeFormSchema))
	f := submitForm{Target: "code/form", JSON: `{"repo": "chiffon", "n": 5, "ratio": 2}`, MaxDuration: "60", GPUMemory: "4096", Pin: "code-1",
		Params: url.Values{"n": {"3"}, "name": {"Ada"}, "ratio": {"lots"}}, Posted: true}
	req, fieldErrs, err := f.request(fields)
	if err != nil || len(fieldErrs) != 0 {
		t.Fatal(err, fieldErrs)
	}
	got, _ := json.Marshal(req.Parameters)
	if req.ToAgent != "code" || req.WorkType != "form" || string(got) != `{"n":5,"name":"Ada","ratio":2,"repo":"chiffon","verbose":false}` ||
		req.Hints == nil || req.Hints.MaxDurationSeconds != 60 || req.Hints.AgentID != "code-1" || req.Hints.GPUNeed() != 4096 {
		t.Fatalf("request %+v parameters %s hints %+v", req, got, req.Hints)
	}
	if _, fieldErrs, _ := (submitForm{Target: "code/form", Params: url.Values{"n": {"x"}}}).request(fields); fieldErrs["n"] == "" {
		t.Errorf("n=x taken: %v", fieldErrs)
	}
	for name, bad := range map[string]submitForm{
		"no target":     {},
		"JSON array":    {Target: "code/echo", JSON: "[1]"},
		"JSON null":     {Target: "code/echo", JSON: "null"},
		"zero duration": {Target: "code/echo", MaxDuration: "0"},
		"memory words":  {Target: "code/echo", MaxMemory: "lots"},
		"no GPU memory": {Target: "code/echo", GPUMemory: "0"},
	} {
		if _, _, err := bad.request(nil); err == nil || strings.Contains(err.Error(), "%!") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
