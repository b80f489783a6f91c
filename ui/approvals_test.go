package ui

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// The fake API's approvals: a task that waits for one, a task an operator
// rejected, and a batch that waits for one.
const (
	fakeWaitingTaskID  = "66666666-6666-4666-8666-666666666666"
	fakeRejectedTaskID = "77777777-7777-4777-8777-777777777777"
	fakeWaitingBatchID = "88888888-8888-4888-8888-888888888888"
	fakeWhy            = "work type deploy requires approval (work_types.deploy.approval)"
)

// fakeAsked and fakeExpiry are when the fake approvals were asked for and
// when they expire: in an hour and a half.
var (
	fakeAsked  = time.Now().Add(-5 * time.Minute).UTC().Truncate(time.Second)
	fakeExpiry = fakeAsked.Add(95 * time.Minute)
)

// fakeApprovalTasks are the fake API's tasks with an approval, by id.
func fakeApprovalTasks() map[string]*task.Task {
	decided := fakeAsked.Add(2 * time.Minute)
	return map[string]*task.Task{
		fakeWaitingTaskID: {ID: fakeWaitingTaskID, State: task.StateAwaitingApproval, ToAgent: "code", WorkType: "deploy",
			CreatedAt: fakeAsked, Approval: &task.Approval{State: task.ApprovalWaiting, Why: fakeWhy,
				RequestedAt: fakeAsked, ExpiresAt: fakeExpiry}},
		fakeRejectedTaskID: {ID: fakeRejectedTaskID, State: task.StateRejected, ToAgent: "code", WorkType: "deploy",
			CreatedAt: fakeAsked, FinishedAt: &decided, Approval: &task.Approval{State: task.ApprovalRejected, Why: fakeWhy,
				RequestedAt: fakeAsked, ExpiresAt: fakeExpiry, By: "bob", Note: "not on a Friday", DecidedAt: &decided}},
	}
}

// fakeHistory is a task's audit trail as the API answers it: submitted by
// alice's token, held by the orchestrator, rejected by bob's.
func fakeHistory(id string) []*task.Event {
	evs := []*task.Event{
		{Seq: 1, Type: task.EventState, At: fakeAsked, State: task.StateAwaitingApproval, Message: "submitted", By: "alice"},
		{Seq: 2, Type: task.EventState, At: fakeAsked, State: task.StateAwaitingApproval, Message: "awaiting approval: " + fakeWhy},
	}
	if id == fakeRejectedTaskID {
		evs = append(evs, &task.Event{Seq: 3, Type: task.EventState, At: fakeAsked.Add(2 * time.Minute),
			State: task.StateRejected, Message: "rejected: not on a Friday", By: "bob"})
	}
	return evs
}

// fakeWaitingBatch is the fake API's batch that waits for approval.
func fakeWaitingBatch() *api.Batch {
	return &api.Batch{ID: fakeWaitingBatchID, State: api.BatchAwaitingApproval,
		BatchRequest: api.BatchRequest{ToAgent: "code", WorkType: "deploy"}, CreatedBy: "alice", CreatedAt: fakeAsked,
		Approval: &task.Approval{State: task.ApprovalWaiting, Why: fakeWhy, RequestedAt: fakeAsked, ExpiresAt: fakeExpiry},
		Targets: []api.BatchTarget{
			{AgentID: "code-1", TaskID: "99999999-9999-4999-8999-999999999991", State: api.TargetWaiting},
			{AgentID: "code-2", TaskID: "99999999-9999-4999-8999-999999999992", State: api.TargetWaiting},
		},
		Counts: map[string]int{"waiting": 2}}
}

