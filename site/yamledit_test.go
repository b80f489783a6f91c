package site

import (
	"strings"
	"testing"
)

// TestYAMLSetKeepsCommentsAndReadsLikeTheExample: a value set in place keeps
// the comments around it; a list of scalars is written in flow style and a
// list of mappings in block style; missing keys are added, and remove drops a
// top-level key.
func TestYAMLSetKeepsCommentsAndReadsLikeTheExample(t *testing.T) {
	const example = "# the head\nid: x # the id\nnats:\n  # where\n  urls: [nats://old:4222]\nname: me\n"
	for _, tc := range []struct {
		name  string
		edits []yamlEdit
		want  []string
		not   []string
	}{
		{"a scalar in place", []yamlEdit{{"z", []string{"id"}}}, []string{"# the head\n", "id: z # the id\n"}, []string{"id: x"}},
		{"a list of scalars", []yamlEdit{{[]string{"nats://a:4222", "nats://b:4222"}, []string{"nats", "urls"}}},
			[]string{"  # where\n  urls: ['nats://a:4222', 'nats://b:4222']\n"}, []string{"old"}},
		{"a list of mappings", []yamlEdit{{[]map[string]string{{"id": "a"}}, []string{"agents"}}}, []string{"agents:\n  - id: a\n"}, nil},
		{"a new nested key", []yamlEdit{{"s", []string{"store", "jetstream", "kind"}}}, []string{"store:\n  jetstream:\n    kind: s\n"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := parseYAMLDoc([]byte(example))
			if err != nil {
				t.Fatal(err)
			}
			if err := applyEdits(doc, tc.edits); err != nil {
				t.Fatal(err)
			}
			doc.remove("name")
			b, err := doc.bytes()
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("lacks %q:\n%s", w, b)
				}
			}
			for _, n := range append(tc.not, "name: me") {
				if strings.Contains(string(b), n) {
					t.Errorf("still has %q:\n%s", n, b)
				}
			}
		})
	}
	if _, err := parseYAMLDoc([]byte("- a\n- b\n")); err == nil {
		t.Error("a YAML list parsed as a config")
	}
}
