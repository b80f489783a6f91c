package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
)

// TestDemoPrintsOnlyPathsItKeeps: every path the demo prints under the temp dir still
// exists when it returns; the dir is kept with --keep and when a task failed.
func TestDemoPrintsOnlyPathsItKeeps(t *testing.T) {
	echo := orchestrator.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo", Parameters: map[string]any{"message": "hi"}}
	fails := orchestrator.SubmitRequest{ToAgent: envelope.Research, WorkType: "run_command",
		Parameters: map[string]any{"command": "df", "args": []any{"/no/such/dir"}}}
	cases := []struct {
		name  string
		tasks []orchestrator.SubmitRequest
		keep  bool
		ok    bool
		kept  bool
	}{
		{"success", []orchestrator.SubmitRequest{echo}, false, true, false},
		{"success with --keep", []orchestrator.SubmitRequest{echo}, true, true, true},
		{"a failed task", []orchestrator.SubmitRequest{echo, fails}, false, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			var out bytes.Buffer
			err := demo(context.Background(), &out, tc.tasks, tc.keep)
			if (err == nil) != tc.ok || (err != nil && err.Error() != "1 of 2 demo tasks did not succeed") {
				t.Fatalf("demo: %v\n%s", err, out.String())
			}
			paths := regexp.MustCompile(regexp.QuoteMeta(tmp)+`/[^\s)]+`).FindAllString(out.String(), -1)
			for _, p := range paths {
				if _, err := os.Stat(p); err != nil {
					t.Errorf("printed %s, which is gone: %v", p, err)
				}
			}
			entries, _ := os.ReadDir(tmp)
			if kept := len(entries) > 0; kept != tc.kept || kept != (len(paths) > 0) {
				t.Errorf("kept the dir: %v, printed %q; want kept %v, printed iff kept:\n%s", kept, paths, tc.kept, out.String())
			}
		})
	}
}
