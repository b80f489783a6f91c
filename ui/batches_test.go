package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// The fake API's batch: four code agents, one offline, one waiting, made by
// schedule nightly; and a task of it.
const (
	fakeBatchID = "11111111-1111-4111-8111-111111111111"
	fakeTaskID  = "22222222-2222-4222-8222-222222222222"
)

var fakeFireTime = time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)

// fakeBatch is the fake API's batch; finished, as its end is stored.
func fakeBatch(finished bool) *api.Batch {
	b := &api.Batch{ID: fakeBatchID, State: api.BatchRunning,
		BatchRequest: api.BatchRequest{ToAgent: "code", WorkType: "echo", MaxParallel: 2, StopOnFailure: true,
			Labels: map[string]string{"zone": "eu"}},
		Schedule: "nightly", FireTime: &fakeFireTime, CreatedAt: fakeFireTime,
		Targets: []api.BatchTarget{
			{AgentID: "code-1", TaskID: fakeTaskID, State: "succeeded", ProgressPercent: 100},
			{AgentID: "code-2", State: api.TargetOffline},
			{AgentID: "code-3", TaskID: "33333333-3333-4333-8333-333333333333", State: "running", ProgressPercent: 40},
			{AgentID: "code-4", TaskID: "44444444-4444-4444-8444-444444444444", State: api.TargetWaiting},
			{AgentID: "code-5", State: api.TargetRegistering},
		},
		Counts: map[string]int{"succeeded": 1, "offline": 1, "running": 1, "waiting": 1, "registering": 1}}
	if finished {
		end := fakeFireTime.Add(time.Minute)
		b.State, b.FinishedAt = api.BatchFailed, &end
		b.Targets[2].State, b.Targets[2].ProgressPercent = "succeeded", 100
		b.Targets[3].State = api.TargetSkipped
		b.Targets[4].State = api.TargetUnknown
		b.Counts = map[string]int{"succeeded": 2, "offline": 1, "skipped": 1, "unknown": 1}
	}
	return b
}

// fleetAPI answers the API's batch, schedule and approval calls as the
// orchestrator does, with one batch and two schedules (and approvalRoutes'
// tasks and batch).
func fleetAPI() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /api/v1/batches", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode([]*api.Batch{fakeWaitingBatch(), fakeBatch(false)})
	})
	m.HandleFunc("GET /api/v1/batches/"+fakeBatchID, func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(fakeBatch(false))
	})
	m.HandleFunc("GET /api/v1/batches/"+fakeBatchID+"/events", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i, finished := range []bool{false, true} {
			data, _ := json.Marshal(fakeBatch(finished))
			fmt.Fprintf(w, "id: %d\nevent: batch\ndata: %s\n\n", i+1, data)
			w.(http.Flusher).Flush()
		}
	})
	m.HandleFunc("GET /api/v1/tasks/"+fakeTaskID, func(w http.ResponseWriter, _ *http.Request) {
		need := int64(4096)
		_ = json.NewEncoder(w).Encode(&task.Task{ID: fakeTaskID, State: task.StateSucceeded, ToAgent: "code",
			WorkType: "echo", AgentID: "code-1", BatchID: fakeBatchID, Schedule: "nightly", FireTime: &fakeFireTime, CreatedAt: fakeFireTime,
			Hints: &task.Hints{GPUVRAMMB: &need}, Result: &task.Result{Status: "success", At: fakeFireTime,
				GPUs: []task.GPUUse{{Index: 0, UUID: "GPU-1", Name: "NVIDIA H100 80GB HBM3", PeakMB: 4096}}}})
	})
	m.HandleFunc("GET /api/v1/tasks/"+fakeTaskID+"/output", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
	})
	scheduleRoutes(m)
	approvalRoutes(m)
	workTypeRoutes(m)
	return m
}

