package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
)

// TestDemoPrintsOnlyPathsItKeeps: every path the demo prints under the temp dir still
// exists when it returns; the dir is kept with --keep and when a task failed.
func TestDemoPrintsOnlyPathsItKeeps(t *testing.T) {
	echo := api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo", Parameters: map[string]any{"message": "hi"}}
	fails := api.SubmitRequest{ToAgent: envelope.Research, WorkType: "run_command",
		Parameters: map[string]any{"command": "df", "args": []any{"/no/such/dir"}}}
	cases := []struct {
		name  string
		tasks []api.SubmitRequest
		keep  bool
		ok    bool
		kept  bool
	}{
		{"success", []api.SubmitRequest{echo}, false, true, false},
		{"success with --keep", []api.SubmitRequest{echo}, true, true, true},
		{"a failed task", []api.SubmitRequest{echo, fails}, false, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := &keptWriter{}
			if tc.keep {
				// With --keep the stack runs until interrupted: the dashboard it
				// names answers, then the test interrupts it.
				out.kept = func(text string) {
					if m := regexp.MustCompile(`see the tasks at (\S+/) `).FindStringSubmatch(text); m != nil {
						resp, err := http.Get(m[1] + "login")
						if err != nil || resp.StatusCode != http.StatusOK {
							t.Errorf("the kept stack's dashboard: %v %v", resp, err)
						} else {
							resp.Body.Close()
						}
					} else {
						t.Errorf("--keep names no dashboard:\n%s", text)
					}
					cancel()
				}
			}
			err := demo(ctx, out, tc.tasks, tc.keep)
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

// keptWriter collects the demo's output and, once it says the stack keeps
// running, calls kept with all of it (in its own goroutine: the demo waits).
type keptWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	kept func(text string)
	told bool
}

func (w *keptWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if text := w.buf.String(); w.kept != nil && !w.told && strings.Contains(text, "Press Ctrl-C") {
		w.told = true
		go w.kept(text)
	}
	return len(p), nil
}

func (w *keptWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
