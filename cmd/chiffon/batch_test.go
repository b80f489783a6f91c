package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/internal/taskview"
)

const (
	batchID = "5f0c6d4e-8a1b-4c2d-9e3f-0a1b2c3d4e5f"
	taskA   = "11111111-1111-4111-8111-111111111111"
	taskB   = "22222222-2222-4222-8222-222222222222"
)

// fakeAPI serves h to the bearer token "tok" and returns the flags that point
// a client command at it.
func serveAPI(t *testing.T, h http.Handler) []string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			writeAPIError(w, http.StatusUnauthorized, "unauthorized", "", "bad token")
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	tokenFile := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tokenFile, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--server", srv.URL, "--api-token-file", tokenFile}
}

func writeAPIJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeAPIError(w http.ResponseWriter, status int, code, field, msg string) {
	writeAPIJSON(w, status, api.ErrorBody{Error: api.APIErrorDetail{Code: code, Field: field, Message: msg}})
}

// writeSSE sends each batch as one "batch" event, as the orchestrator does.
func writeSSE(w http.ResponseWriter, bs ...*api.Batch) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for i, b := range bs {
		data, _ := json.Marshal(b)
		fmt.Fprintf(w, "id: %d\nevent: batch\ndata: %s\n\n", i+1, data)
		w.(http.Flusher).Flush()
	}
}

// recorder keeps the requests a fake API got, with their bodies.
type recorder struct {
	mu   sync.Mutex
	reqs []string // "METHOD /path?query body"
}

func (rec *recorder) add(r *http.Request) string {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.reqs = append(rec.reqs, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(body)))
	return string(body)
}

func (rec *recorder) all() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]string(nil), rec.reqs...)
}

func (rec *recorder) count(prefix string) int {
	n := 0
	for _, r := range rec.all() {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

var batchCreated = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

// testBatch is batch batchID over agents a (task A), b (task B) and c
// (offline), its targets in the states given for a and b; final sets its end.
func testBatch(state api.BatchState, a, b string, final bool) *api.Batch {
	bt := &api.Batch{ID: batchID, State: state,
		BatchRequest: api.BatchRequest{ToAgent: "infra", WorkType: "patch", Labels: map[string]string{"site": "attic"},
			Agents: []string{"a", "b", "c"}, MaxParallel: 2, StopOnFailure: true},
		Targets: []api.BatchTarget{
			{AgentID: "a", TaskID: taskA, State: a},
			{AgentID: "b", TaskID: taskB, State: b},
			{AgentID: "c", State: api.TargetOffline},
		},
		CreatedAt: batchCreated,
	}
	bt.Counts = map[string]int{}
	for i := range bt.Targets {
		t := &bt.Targets[i]
		if t.State == "succeeded" {
			t.ProgressPercent = 100
		}
		bt.Counts[t.State]++
	}
	if final {
		end := batchCreated.Add(90 * time.Second)
		bt.FinishedAt = &end
	}
	return bt
}

// jsonEqual fails t unless got is the JSON of want.
func jsonEqual(t *testing.T, got string, want any) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("not JSON: %q", got)
	}
	wb, _ := json.Marshal(want)
	_ = json.Unmarshal(wb, &w)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("body %s\nwant %s", got, wb)
	}
}

