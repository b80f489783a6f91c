package worktype_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/worktype"
)

const playbookSchema = `{"type": "object", "required": ["playbook"], "properties": {
	"playbook": {"type": "string", "x-chiffon-path": true},
	"inventory": {"type": "string", "x-chiffon-path": true, "default": "inventory"},
	"limit": {"type": "string", "x-chiffon-path": false},
	"forks": {"type": "integer", "default": 5},
	"tags": {"type": "array", "default": ["a"]}
}}`

// TestPathKeywordRefusesWhatLeavesTheDirectory: every schema check (the
// orchestrator's at submit, the agent's) refuses a path parameter that is
// empty, absolute or climbs out with "..", by its text alone.
func TestPathKeywordRefusesWhatLeavesTheDirectory(t *testing.T) {
	s, err := worktype.Compile(schemaOf(t, playbookSchema))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		playbook string
		refused  string // "" for accepted
	}{
		{"site.yml", ""},
		{"plays/site.yml", ""},
		{"./site.yml", ""},
		{"plays/../site.yml", ""},
		{"..site.yml", ""},
		{"/etc/x.yml", "is an absolute path"},
		{"../../etc/x.yml", "leaves the work type's directory"},
		{"plays/../../x.yml", "leaves the work type's directory"},
		{"..", "leaves the work type's directory"},
		{"", "is empty"},
	}
	for _, tc := range cases {
		err := s.Check(map[string]any{"playbook": tc.playbook})
		if tc.refused == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.playbook, err)
			}
			continue
		}
		var pe *worktype.ParamError
		if !errors.As(err, &pe) || pe.Pointer != "/playbook" || !strings.Contains(pe.Message, tc.refused) {
			t.Errorf("%q: got %v, want a ParamError at /playbook with %q", tc.playbook, err, tc.refused)
		}
	}
	// false marks nothing; a value of another type is the schema's type's business.
	if err := s.Check(map[string]any{"playbook": "p.yml", "limit": "/x"}); err != nil {
		t.Errorf("x-chiffon-path: false checked limit: %v", err)
	}
	if _, err := worktype.Compile(schemaOf(t, `{"properties": {"p": {"x-chiffon-path": "yes"}}}`)); err == nil {
		t.Error("x-chiffon-path: \"yes\" compiled; want a boolean")
	}
}

func TestPathParamsAreTheMarkedTopLevelProperties(t *testing.T) {
	got, err := worktype.PathParams(schemaOf(t, playbookSchema))
	if err != nil || !slices.Equal(got, []string{"inventory", "playbook"}) {
		t.Fatalf("got %v, %v; want inventory, playbook", got, err)
	}
	for _, tc := range []struct{ schema, err string }{
		{`{"x-chiffon-path": true}`, "at schema #: it applies to top-level properties only"},
		{`{"properties": {"files": {"items": {"x-chiffon-path": true}}}}`, "at schema #/properties/files/items"},
		{`{"$defs": {"p": {"x-chiffon-path": true}}}`, "at schema #/$defs/p"},
		{`{"properties": {"x-chiffon-path": {"type": "string"}}}`, ""},       // a property so named
		{`{"properties": {"p": {"default": {"x-chiffon-path": true}}}}`, ""}, // data, not a schema
	} {
		_, err := worktype.PathParams(schemaOf(t, tc.schema))
		if (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: got %v, want %q", tc.schema, err, tc.err)
		}
	}
}

func TestWithDefaultsFillsInWhatIsAbsent(t *testing.T) {
	schema := schemaOf(t, playbookSchema)
	given := map[string]any{"playbook": "site.yml", "forks": nil}
	got := worktype.WithDefaults(schema, given)
	want := map[string]any{"playbook": "site.yml", "inventory": "inventory", "forks": json.Number("5"), "tags": []any{"a"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
	if len(given) != 2 || given["forks"] != nil {
		t.Errorf("the given parameters changed: %v", given)
	}
	full := map[string]any{"playbook": "p", "inventory": "hosts", "forks": 1, "tags": []any{}}
	if got := worktype.WithDefaults(schema, full); !reflect.DeepEqual(got, full) {
		t.Errorf("a value given was replaced: %v", got)
	}
	if got := worktype.WithDefaults(schema, nil); got["inventory"] != "inventory" {
		t.Errorf("nil parameters: got %v", got)
	}
}
