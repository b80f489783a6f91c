package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// Two tasks of the same minute: their ids begin alike and end apart.
const (
	sameMinuteA = "01a21b10-c6bc-7000-8000-00000000aaaa"
	sameMinuteB = "01a21b10-c6bd-7000-8000-11112222bbbb"
)

// TestTasksListsShortIDs: `chiffon tasks` shows each task's short id, which
// differ for tasks of the same minute; --wide shows the whole ids.
func TestTasksListsShortIDs(t *testing.T) {
	clearClientEnv(t)
	at := time.Now()
	server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeAPIJSON(w, http.StatusOK, []*task.Task{
			{ID: sameMinuteA, State: task.StateRunning, ToAgent: envelope.Code, WorkType: "echo", CreatedAt: at},
			{ID: sameMinuteB, State: task.StatePending, ToAgent: envelope.Code, WorkType: "echo", CreatedAt: at},
		})
	}))
	code, out, errOut := runCLI(t, "", append([]string{"tasks"}, server...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "0000aaaa  running") || !strings.HasPrefix(lines[2], "2222bbbb  pending") {
		t.Fatalf("tasks:\n%s", out)
	}
	code, out, _ = runCLI(t, "", append([]string{"tasks", "--wide"}, server...)...)
	if code != 0 || !strings.Contains(out, sameMinuteA+"  running") || !strings.Contains(out, sameMinuteB+"  pending") {
		t.Fatalf("tasks --wide: exit %d:\n%s", code, out)
	}
}

// TestAmbiguousIDListsTheCandidates: the CLI sends a prefix as typed (no check
// of its own), and says the API's ambiguous_id with every candidate, in text
// and in --json.
func TestAmbiguousIDListsTheCandidates(t *testing.T) {
	clearClientEnv(t)
	var rec recorder
	server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		api.WriteErrorDetail(w, http.StatusConflict, api.APIErrorDetail{Code: "ambiguous_id", Field: "id",
			Message:    "01a21b10 names more than one task: " + sameMinuteA + ", " + sameMinuteB + "; give more of the id",
			Candidates: []string{sameMinuteA, sameMinuteB}})
	}))
	for _, args := range [][]string{{"task", "01a21b10"}, {"cancel", "01a21b10"}, {"approve", "01a21b10"}, {"output", "01a21b10"}} {
		code, _, errOut := runCLI(t, "", append(args, server...)...)
		if code != 1 || !strings.Contains(errOut, sameMinuteA) || !strings.Contains(errOut, sameMinuteB) || !strings.Contains(errOut, "HTTP 409") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	for _, r := range rec.all() {
		if !strings.Contains(r, "/api/v1/tasks/01a21b10") {
			t.Errorf("request %q, want the prefix as typed", r)
		}
	}
	code, _, errOut := runCLI(t, "", append([]string{"task", "01a21b10", "--json"}, server...)...)
	var e errorJSON
	if code != 1 || json.Unmarshal([]byte(errOut), &e) != nil || e.Error.Code != "ambiguous_id" || len(e.Error.Candidates) != 2 {
		t.Errorf("--json: exit %d, stderr %q", code, errOut)
	}
}
