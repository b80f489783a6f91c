package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitConfigsDoNotNameTheExamples: a written orchestrator.yaml says how to run
// itself, not the example it came from.
func TestInitConfigsDoNotNameTheExamples(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "", "init", "--dir", dir, "--agents", "code"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	b, err := os.ReadFile(filepath.Join(dir, "orchestrator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "examples/") || !strings.HasPrefix(string(b), "# chiffon orchestrator --config orchestrator.yaml") {
		t.Fatalf("orchestrator.yaml starts:\n%s", string(b)[:min(200, len(b))])
	}
}