// approvalRoutes answers the approval calls on m as the API does: approve and
// reject for an operator's token only, with an optional {"note"}, and 409
// not_awaiting_approval for what does not wait.
func approvalRoutes(m *http.ServeMux) {
	decide := func(waits bool, answer any) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+operatorToken {
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, `{"error":{"code":"forbidden","message":"operators only"}}`)
				return
			}
			var req api.DecisionRequest
			dec := json.NewDecoder(r.Body)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil && err != io.EOF {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":{"code":"invalid_json","message":"bad body"}}`)
				return
			}
			if !waits {
				w.WriteHeader(http.StatusConflict)
				_, _ = io.WriteString(w, `{"error":{"code":"not_awaiting_approval","message":"the task is rejected, not awaiting approval"}}`)
				return
			}
			_ = json.NewEncoder(w).Encode(answer)
		}
	}
	for id, t := range fakeApprovalTasks() {
		m.HandleFunc("GET /api/v1/tasks/"+id, func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(t) })
		m.HandleFunc("GET /api/v1/tasks/"+id+"/output", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
		})
		m.HandleFunc("GET /api/v1/tasks/"+id+"/history", func(w http.ResponseWriter, _ *http.Request) {
			_ = json.NewEncoder(w).Encode(fakeHistory(id))
		})
		for _, op := range []string{"approve", "reject"} {
			m.HandleFunc("POST /api/v1/tasks/"+id+"/"+op, decide(t.State == task.StateAwaitingApproval, t))
		}
	}
	m.HandleFunc("GET /api/v1/batches/"+fakeWaitingBatchID, func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(fakeWaitingBatch())
	})
	for _, op := range []string{"approve", "reject"} {
		m.HandleFunc("POST /api/v1/batches/"+fakeWaitingBatchID+"/"+op, decide(true, fakeWaitingBatch()))
	}
}

// TestApproveFormNeedsItsCSRFToken: Approve and Reject posted without the
// session's CSRF token, or with a forged one, are refused with 403 and reach no
// API; with it they post the task's approve or reject with the note, and go
// back to the task's page. A decision on a task that no longer waits shows the
// API's 409.
func TestApproveFormNeedsItsCSRFToken(t *testing.T) {
	srv, seen := newServer(t, "/")
	c := browserClient(t)
	csrf := signIn(t, c, srv.URL+"/", operatorToken)
	for _, op := range []string{"approve", "reject"} {
		path := "/tasks/" + fakeWaitingTaskID + "/" + op
		call := "POST /api/v1/tasks/" + fakeWaitingTaskID + "/" + op
		for _, form := range []url.Values{{"note": {"ok"}}, {"csrf": {"forged"}, "note": {"ok"}}} {
			if resp, body := post(t, c, srv.URL+path, form); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
				t.Errorf("%s with %v: %d, want 403", path, form, resp.StatusCode)
			}
		}
		if seen.called(call) {
			t.Fatalf("%s without its CSRF token reached the API", path)
		}
		resp, body := post(t, c, srv.URL+path, url.Values{"csrf": {csrf}, "note": {"  maintenance window  "}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/tasks/"+fakeWaitingTaskID {
			t.Fatalf("%s: %d to %q, want 303 to the task's page\n%s", path, resp.StatusCode, resp.Header.Get("Location"), body)
		}
		if !seen.called(call) || seen.lastToken() != "Bearer "+operatorToken {
			t.Fatalf("%s did not call %s with the session's token", path, call)
		}
		var req api.DecisionRequest
		if err := json.Unmarshal([]byte(seen.body(call)), &req); err != nil || req.Note != "maintenance window" {
			t.Errorf("%s sent %q, want the note", call, seen.body(call))
		}
	}
	if _, _ = post(t, c, srv.URL+"/tasks/"+fakeWaitingTaskID+"/approve", url.Values{"csrf": {csrf}}); seen.body("POST /api/v1/tasks/"+fakeWaitingTaskID+"/approve") != "{}" {
		t.Errorf("an approval without a note sent %q, want {}", seen.body("POST /api/v1/tasks/"+fakeWaitingTaskID+"/approve"))
	}
	resp, body := post(t, c, srv.URL+"/tasks/"+fakeRejectedTaskID+"/approve", url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "not awaiting approval") || !strings.Contains(body, "Someone decided already") {
		t.Errorf("approving a rejected task: %d, want the API's 409\n%s", resp.StatusCode, body)
	}
}

