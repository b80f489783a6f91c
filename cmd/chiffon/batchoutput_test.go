package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"go.uber.org/goleak"
)

// batchTasksAPI serves, beside batchStreamAPI's batch, the events, output and record
// of the batch's tasks A and B: A streams its output in overlapping pieces, B
// only in its whole output.
func batchTasksAPI(mux *http.ServeMux) {
	off := func(n int64) *int64 { return &n }
	status := func(seq int64, at int64, out string) task.Event {
		return task.Event{Seq: seq, Type: task.EventStatus, State: task.StateRunning, OutputOffset: off(at),
			Status: &envelope.WorkStatus{Step: envelope.Step{Output: out}}}
	}
	events := map[string][]task.Event{
		taskA: {status(1, 0, "hello\nwor"), status(2, 6, "world\npart"), status(3, 16, "ial")},
		taskB: {},
	}
	whole := map[string]string{taskA: "hello\nworld\npartial", taskB: "b says\nhi\n"}
	exits := map[string]int64{taskA: 0, taskB: 3}
	mux.HandleFunc("GET /api/v1/tasks/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		w.Header().Set("Content-Type", "text/event-stream")
		evs := append(events[id], task.Event{Seq: int64(len(events[id]) + 1), Type: task.EventResult, State: task.StateSucceeded})
		for _, e := range evs {
			data, _ := json.Marshal(e)
			fmt.Fprintf(w, "id: %d\nevent: task\ndata: %s\n\n", e.Seq, data)
		}
	})
	mux.HandleFunc("GET /api/v1/tasks/{id}/output", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Chiffon-Output-Complete", "true")
		fmt.Fprint(w, whole[r.PathValue("id")])
	})
	mux.HandleFunc("GET /api/v1/tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		start := batchCreated.Add(time.Second)
		end := start.Add(1500 * time.Millisecond)
		writeAPIJSON(w, http.StatusOK, &task.Task{ID: id, State: task.StateSucceeded, CreatedAt: batchCreated,
			FirstDispatchAt: &start, FinishedAt: &end, Result: &task.Result{ExitCode: exits[id]}})
	})
}

// TestBatchWaitPrintsEachAgentsOutput: batch --wait prints each agent's output
// on stdout, each byte once, by lines prefixed with the agent's id (with
// --group, agent by agent at the end), and a table of the agents on stderr.
func TestBatchWaitPrintsEachAgentsOutput(t *testing.T) {
	clearClientEnv(t)
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // after the server's Close
	var rec recorder
	final := testBatch(api.BatchSucceeded, "succeeded", "succeeded", true)
	server := batchStreamAPI(t, &rec, func(int) []*api.Batch {
		return []*api.Batch{testBatch(api.BatchRunning, "running", "running", false), final}
	}, nil, batchTasksAPI)

	code, out, errOut := runCLI(t, "", append([]string{"batch", batchID, "--wait"}, server...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var a, b []string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "a: "):
			a = append(a, l)
		case strings.HasPrefix(l, "b: "):
			b = append(b, l)
		default:
			t.Errorf("a line of no agent: %q", l)
		}
	}
	if want := []string{"a: hello", "a: world", "a: partial"}; strings.Join(a, "|") != strings.Join(want, "|") {
		t.Errorf("a's lines %q, want %q (stdout %q)", a, want, out)
	}
	if want := []string{"b: b says", "b: hi"}; strings.Join(b, "|") != strings.Join(want, "|") {
		t.Errorf("b's lines %q, want %q (stdout %q)", b, want, out)
	}
	for _, want := range []string{"AGENT  STATE      EXIT  DURATION", "a      succeeded  0     1.5s",
		"b      succeeded  3     1.5s", "c      offline    -     -"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}

	code, out, errOut = runCLI(t, "", append([]string{"batch", batchID, "--wait", "--group"}, server...)...)
	if want := "=== a (succeeded)\nhello\nworld\npartial\n=== b (succeeded)\nb says\nhi\n"; code != 0 || out != want {
		t.Errorf("--group: exit %d, stdout %q, want %q; stderr:\n%s", code, out, want, errOut)
	}
}

// TestBatchRetryRunsTheAgentsThatDidNotSucceed: batch retry makes a batch of
// the same request on the agents that did not succeed, by id, and refuses a
// batch that runs or succeeded everywhere.
func TestBatchRetryRunsTheAgentsThatDidNotSucceed(t *testing.T) {
	clearClientEnv(t)
	cases := []struct {
		name  string
		batch *api.Batch
		body  string // the new batch's request; "" when refused
		err   string
	}{
		{"b failed, c offline", testBatch(api.BatchFailed, "succeeded", "failed", true),
			`{"to_agent":"infra","work_type":"patch","parameters":{"n":1},"agents":["b","c"],"max_parallel":2,"stop_on_failure":true}`, ""},
		{"running", testBatch(api.BatchRunning, "succeeded", "running", false), "", "is running: wait for its end"},
		{"every agent succeeded", func() *api.Batch {
			b := testBatch(api.BatchSucceeded, "succeeded", "succeeded", true)
			b.Targets = b.Targets[:2]
			return b
		}(), "", "succeeded on every agent (2 agents): nothing to retry"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.batch.Parameters = map[string]any{"n": 1}
			var rec recorder
			var got string
			mux := http.NewServeMux()
			mux.HandleFunc("GET /api/v1/batches/{id}", func(w http.ResponseWriter, r *http.Request) {
				writeAPIJSON(w, http.StatusOK, tc.batch)
			})
			mux.HandleFunc("POST /api/v1/batches", func(w http.ResponseWriter, r *http.Request) {
				got = rec.add(r)
				writeAPIJSON(w, http.StatusCreated, &api.Batch{ID: "new-batch", State: api.BatchRunning})
			})
			code, out, errOut := runCLI(t, "", append([]string{"batch", "retry", batchID}, serveAPI(t, mux)...)...)
			if tc.body == "" {
				if code != 1 || !strings.Contains(errOut, tc.err) || rec.count("POST") != 0 {
					t.Fatalf("exit %d, stderr %q, requests %q: want refused with %q", code, errOut, rec.all(), tc.err)
				}
				return
			}
			if code != 0 || out != "new-batch\n" {
				t.Fatalf("exit %d, stdout %q: %s", code, out, errOut)
			}
			jsonEqual(t, got, json.RawMessage(tc.body))
		})
	}
}