// TestBatchPagesShowTheTargets: the Batches page lists the batch with its
// counts and schedule; the batch's page shows each agent, the offline one too,
// with a link to the task of each that has one and why the others have none.
func TestBatchPagesShowTheTargets(t *testing.T) {
	srv, _ := newServer(t, "/")
	c := browserClient(t)
	signIn(t, c, srv.URL+"/", viewerToken)
	_, list := get(t, c, srv.URL+"/batches")
	for _, want := range []string{`href="/batches/` + fakeBatchID + `"`, "11111111", "code/echo", `<span class="state running">1 running</span>`,
		`<span class="state offline">1 offline</span>`, `href="/schedules#schedule-nightly"`} {
		if !strings.Contains(list, want) {
			t.Errorf("the Batches page lacks %s:\n%s", want, list)
		}
	}
	resp, page := get(t, c, srv.URL+"/batches/"+fakeBatchID)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the batch's page: %d\n%s", resp.StatusCode, page)
	}
	for _, want := range []string{
		`data-events="/batches/` + fakeBatchID + `/events"`, `data-final="false"`,
		`<tr data-agent="code-2">`, `href="/agents/code-2"`, `<span class="state offline" data-field="state">offline</span>`,
		"the agent was offline when the batch was made",
		`<a class="task" href="/tasks/` + fakeTaskID + `">`,
		`<span class="state running" data-field="state">running</span>`, `value="40"`,
		`<a class="task" href="/tasks/44444444-4444-4444-8444-444444444444" hidden>`, "waits for room under max parallel",
		`<span class="state registering" data-field="state">registering</span>`, "waits for the agent to register",
		"2 at once", "zone=eu", "nightly", "2026-11-24 03:00:00 UTC",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the batch's page lacks %s", want)
		}
	}
	if resp, _ := get(t, c, srv.URL+"/batches/55555555-5555-4555-8555-555555555555"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown batch's page: %d, want 404", resp.StatusCode)
	}
}

// TestBatchRelayPassesTheEvents: the batch's event stream reaches the page
// under the session cookie, each event with its data, the last with the
// batch's end; an unknown batch's stream is the API's 404.
func TestBatchRelayPassesTheEvents(t *testing.T) {
	srv, seen := newServer(t, "/")
	c := browserClient(t)
	signIn(t, c, srv.URL+"/", viewerToken)
	resp, body := get(t, c, srv.URL+"/batches/"+fakeBatchID+"/events")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("the relay: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	events := strings.Split(strings.TrimSpace(body), "\n\n")
	if len(events) != 2 {
		t.Fatalf("the relay sent %d events, want 2:\n%s", len(events), body)
	}
	for i, ev := range events {
		lines := strings.Split(ev, "\n")
		if len(lines) != 3 || lines[0] != fmt.Sprintf("id: %d", i+1) || lines[1] != "event: batch" {
			t.Fatalf("event %d: %q", i+1, lines)
		}
		var b api.Batch
		if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[2], "data: ")), &b); err != nil || b.ID != fakeBatchID || len(b.Targets) != 5 {
			t.Fatalf("event %d's data: %v %+v", i+1, err, b)
		}
		if (b.FinishedAt != nil) != (i == 1) || i == 1 && b.Targets[3].State != api.TargetSkipped {
			t.Errorf("event %d: finished %v, targets %+v", i+1, b.FinishedAt, b.Targets)
		}
	}
	if !seen.called("GET /api/v1/batches/"+fakeBatchID+"/events") || seen.lastToken() != "Bearer "+viewerToken {
		t.Errorf("the API's stream was not asked for with the session's token")
	}
	if resp, _ := get(t, c, srv.URL+"/batches/55555555-5555-4555-8555-555555555555/events"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown batch's stream: %d, want 404", resp.StatusCode)
	}
	if resp, _ := get(t, browserClient(t), srv.URL+"/batches/"+fakeBatchID+"/events"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the stream signed out: %d, want a redirect to sign in", resp.StatusCode)
	}
}

// TestTaskPageShowsItsBatchAndSchedule: a task of a batch made by a schedule
// links to the batch and the schedule and shows its fire time.
func TestTaskPageShowsItsBatchAndSchedule(t *testing.T) {
	srv, _ := newServer(t, "/")
	c := browserClient(t)
	signIn(t, c, srv.URL+"/", viewerToken)
	_, page := get(t, c, srv.URL+"/tasks/"+fakeTaskID)
	for _, want := range []string{`href="/batches/` + fakeBatchID + `" id="batch-link"`, `href="/schedules#schedule-nightly" id="schedule-link">nightly</a>`,
		"<dt>Fire time</dt>", "2026-11-24 03:00:00 UTC"} {
		if !strings.Contains(page, want) {
			t.Errorf("the task's page lacks %s:\n%s", want, page)
		}
	}
}