func TestSubmitAllPostsABatch(t *testing.T) {
	clearClientEnv(t)
	cases := []struct {
		name string
		args []string
		want map[string]any
	}{
		{"every agent", []string{"--all"}, map[string]any{"to_agent": "infra", "work_type": "patch"}},
		{"labels and agents imply --all", []string{"--label", "site=attic", "--label", "gpu=true", "--agents", "a,b", "--agents", "c",
			"--max-parallel", "2", "--stop-on-failure", "--param", "reboot:=true", "--hint", "max_duration_seconds=600"},
			map[string]any{"to_agent": "infra", "work_type": "patch", "labels": map[string]string{"site": "attic", "gpu": "true"},
				"agents": []string{"a", "b", "c"}, "max_parallel": 2, "stop_on_failure": true,
				"parameters": map[string]any{"reboot": true}, "hints": map[string]any{"max_duration_seconds": 600}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rec.add(r)
				if r.Method != http.MethodPost || r.URL.Path != "/api/v1/batches" {
					http.NotFound(w, r)
					return
				}
				writeAPIJSON(w, http.StatusCreated, testBatch(api.BatchRunning, "waiting", "waiting", false))
			}))
			args := append([]string{"submit", "--to", "infra", "--work-type", "patch"}, tc.args...)
			code, out, errOut := runCLI(t, "", append(args, server...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			reqs := rec.all()
			if len(reqs) != 1 {
				t.Fatalf("requests %q, want one POST", reqs)
			}
			jsonEqual(t, strings.TrimPrefix(reqs[0], "POST /api/v1/batches "), tc.want)
			if out != batchID+"\n" {
				t.Errorf("stdout %q, want the batch id", out)
			}
			// The agent that gets no task is not skipped silently.
			if !strings.Contains(errOut, "1 of 3 agents get no task") || !strings.Contains(errOut, "  c  offline") {
				t.Errorf("stderr does not list the offline agent: %q", errOut)
			}
		})
	}
}

func TestSubmitAllJSONPrintsTheBatch(t *testing.T) {
	clearClientEnv(t)
	server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeAPIJSON(w, http.StatusCreated, testBatch(api.BatchRunning, "waiting", "waiting", false))
	}))
	code, out, errOut := runCLI(t, "", append([]string{"submit", "--to", "infra", "--work-type", "patch", "--all", "--json"}, server...)...)
	var b api.Batch
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil || b.ID != batchID || len(b.Targets) != 3 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if errOut != "" {
		t.Errorf("stderr %q, want nothing under --json", errOut)
	}
}

func TestSubmitAllUsageErrorsNameTheFlag(t *testing.T) {
	clearClientEnv(t)
	var rec recorder
	server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		http.NotFound(w, r)
	}))
	base := []string{"submit", "--to", "infra", "--work-type", "patch"}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"--hint agent_id with --all", []string{"--all", "--hint", "agent_id=a"}, "--hint agent_id is not for a batch"},
		{"--hint agent_id with --label", []string{"--label", "site=attic", "--hint", "agent_id=a"}, "--hint agent_id is not for a batch"},
		{"--max-parallel without a batch", []string{"--max-parallel", "2"}, "--max-parallel is for a batch"},
		{"--stop-on-failure without a batch", []string{"--stop-on-failure"}, "--stop-on-failure is for a batch"},
		{"a negative --max-parallel", []string{"--all", "--max-parallel", "-1"}, "--max-parallel: must be 0"},
		{"a label without =", []string{"--label", "site"}, `--label: "site": want key=value`},
		{"a bad label", []string{"--label", "=x"}, "--label"},
		{"a bad agent id", []string{"--agents", "a,bad id"}, "--agents: agents[1]:"},
		{"a bad agent type", []string{"--all", "--to", "toaster"}, "--to: must be one of"},
		{"--group without a batch", []string{"--group", "--wait"}, "--group is for a batch"},
		{"--group without --wait", []string{"--all", "--group"}, "--group is for --wait"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, "", append(append(base, tc.args...), server...)...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 naming %q", code, errOut, tc.want)
			}
		})
	}
	if reqs := rec.all(); len(reqs) != 0 {
		t.Errorf("usage errors sent requests: %q", reqs)
	}
}

func TestSubmitAllWithNoAgentSaysSo(t *testing.T) {
	clearClientEnv(t)
	server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusUnprocessableEntity, "no_agents", "", "no infra agent matches: none is known with those labels and ids")
	}))
	code, _, errOut := runCLI(t, "", append([]string{"submit", "--to", "infra", "--work-type", "patch", "--label", "site=moon"}, server...)...)
	if code != 1 || !strings.Contains(errOut, "no infra agent matches") || !strings.Contains(errOut, "HTTP 422") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// batchStreamAPI answers a POST of a batch, and streams the events of