// TestApprovalBoxButtonsAreForOperators: a task waiting for approval shows why
// and until when to everyone, Approve and Reject (one form with the session's
// CSRF token and a note) to an operator only; a viewer's decision, CSRF token
// and all, is the API's 403. A decided task shows who decided, when, and the
// note, and no buttons.
func TestApprovalBoxButtonsAreForOperators(t *testing.T) {
	srv, seen := newServer(t, "/")
	buttons := []string{`action="/tasks/` + fakeWaitingTaskID + `/approve"`, `formaction="/tasks/` + fakeWaitingTaskID + `/reject"`,
		`id="approve"`, `id="reject"`, `name="note"`}
	for _, who := range []struct {
		token    string
		operator bool
	}{{operatorToken, true}, {viewerToken, false}} {
		c := browserClient(t)
		csrf := signIn(t, c, srv.URL+"/", who.token)
		resp, page := get(t, c, srv.URL+"/tasks/"+fakeWaitingTaskID)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the waiting task's page: %d\n%s", resp.StatusCode, page)
		}
		for _, want := range []string{`<section class="approval waiting" id="approval"`, "Waiting for approval",
			`<dd id="approval-why">` + fakeWhy + `</dd>`, `datetime="` + fakeExpiry.Format(time.RFC3339) + `"`, fakeExpiry.Format("2006-01-02 15:04:05 UTC"),
			">in 1h</time>", `<span class="state awaiting_approval" id="state">awaiting_approval</span>`, `data-awaiting="true"`} {
			if !strings.Contains(page, want) {
				t.Errorf("the waiting task's page lacks %s:\n%s", want, page)
			}
		}
		for _, b := range buttons {
			if strings.Contains(page, b) != who.operator {
				t.Errorf("operator %v: the page shows %s: %v", who.operator, b, !who.operator)
			}
		}
		if who.operator && !strings.Contains(page, `<form method="post" action="/tasks/`+fakeWaitingTaskID+`/approve" class="decide">
    <input type="hidden" name="csrf" value="`+csrf+`">`) {
			t.Errorf("the approval form lacks the session's CSRF token:\n%s", page)
		}
		if !who.operator {
			resp, body := post(t, c, srv.URL+"/tasks/"+fakeWaitingTaskID+"/approve", url.Values{"csrf": {csrf}})
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "viewer") || seen.lastToken() != "Bearer "+viewerToken {
				t.Errorf("a viewer's approval: %d, want the API's 403\n%s", resp.StatusCode, body)
			}
		}
		_, decided := get(t, c, srv.URL+"/tasks/"+fakeRejectedTaskID)
		for _, want := range []string{`<section class="approval rejected" id="approval"`, `<span class="approval-state rejected">rejected</span>`,
			`<dd id="approval-by">bob</dd>`, `<dd id="approval-note">not on a Friday</dd>`, fakeAsked.Add(2 * time.Minute).Format("2006-01-02 15:04:05 UTC"),
			`<span class="state rejected" id="state">rejected</span>`, `data-final="true"`} {
			if !strings.Contains(decided, want) {
				t.Errorf("the rejected task's page lacks %s:\n%s", want, decided)
			}
		}
		if strings.Contains(decided, `id="approve"`) || strings.Contains(decided, "Waiting for approval") {
			t.Errorf("the rejected task's page still asks for a decision:\n%s", decided)
		}
	}
}

