package orchestrator

import (
	"os"
	"regexp"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestWorkflowDocsExamplesAreValid: every workflows: block of
// docs/workflows.md reads as config and passes the whole check, so the
// examples stay true.
func TestWorkflowDocsExamplesAreValid(t *testing.T) {
	doc, err := os.ReadFile("../docs/workflows.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(workflows:.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) < 4 {
		t.Fatalf("%d workflows: blocks in docs/workflows.md, want the overview and three examples", len(blocks))
	}
	names := map[string]bool{}
	for _, b := range blocks {
		var c struct {
			Workflows WorkflowsConfig `yaml:"workflows"`
		}
		if err := yaml.Unmarshal(b[1], &c); err != nil {
			t.Fatalf("%v in\n%s", err, b[1])
		}
		if err := c.Workflows.validate(); err != nil {
			t.Fatalf("%v in\n%s", err, b[1])
		}
		for _, w := range c.Workflows {
			names[w.Name] = true
		}
	}
	for _, want := range []string{"nightly", "patch-tuesday", "retrain", "health"} {
		if !names[want] {
			t.Errorf("docs/workflows.md has no valid workflow %s", want)
		}
	}
}
