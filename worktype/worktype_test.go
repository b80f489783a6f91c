package worktype_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/worktype"
)

// schemaOf decodes a JSON schema as a registration's would be.
func schemaOf(t *testing.T, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

const deploySchema = `{"type": "object", "required": ["host", "replicas"], "additionalProperties": false,
	"properties": {
		"host": {"type": "string", "description": "Where to deploy."},
		"replicas": {"type": "integer", "minimum": 1, "default": 2},
		"dry_run": {"type": "boolean"},
		"mode": {"enum": ["fast", "safe"]},
		"ratio": {"type": ["number", "null"]},
		"ports": {"type": "array", "items": {"type": "integer"}},
		"tags": {"type": "array", "items": {"enum": ["a", "b"]}},
		"extra": {"type": "object"}
	}}`

func TestCheckNamesTheFailingValueAndWhatTheSchemaWanted(t *testing.T) {
	s, err := worktype.Compile(schemaOf(t, deploySchema))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		params  map[string]any
		pointer string
		message string // a part of it
	}{
		{"valid", map[string]any{"host": "h", "replicas": 2}, "", ""},
		{"json numbers valid", map[string]any{"host": "h", "replicas": json.Number("3")}, "", ""},
		{"wrong type", map[string]any{"host": "h", "replicas": "2"}, "/replicas", "got string, want integer"},
		{"below minimum", map[string]any{"host": "h", "replicas": 0}, "/replicas", "minimum"},
		{"missing required", map[string]any{"replicas": 1}, "", "missing property 'host'"},
		{"nil is the empty object", nil, "", "missing properties"},
		{"enum names the allowed values", map[string]any{"host": "h", "replicas": 1, "mode": "slow"}, "/mode", "'fast', 'safe'"},
		{"array item", map[string]any{"host": "h", "replicas": 1, "ports": []any{1, "x"}}, "/ports/1", "want integer"},
		{"undeclared", map[string]any{"host": "h", "replicas": 1, "colour": "red"}, "", "additional properties 'colour'"},
	}
	for _, tc := range cases {
		err := s.Check(tc.params)
		if tc.message == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var pe *worktype.ParamError
		if !errors.As(err, &pe) {
			t.Errorf("%s: got %v, want a ParamError", tc.name, err)
			continue
		}
		if pe.Pointer != tc.pointer || !strings.Contains(pe.Message, tc.message) {
			t.Errorf("%s: got pointer %q message %q, want %q and %q", tc.name, pe.Pointer, pe.Message, tc.pointer, tc.message)
		}
	}
}

func TestFromRegistrationTakesOnlyAWellFormedCatalogue(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(secret, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := func(s string) map[string]any {
		return map[string]any{worktype.Extension: map[string]any{"echo": schemaOf(t, s)}}
	}
	withGraces := func(x map[string]any, graces string) map[string]any {
		var v any
		if err := json.Unmarshal([]byte(graces), &v); err != nil {
			t.Fatal(err)
		}
		x[worktype.StopGraceExtension] = v
		return x
	}
	cases := []struct {
		name string
		x    map[string]any
		err  string // "" for accepted
	}{
		{"none", nil, ""},
		{"other extensions only", map[string]any{"trace": "x"}, ""},
		{"valid", spec(`{"description": "d", "parameters": {"type": "object"}, "approval": "required"}`), ""},
		{"empty spec", spec(`{}`), ""},
		{"not an object", map[string]any{worktype.Extension: []any{}}, "x_custom_fields.work_type_catalog: must be an object"},
		{"work type not offered", map[string]any{worktype.Extension: map[string]any{"sleep": map[string]any{}}},
			"work_type_catalog.sleep: not one of the registration's work_types"},
		{"bad work type name", map[string]any{worktype.Extension: map[string]any{"Bad": map[string]any{}}}, "work_type_catalog.Bad: "},
		{"unknown spec field", spec(`{"descr": "d"}`), "work_type_catalog.echo: must be an object"},
		{"bad approval", spec(`{"approval": "maybe"}`), "work_type_catalog.echo.approval: "},
		{"a stop grace", withGraces(spec(`{}`), `{"echo": 30000}`), ""},
		{"a stop grace in the spec (the previous release refuses it there)", spec(`{"stop_grace_ms": 30000}`), "work_type_catalog.echo: must be an object"},
		{"a negative stop grace", withGraces(spec(`{}`), `{"echo": -1}`), "work_type_stop_grace_ms.echo: must be an integer from 0 to 600000"},
		{"a stop grace over 10 minutes", withGraces(spec(`{}`), `{"echo": 600001}`), "work_type_stop_grace_ms.echo: "},
		{"a stop grace of a work type not in the catalogue", withGraces(spec(`{}`), `{"sleep": 1}`), "work_type_stop_grace_ms.sleep: not in the registration's catalogue"},
		{"stop graces not an object", withGraces(spec(`{}`), `[1]`), "work_type_stop_grace_ms: must be an object"},
		{"long description", map[string]any{worktype.Extension: map[string]any{"echo": map[string]any{
			"description": strings.Repeat("d", worktype.MaxDescription+1)}}}, "work_type_catalog.echo.description: "},
		{"schema not compiling", spec(`{"parameters": {"type": 12}}`), "work_type_catalog.echo.parameters schema: "},
		{"ref to a file refused", spec(`{"parameters": {"$ref": "file://` + secret + `"}}`), "only references within the schema"},
		{"ref to the network refused", spec(`{"parameters": {"$ref": "http://127.0.0.1:1/s.json"}}`), "only references within the schema"},
	}
	for _, tc := range cases {
		c, err := worktype.FromRegistration(tc.x, []string{"echo"})
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: got %v (catalogue %v), want an error with %q", tc.name, err, c, tc.err)
		}
	}
	c, err := worktype.FromRegistration(spec(`{"description": "d", "parameters": {"type": "object", "required": ["m"]}}`), []string{"echo"})
	if err != nil || c["echo"].Description != "d" || c["echo"].Schema == nil || c["echo"].Schema.Check(nil) == nil {
		t.Fatalf("got %+v, %v: want echo's spec with its schema compiled", c, err)
	}
}