// connection n (from 0) as events(n) gives them; GET of the batch answers
// get(n) for its n-th call.
func batchStreamAPI(t *testing.T, rec *recorder, events func(n int) []*api.Batch, get func(n int) *api.Batch,
	more ...func(*http.ServeMux)) []string {
	t.Helper()
	var mu sync.Mutex
	streams, gets := 0, 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/batches", func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		writeAPIJSON(w, http.StatusCreated, testBatch(api.BatchRunning, "waiting", "waiting", false))
	})
	mux.HandleFunc("GET /api/v1/batches/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		if r.PathValue("id") != batchID {
			writeAPIError(w, http.StatusNotFound, "not_found", "id", "no such batch")
			return
		}
		mu.Lock()
		n := streams
		streams++
		mu.Unlock()
		bs := events(n)
		if bs == nil {
			writeAPIError(w, http.StatusServiceUnavailable, "unavailable", "", "orchestrator closed")
			return
		}
		writeSSE(w, bs...)
	})
	mux.HandleFunc("GET /api/v1/batches/{id}", func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		mu.Lock()
		n := gets
		gets++
		mu.Unlock()
		if r.PathValue("id") != batchID || get == nil {
			writeAPIError(w, http.StatusNotFound, "not_found", "id", "no such batch")
			return
		}
		writeAPIJSON(w, http.StatusOK, get(n))
	})
	for _, add := range more {
		add(mux)
	}
	return serveAPI(t, mux)
}

func TestSubmitAllWaitExitsWithTheBatchState(t *testing.T) {
	clearClientEnv(t)
	running := testBatch(api.BatchRunning, "running", "waiting", false)
	running.Targets[0].ProgressPercent = 40
	cases := []struct {
		name  string
		final *api.Batch
		exit  int
		sum   string
	}{
		{"succeeded", testBatch(api.BatchSucceeded, "succeeded", "succeeded", true), 0,
			"batch " + batchID + " succeeded: 2 succeeded, 1 offline in 1m30s"},
		{"failed", testBatch(api.BatchFailed, "succeeded", "failed", true), exitBatchFailed,
			"batch " + batchID + " failed: 1 succeeded, 1 failed, 1 offline in 1m30s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			first := testBatch(api.BatchRunning, "waiting", "waiting", false)
			server := batchStreamAPI(t, &rec, func(int) []*api.Batch {
				return []*api.Batch{first, running, tc.final}
			}, nil)
			args := []string{"submit", "--to", "infra", "--work-type", "patch", "--all", "--wait"}
			code, out, errOut := runCLI(t, "", append(args, server...)...)
			if code != tc.exit {
				t.Fatalf("exit %d, want %d: %s", code, tc.exit, errOut)
			}
			if out != "" {
				t.Errorf("stdout %q", out)
			}
			if !strings.Contains(errOut, tc.sum) {
				t.Errorf("stderr lacks the summary %q:\n%s", tc.sum, errOut)
			}
			// Into a pipe: a line each time an agent's state changes.
			for _, want := range []string{"a  waiting       0%  " + taskA, "a  running      40%  " + taskA,
				"c  offline       0%  -", "b  " + tc.final.Targets[1].State} {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut)
				}
			}
			if n := strings.Count(errOut, " c  "); n != 1 {
				t.Errorf("agent c, which never changed, shown %d times:\n%s", n, errOut)
			}
			if rec.count("GET /api/v1/batches/"+batchID+"/events") != 1 {
				t.Errorf("requests %q, want one stream", rec.all())
			}

			// With --json: one JSON line per event of the batch.
			code, out, errOut = runCLI(t, "", append(append(args, "--json"), server...)...)
			if code != tc.exit {
				t.Fatalf("--json: exit %d, want %d: %s", code, tc.exit, errOut)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != 3 {
				t.Fatalf("--json: %d lines, want 3:\n%s", len(lines), out)
			}
			var last api.Batch
			if err := json.Unmarshal([]byte(lines[2]), &last); err != nil || last.State != tc.final.State || last.FinishedAt == nil {
				t.Errorf("--json: last line %q (%v)", lines[2], err)
			}
			if errOut != "" {
				t.Errorf("--json: stderr %q", errOut)
			}
		})
	}
}

