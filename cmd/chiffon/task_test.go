package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/taskview"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// oneTaskAPI serves task t1, failed with structured output after a retry, and records the body of
// each cancel.
func oneTaskAPI(t *testing.T) (args []string, cancels func() []string) {
	t.Helper()
	at := time.Date(2026, 1, 19, 4, 21, 4, 0, time.UTC)
	tsk := &task.Task{ID: "t1", State: task.StateFailed, ToAgent: envelope.Code, WorkType: "check",
		CreatedAt: at, UpdatedAt: at, FinishedAt: &at,
		Steps:   []task.StepInfo{{Number: 1, Name: "probe", Status: "failed", UpdatedAt: at}},
		Retries: []task.Retry{{Attempt: 1, Code: 5001, Message: "no message for 30s", AgentID: "code-1", WaitMS: 1000, At: at}},
		Result: &task.Result{Status: envelope.ResultFailed, ExitCode: 3, At: at,
			StructuredOutput: json.RawMessage(`{"down":["web-2"],"n":12345678901234567890}`)}}
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/tasks/t1":
		case "/api/v1/tasks/t1/history":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode([]task.Event{
				{Seq: 1, Type: task.EventState, At: at, State: task.StatePending, Message: "submitted", By: "alice"},
				{Seq: 2, Type: task.EventResult, At: at, State: task.StateFailed,
					Result: &envelope.WorkResult{Status: envelope.ResultFailed, ExitCode: 3}},
			})
			return
		case "/api/v1/tasks/t1/cancel":
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, string(b))
			mu.Unlock()
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(tsk)
	}))
	t.Cleanup(srv.Close)
	tokenFile := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tokenFile, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--server", srv.URL, "--api-token-file", tokenFile}, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), bodies...)
	}
}

func TestTaskShowsStructuredOutput(t *testing.T) {
	server, _ := oneTaskAPI(t)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"human", nil, []string{"Structured output:", `"down": [`, `"web-2"`, `"n": 12345678901234567890`,
			"Failed attempts:", "1  code-1  5001 no message for 30s  1s",
			"History:", "pending  alice  submitted", "failed   -      result failed, exit 3"}},
		{"json", []string{"--json"}, []string{`"structured_output": {`, `"n": 12345678901234567890`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", append(append([]string{"task", "t1"}, c.args...), server...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestCancelSendsTheReason(t *testing.T) {
	server, cancels := oneTaskAPI(t)
	if code, _, errOut := runCLI(t, "", append([]string{"cancel", "t1", "--reason", "wrong host"}, server...)...); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var req api.CancelRequest
	if got := cancels(); len(got) != 1 || json.Unmarshal([]byte(got[0]), &req) != nil || req.Reason != "wrong host" {
		t.Fatalf("cancel bodies %q, want one with reason %q", got, "wrong host")
	}
}

func TestProgressStopsShortOf100WhenTheTaskDidNotSucceed(t *testing.T) {
	at := time.Date(2026, 1, 19, 4, 21, 4, 0, time.UTC)
	running := &task.Event{Seq: 1, Type: task.EventStatus, At: at, State: task.StateRunning,
		Status: &envelope.WorkStatus{Status: envelope.StatusRunning, ProgressPercent: 40, Step: envelope.Step{Number: 1, Name: "probe"}}}
	cases := []struct {
		result string
		state  task.State
		want   int
	}{
		{envelope.ResultSuccess, task.StateSucceeded, 100},
		{envelope.ResultFailed, task.StateFailed, 40},
		{envelope.ResultCancelled, task.StateCancelled, 40},
	}
	for _, c := range cases {
		t.Run(c.result, func(t *testing.T) {
			var st taskview.State
			st.Apply(running)
			st.Apply(&task.Event{Seq: 2, Type: task.EventResult, At: at, State: c.state,
				Result: &envelope.WorkResult{Status: c.result}})
			if st.Percent != c.want || st.State != c.state {
				t.Fatalf("after a %s result: %d%% %s, want %d%% %s", c.result, st.Percent, st.State, c.want, c.state)
			}
		})
	}
}