func TestPutRoundTripsThroughJSON(t *testing.T) {
	c := worktype.Catalog{"echo": {Description: "d", Parameters: schemaOf(t, deploySchema)}}
	x := worktype.Put(nil, c)
	b, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	got, err := worktype.FromRegistration(schemaOf(t, string(b)), []string{"echo"})
	if err != nil || got["echo"].Description != "d" || got["echo"].Schema.Check(map[string]any{"host": "h", "replicas": 1}) != nil {
		t.Fatalf("got %+v, %v", got, err)
	}
	if x := worktype.Put(nil, nil); x != nil {
		t.Errorf("an empty catalogue made %v", x)
	}
}

func TestSameSchemaWhateverTheKeyOrder(t *testing.T) {
	a, _ := worktype.Compile(schemaOf(t, `{"type": "object", "required": ["a"]}`))
	b, _ := worktype.Compile(schemaOf(t, `{"required": ["a"], "type": "object"}`))
	c, _ := worktype.Compile(schemaOf(t, `{"type": "object"}`))
	if !a.Same(b) || a.Same(c) {
		t.Fatalf("Same: a~b %v (want true), a~c %v (want false)", a.Same(b), a.Same(c))
	}
}

func TestFieldsTypeTheTopLevelProperties(t *testing.T) {
	got := worktype.Fields(schemaOf(t, deploySchema))
	want := []worktype.Field{
		{Name: "host", Type: "string", Description: "Where to deploy.", Required: true},
		{Name: "replicas", Type: "integer", Default: json.Number("2"), Required: true},
		{Name: "dry_run", Type: "boolean"},
		{Name: "extra", Type: "object"},
		{Name: "mode", Type: "string", Enum: []any{"fast", "safe"}},
		{Name: "ports", Type: "array", Items: "integer"},
		{Name: "ratio", Type: "number"},
		{Name: "tags", Type: "array", Items: "string", Enum: []any{"a", "b"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%#v\nwant\n%#v", got, want)
	}
	if f := worktype.Fields(map[string]any{"type": "object"}); len(f) != 0 {
		t.Errorf("a schema without properties has fields %v", f)
	}
}

func TestConvertReadsTextAsTheFieldsType(t *testing.T) {
	fields := map[string]worktype.Field{}
	for _, f := range worktype.Fields(schemaOf(t, deploySchema)) {
		fields[f.Name] = f
	}
	fields["free"] = worktype.Field{Name: "free"}
	fields["level"] = worktype.Field{Name: "level", Type: "integer", Enum: []any{json.Number("1"), json.Number("3")}}
	cases := []struct {
		field, text string
		want        any
		err         string
	}{
		{"replicas", "2", int64(2), ""},
		{"replicas", " 7 ", int64(7), ""},
		{"replicas", "2.5", nil, "want an integer"},
		{"replicas", "two", nil, "want an integer"},
		{"ratio", "0.25", 0.25, ""},
		{"ratio", "x", nil, "want a number"},
		{"dry_run", "true", true, ""},
		{"dry_run", "0", false, ""},
		{"dry_run", "yes", nil, "want true or false"},
		{"host", "007", "007", ""},
		{"free", "42", "42", ""},
		{"mode", "safe", "safe", ""},
		{"mode", "slow", nil, `must be one of "fast", "safe"`},
		{"level", "3", int64(3), ""},
		{"level", "2", nil, "must be one of 1, 3"},
		{"ports", "80,443", []any{int64(80), int64(443)}, ""},
		{"ports", "", []any(nil), ""},
		{"ports", "80,x", nil, `item "x": want an integer`},
		{"tags", "a,b", []any{"a", "b"}, ""},
		{"tags", "a,c", nil, "must be one of"},
		{"extra", "{}", nil, "name:=JSON"},
	}
	for _, tc := range cases {
		got, err := fields[tc.field].Convert(tc.text)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s=%q: got %v, %v; want an error with %q", tc.field, tc.text, got, err, tc.err)
			}
		case err != nil || !reflect.DeepEqual(got, tc.want):
			t.Errorf("%s=%q: got %#v, %v; want %#v", tc.field, tc.text, got, err, tc.want)
		}
	}
}
