package tests

import (
	"strings"
	"testing"
)

// TestEnvelopeNewPipesIntoValidate checks the scripting contract across processes: what
// `envelope new` prints, `envelope validate` accepts, and a broken line is named.
func TestEnvelopeNewPipesIntoValidate(t *testing.T) {
	built := chiffon(t, nil, "", "envelope", "new", "--to", "infra", "--work-type", "run_playbook", "--param", "playbook=site.yml")
	if built.code != 0 {
		t.Fatalf("envelope new: exit %d: %s", built.code, built.stderr)
	}
	broken := strings.Replace(built.stdout, `"infra"`, `"INFRA"`, 1)
	got := chiffon(t, nil, built.stdout+broken, "envelope", "validate", "-")
	want := "ok\ninvalid 5003 to_agent: must be one of orchestrator, infra, desktop, code, research, got \"INFRA\"\n"
	if got.code != 1 || got.stdout != want {
		t.Fatalf("validate: exit %d, stdout %q; want 1, %q", got.code, got.stdout, want)
	}
}