// TestTaskHistoryShowsWhoDidWhat: the task's page shows its audit trail from the
// API's history, oldest first: when, the state, the token that made each
// change (— for the orchestrator) and what it did.
func TestTaskHistoryShowsWhoDidWhat(t *testing.T) {
	srv, seen := newServer(t, "/")
	c := browserClient(t)
	signIn(t, c, srv.URL+"/", viewerToken)
	_, page := get(t, c, srv.URL+"/tasks/"+fakeRejectedTaskID)
	if !seen.called("GET /api/v1/tasks/" + fakeRejectedTaskID + "/history") {
		t.Fatal("the task's page did not ask for its history")
	}
	i := strings.Index(page, `<table class="history" id="history">`)
	if i < 0 || i < strings.Index(page, `id="output"`) {
		t.Fatalf("no history table below the output:\n%s", page)
	}
	table := page[i:]
	table = table[:strings.Index(table, "</table>")]
	rows := strings.Split(table, "<tr>")[2:] // the header's, then the events'
	if len(rows) != 3 {
		t.Fatalf("the history has %d rows, want 3:\n%s", len(rows), table)
	}
	for n, want := range [][]string{
		{fakeAsked.Format("2006-01-02 15:04:05 UTC"), `<span class="state awaiting_approval">awaiting_approval</span>`, `<span class="by">alice</span>`, "submitted"},
		{`<span class="muted" title="the orchestrator">—</span>`, "awaiting approval: " + fakeWhy},
		{`<span class="state rejected">rejected</span>`, `<span class="by">bob</span>`, "rejected: not on a Friday"},
	} {
		for _, w := range want {
			if !strings.Contains(rows[n], w) {
				t.Errorf("history row %d lacks %s:\n%s", n+1, w, rows[n])
			}
		}
	}
	_, other := get(t, c, srv.URL+"/tasks/"+fakeTaskID) // its history is the API's 404
	if !strings.Contains(other, "The history could not be read") || !strings.Contains(other, `id="output"`) {
		t.Errorf("a history the API does not answer: the page should say so and show the rest:\n%s", other)
	}
}

// TestEventWhatSaysWhatHappened: a history row's "what" is the event's
// message, its error with its code, or its result.
func TestEventWhatSaysWhatHappened(t *testing.T) {
	for want, ev := range map[string]*task.Event{
		"cancelled before dispatch: no longer needed": {Type: task.EventState, Message: "cancelled before dispatch: no longer needed"},
		"retry 5002: no online agent":                 {Type: task.EventRetry, Error: &task.TaskError{Code: 5002, Message: "no online agent"}},
		"result succeeded, exit code 0":               {Type: task.EventResult, Result: &envelope.WorkResult{Status: "succeeded"}},
		"result":                                      {Type: task.EventResult},
	} {
		if got := eventWhat(ev); got != want {
			t.Errorf("eventWhat(%+v) = %q, want %q", ev, got, want)
		}
	}
}