func TestBatchWaitFollowsABrokenStreamToTheEnd(t *testing.T) {
	clearClientEnv(t)
	running := testBatch(api.BatchRunning, "running", "waiting", false)
	done := testBatch(api.BatchSucceeded, "succeeded", "succeeded", true)
	cases := []struct {
		name    string
		events  func(n int) []*api.Batch
		get     func(n int) *api.Batch
		streams int
	}{
		// The stream ends early (an orchestrator restarting): it is opened again.
		{"reconnect", func(n int) []*api.Batch {
			if n == 0 {
				return []*api.Batch{running}
			}
			return []*api.Batch{running, done}
		}, func(int) *api.Batch { return running }, 2},
		// The stream is refused: the batch is read with GET meanwhile.
		{"fall back to GET", func(int) []*api.Batch { return nil }, func(n int) *api.Batch {
			if n < 2 {
				return running
			}
			return done
		}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			server := batchStreamAPI(t, &rec, tc.events, tc.get)
			code, _, errOut := runCLI(t, "", append([]string{"batch", batchID, "--wait"}, server...)...)
			if code != 0 || !strings.Contains(errOut, "batch "+batchID+" succeeded") {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if n := rec.count("GET /api/v1/batches/" + batchID + "/events"); n != tc.streams {
				t.Errorf("%d streams, want %d: %q", n, tc.streams, rec.all())
			}
		})
	}
}

func TestBatchWaitGivesUpOnAnUnknownBatch(t *testing.T) {
	clearClientEnv(t)
	var rec recorder
	server := batchStreamAPI(t, &rec, nil, nil)
	code, _, errOut := runCLI(t, "", append([]string{"batch", unknownID, "--wait"}, server...)...)
	if code != 1 || !strings.Contains(errOut, "no batch "+unknownID+" (HTTP 404)") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if n := len(rec.all()); n != 1 {
		t.Errorf("a 404 was retried: %q", rec.all())
	}
}

func TestBatchWaitStopsWhenTheOrchestratorStaysAway(t *testing.T) {
	clearClientEnv(t)
	old := taskview.BatchGiveUp
	taskview.BatchGiveUp = 300 * time.Millisecond
	t.Cleanup(func() { taskview.BatchGiveUp = old })
	var rec recorder
	server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		writeAPIError(w, http.StatusServiceUnavailable, "unavailable", "", "no leader")
	}))
	code, _, errOut := runCLI(t, "", append([]string{"batch", batchID, "--wait"}, server...)...)
	if code != exitNotFinished || !strings.Contains(errOut, "no answer from the orchestrator") ||
		!strings.Contains(errOut, "chiffon batch "+batchID+" --wait") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if rec.count("GET /api/v1/batches/"+batchID+"/events") < 2 {
		t.Errorf("not retried: %q", rec.all())
	}
}

