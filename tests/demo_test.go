package tests

import (
	"regexp"
	"strings"
	"testing"
)

func TestDemoRunsATaskOnEveryAgentType(t *testing.T) {
	got := chiffon(t, nil, "", "demo")
	if got.code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", got.code, got.stdout, got.stderr)
	}
	for _, want := range []string{
		"── infra sleep: task ", "── desktop system_info: task ", "── code echo: task ",
		"── research run_command: task ", "hello from the code agent", "4 of 4 tasks succeeded",
	} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, got.stdout)
		}
	}
	if strings.Count(got.stdout, "succeeded (exit 0)") != 4 {
		t.Errorf("want 4 succeeded results:\n%s", got.stdout)
	}
	// Live progress: the sleep task reports its percent while it runs.
	if !regexp.MustCompile(`\[infra\]\s+running\s+[1-9][0-9]?%  step 1: sleeping`).MatchString(got.stdout) {
		t.Errorf("no live progress of the sleep task:\n%s", got.stdout)
	}
}