// TestBatchApprovePostsTheBatchEndpoint: a batch waiting for approval shows the
// box, its agents waiting for it, and for an operator Approve and Reject, which
// post the batch's approve and reject (not a task's) with the note, and go back
// to the batch's page; without the CSRF token they reach no API. A viewer gets
// no buttons.
func TestBatchApprovePostsTheBatchEndpoint(t *testing.T) {
	srv, seen := newServer(t, "/")
	c := browserClient(t)
	csrf := signIn(t, c, srv.URL+"/", operatorToken)
	_, page := get(t, c, srv.URL+"/batches/"+fakeWaitingBatchID)
	for _, want := range []string{`<section class="approval waiting" id="approval"`, "once for all its tasks", fakeWhy,
		`action="/batches/` + fakeWaitingBatchID + `/approve"`, `formaction="/batches/` + fakeWaitingBatchID + `/reject"`,
		`name="csrf" value="` + csrf + `"`, `<span class="state awaiting_approval" id="batch-state">awaiting_approval</span>`,
		"waits for the batch&#39;s approval", `data-awaiting="true"`, "by alice"} {
		if !strings.Contains(page, want) {
			t.Errorf("the waiting batch's page lacks %s:\n%s", want, page)
		}
	}
	if strings.Contains(page, "waits for room under max parallel") {
		t.Errorf("the waiting batch's agents wait for room, it says:\n%s", page)
	}
	for _, op := range []string{"approve", "reject"} {
		path := "/batches/" + fakeWaitingBatchID + "/" + op
		call := "POST /api/v1/batches/" + fakeWaitingBatchID + "/" + op
		if resp, _ := post(t, c, srv.URL+path, url.Values{"note": {"go"}}); resp.StatusCode != http.StatusForbidden || seen.called(call) {
			t.Fatalf("%s without its CSRF token: %d, reached the API %v", path, resp.StatusCode, seen.called(call))
		}
		resp, body := post(t, c, srv.URL+path, url.Values{"csrf": {csrf}, "note": {"release " + op}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/batches/"+fakeWaitingBatchID {
			t.Fatalf("%s: %d to %q, want 303 to the batch's page\n%s", path, resp.StatusCode, resp.Header.Get("Location"), body)
		}
		if !seen.called(call) || seen.called("POST /api/v1/tasks/"+fakeWaitingBatchID+"/"+op) {
			t.Fatalf("%s did not call %s", path, call)
		}
		if got := seen.body(call); got != fmt.Sprintf(`{"note":"release %s"}`, op) {
			t.Errorf("%s sent %s", call, got)
		}
	}
	v := browserClient(t)
	signIn(t, v, srv.URL+"/", viewerToken)
	_, viewed := get(t, v, srv.URL+"/batches/"+fakeWaitingBatchID)
	if !strings.Contains(viewed, fakeWhy) || strings.Contains(viewed, `/approve"`) || strings.Contains(viewed, `id="reject"`) {
		t.Errorf("a viewer's batch page: want the box without buttons:\n%s", viewed)
	}
}

// TestHomeListsTasksAwaitingApproval: the home page starts with the tasks that
// wait for approval (the API's list of that state) and the batches (those of
// the API's batch list that wait), how many, and each one's link, work, why
// and expiry (a batch's agents too), but not the batch that runs; they count
// as neither running nor queued. The task list's state filter offers the new
// states.
func TestHomeListsTasksAwaitingApproval(t *testing.T) {
	srv, _ := newServer(t, "/")
	c := browserClient(t)
	signIn(t, c, srv.URL+"/", viewerToken)
	_, home := get(t, c, srv.URL+"/")
	i := strings.Index(home, `<div id="approvals">`)
	if i < 0 || i > strings.Index(home, `id="counters"`) {
		t.Fatalf("no approvals above the counters:\n%s", home)
	}
	for _, want := range []string{`<h2 id="approvals-title">Waiting for approval <span class="badge" id="approvals-count">2</span></h2>`,
		`<tr data-batch="` + fakeWaitingBatchID + `">`, `<a href="/batches/` + fakeWaitingBatchID + `">batch <code>88888888</code></a>`,
		`<td>2</td>`,
		`<a href="/tasks/` + fakeWaitingTaskID + `"><code>66666666</code></a>`, "code/deploy", fakeWhy,
		`<time datetime="` + fakeExpiry.Format(time.RFC3339) + `"`, ">in 1h</time>"} {
		if !strings.Contains(home[i:], want) {
			t.Errorf("the home page's approvals lack %s:\n%s", want, home[i:])
		}
	}
	if strings.Contains(home, `data-batch="`+fakeBatchID+`"`) {
		t.Errorf("the running batch is listed as waiting for approval")
	}
	for _, want := range []string{`<span class="n">0</span> tasks running`, `<span class="n">0</span> queued`, "No task is running or queued."} {
		if !strings.Contains(home, want) {
			t.Errorf("the task waiting for approval counts as running or queued: the home page lacks %s", want)
		}
	}
	_, tasks := get(t, c, srv.URL+"/tasks?state=awaiting_approval")
	for _, want := range []string{`<option value="awaiting_approval" selected>awaiting_approval</option>`, `<option value="rejected">rejected</option>`} {
		if !strings.Contains(tasks, want) {
			t.Errorf("the task list's filter lacks %s", want)
		}
	}
}