func TestBatchShowsItsAgents(t *testing.T) {
	clearClientEnv(t)
	b := testBatch(api.BatchFailed, "succeeded", "failed", true)
	b.Schedule = "nightly"
	b.Parameters = map[string]any{"reboot": true}
	server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/batches/"+batchID {
			writeAPIError(w, http.StatusNotFound, "not_found", "id", "no such batch")
			return
		}
		writeAPIJSON(w, http.StatusOK, b)
	}))
	code, out, errOut := runCLI(t, "", append([]string{"batch", batchID}, server...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"ID:               " + batchID,
		"State:            failed",
		"Work:             infra/patch",
		`Parameters:       {"reboot":true}`,
		"Selector:         infra agents a,b,c labelled site=attic",
		"Max parallel:     2",
		"Stop on failure:  yes",
		"Schedule:         nightly",
		"Targets:          1 succeeded, 1 failed, 1 offline",
		"Finished:", "(in 1m30s)",
		"AGENT  STATE      PROGRESS  TASK",
		"a      succeeded  100%      " + taskA,
		"b      failed     0%        " + taskB,
		"c      offline    0%        -",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = runCLI(t, "", append([]string{"batch", batchID, "--json"}, server...)...)
	var got api.Batch
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.ID != batchID || got.Schedule != "nightly" || len(got.Targets) != 3 {
		t.Errorf("--json: exit %d, %q", code, out)
	}

	code, _, errOut = runCLI(t, "", append([]string{"batch", unknownID}, server...)...)
	if code != 1 || !strings.Contains(errOut, "chiffon: no batch "+unknownID+" (HTTP 404)") {
		t.Errorf("unknown batch: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "", append([]string{"batch", unknownID, "--json"}, server...)...)
	var e errorJSON
	if code != 1 || json.Unmarshal([]byte(errOut), &e) != nil || e.Error.Code != "not_found" || e.Error.HTTPStatus != 404 {
		t.Errorf("unknown batch --json: exit %d, stderr %q", code, errOut)
	}
}

func TestBatchesLists(t *testing.T) {
	clearClientEnv(t)
	var rec recorder
	server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		writeAPIJSON(w, http.StatusOK, []*api.Batch{
			testBatch(api.BatchRunning, "running", "waiting", false),
			testBatch(api.BatchSucceeded, "succeeded", "succeeded", true),
		})
	}))
	code, out, errOut := runCLI(t, "", append([]string{"batches", "--limit", "7"}, server...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := rec.all(); len(got) != 1 || got[0] != "GET /api/v1/batches?limit=7" {
		t.Errorf("requests %q", got)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") ||
		!strings.Contains(lines[0], "STATE") || !strings.Contains(lines[0], "WORK") || !strings.Contains(lines[0], "TARGETS") || !strings.Contains(lines[0], "CREATED") {
		t.Fatalf("table:\n%s", out)
	}
	for i, want := range []string{"running    infra/patch  1 running, 1 waiting, 1 offline", "succeeded  infra/patch  2 succeeded, 1 offline"} {
		if !strings.HasPrefix(lines[i+1], batchID[len(batchID)-8:]+"  "+want) || !strings.HasSuffix(lines[i+1], " ago") { // the short id
			t.Errorf("row %d %q, want %q", i+1, lines[i+1], want)
		}
	}
	if code, out, _ = runCLI(t, "", append([]string{"batches", "--wide"}, server...)...); code != 0 || !strings.Contains(out, batchID+"  running") {
		t.Errorf("--wide: exit %d:\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", append([]string{"batches", "--json"}, server...)...)
	var bs []api.Batch
	if code != 0 || json.Unmarshal([]byte(out), &bs) != nil || len(bs) != 2 {
		t.Errorf("--json: exit %d, %q", code, out)
	}
	if code, _, errOut := runCLI(t, "", append([]string{"batches", "--limit", "0"}, server...)...); code != 2 || !strings.Contains(errOut, "--limit") {
		t.Errorf("--limit 0: exit %d, %q", code, errOut)
	}
}

// The batch's final event ends the wait, even on a stream left open (a proxy
// holding it).
func TestBatchWaitEndsAtTheFinalEvent(t *testing.T) {
	clearClientEnv(t)
	defer func(d time.Duration) { taskview.BatchOutputWait = d }(taskview.BatchOutputWait)
	taskview.BatchOutputWait = 100 * time.Millisecond // the fake serves no task output
	server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w, testBatch(api.BatchSucceeded, "succeeded", "succeeded", true))
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	start := time.Now()
	code, _, errOut := runCLI(t, "", append([]string{"batch", batchID, "--wait"}, server...)...)
	if code != 0 || time.Since(start) > 5*time.Second {
		t.Fatalf("exit %d after %s: %s", code, time.Since(start), errOut)
	}
}
