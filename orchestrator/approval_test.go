package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
)

// approvalEnv is an env whose echo work type needs approval, with a viewer
// token named alice.
func approvalEnv(t *testing.T, kind string) (*env, string) {
	e := newStoreEnv(t, kind, "code-1")
	e.cfg.WorkTypes = map[string]policy.WorkTypeConfig{"echo": {Approval: policy.ApprovalRequired}}
	viewer := broker.NewToken()
	e.cfg.APITokens = []orchestrator.APITokenConfig{{Name: "alice", Token: viewer, Role: orchestrator.RoleViewer}}
	return e, viewer
}

// history lists task id's audit trail as "message by", through the API.
func history(t *testing.T, c *client.Client, id string) []string {
	t.Helper()
	evs, err := c.History(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		if ev.Type == task.EventStatus {
			t.Fatalf("a progress report in the history: %+v", ev)
		}
		if ev.Type == task.EventState {
			out = append(out, ev.Message+" by "+ev.By)
		}
	}
	return out
}

// TestApprovalHoldsATaskUntilApproved: a task of a work type that needs approval
// waits, sent to no agent, across an orchestrator restart; a viewer cannot
// approve it; once an operator approves it, it runs once, and its history says
// who submitted and who approved.
func TestApprovalHoldsATaskUntilApproved(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		e, viewer := approvalEnv(t, kind)
		o, a := e.openWithAgent("code-1", 2)
		c := e.client(o)
		ctx := context.Background()
		tk, err := c.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"})
		if err != nil {
			t.Fatal(err)
		}
		if tk.State != task.StateAwaitingApproval || tk.Approval == nil || tk.Approval.State != task.ApprovalWaiting {
			t.Fatalf("submitted: %s %+v", tk.State, tk.Approval)
		}
		noWork(t, a, 200*time.Millisecond)

		vc := &client.Client{BaseURL: c.BaseURL, Token: viewer, HTTP: c.HTTP}
		var ae *client.APIError
		if _, err := vc.Decide(ctx, tk.ID, true, ""); !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
			t.Fatalf("a viewer's approval: %v, want 403", err)
		}

		o.Close()
		o = e.open()
		c = e.client(o)
		a.register(2)
		got, err := c.Get(ctx, tk.ID)
		if err != nil || got.State != task.StateAwaitingApproval {
			t.Fatalf("after the restart: %+v %v", got, err)
		}
		noWork(t, a, 200*time.Millisecond)

		got, err = c.Decide(ctx, tk.ID, true, "go ahead")
		if err != nil || got.Approval.State != task.ApprovalApproved || got.Approval.By != "api" || got.Approval.Note != "go ahead" {
			t.Fatalf("approved: %+v %v", got, err)
		}
		w := a.next()
		if w.req.TaskID != tk.ID {
			t.Fatalf("work_request for %s", w.req.TaskID)
		}
		a.result(w, envelope.ResultSuccess, 0, "", nil)
		if end := waitFinal(t, o, tk.ID); end.State != task.StateSucceeded {
			t.Fatalf("ended %s", end.State)
		}
		noWork(t, a, 100*time.Millisecond)
		if _, err := c.Decide(ctx, tk.ID, true, ""); !errors.As(err, &ae) || ae.Status != http.StatusConflict {
			t.Fatalf("approving a finished task: %v, want 409", err)
		}
		h := history(t, c, tk.ID)
		want := []string{"submitted by api", "approved: go ahead by api"}
		for _, w := range want {
			if !contains(h, w) {
				t.Fatalf("history %q lacks %q", h, w)
			}
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestApprovalRejectedOrExpired: a rejected task ends rejected, sent nowhere; one
// nobody answers ends rejected when its approval expires; a task pinned to an
// agent whose config asks approval for its work type waits too.
func TestApprovalRejectedOrExpired(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.WorkTypes = map[string]policy.WorkTypeConfig{"reboot": {Approval: policy.ApprovalRequired}}
	e.cfg.Agents[0].ApprovalRequired = []string{"deploy"}
	e.cfg.Approval.ExpiresAfter = 500 * time.Millisecond
	o := e.open()
	a := e.fakeAgent("code-1")
	a.listen()
	a.registerOffering(2, "reboot", "deploy", "echo")
	c := e.client(o)
	ctx := context.Background()

	rejected, err := c.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "reboot"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Decide(ctx, rejected.ID, false, "not now")
	if err != nil || got.State != task.StateRejected || got.Approval.State != task.ApprovalRejected {
		t.Fatalf("rejected: %+v %v", got, err)
	}

	pinned, err := c.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "deploy",
		Hints: &task.Hints{AgentID: "code-1"}})
	if err != nil || pinned.State != task.StateAwaitingApproval {
		t.Fatalf("a deploy pinned to code-1: %+v %v", pinned, err)
	}
	end := waitFinal(t, o, pinned.ID) // nobody answers
	if end.State != task.StateRejected || end.Approval.State != task.ApprovalExpired {
		t.Fatalf("expired: %s %+v", end.State, end.Approval)
	}
	noWork(t, a, 100*time.Millisecond)

	if h := history(t, c, rejected.ID); !contains(h, "rejected: not now by api") {
		t.Fatalf("history of the rejected task: %q", h)
	}
	cancelled, err := c.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "reboot"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Cancel(ctx, cancelled.ID, ""); err != nil || got.State != task.StateCancelled {
		t.Fatalf("a task awaiting approval cancelled: %+v %v", got, err)
	}
	if h := history(t, c, cancelled.ID); !contains(h, "cancelled before dispatch by api") {
		t.Fatalf("history of the cancelled task: %q", h)
	}

	free, err := c.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"})
	if err != nil || free.State == task.StateAwaitingApproval || free.Approval != nil {
		t.Fatalf("an echo needs no approval: %+v %v", free, err)
	}
	a.result(a.next(), envelope.ResultSuccess, 0, "", nil)
}

// TestBatchApprovalAsksOnce: a batch of a work type that needs approval makes no
// task until it is approved, once for all its agents; its tasks then run without
// asking again. A rejected batch, and one whose approval expires, end rejected
// with no task made. An agent whose config asks approval for the work type makes
// the batch ask too.
func TestBatchApprovalAsksOnce(t *testing.T) {
	finished := make(chan api.Batch, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d struct{ Data api.Batch }
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &d)
		finished <- d.Data
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t, "code-1", "code-2")
	e.cfg.Webhooks = []orchestrator.WebhookConfig{{URL: srv.URL, Events: []string{webhook.BatchFinished}, Secret: "s"}}
	e.cfg.WorkTypes = map[string]policy.WorkTypeConfig{"echo": {Approval: policy.ApprovalRequired}}
	e.cfg.Agents[1].ApprovalRequired = []string{"deploy"}
	e.cfg.Approval.ExpiresAfter = time.Second
	o := e.open()
	a1, a2 := e.fakeAgent("code-1"), e.fakeAgent("code-2")
	for _, a := range []*fakeAgent{a1, a2} {
		a.listen()
		a.registerOffering(2, "echo", "deploy")
	}
	c := e.client(o)
	ctx := context.Background()
	b, err := c.CreateBatch(ctx, api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo"})
	if err != nil || b.State != api.BatchAwaitingApproval || b.Approval == nil {
		t.Fatalf("batch: %+v %v", b, err)
	}
	noWork(t, a1, 200*time.Millisecond)
	noWork(t, a2, 10*time.Millisecond)
	if got, err := c.DecideBatch(ctx, b.ID, true, "patch night"); err != nil || got.Approval.State != task.ApprovalApproved || got.Approval.By != "api" {
		t.Fatalf("approved: %+v %v", got, err)
	}
	for _, a := range []*fakeAgent{a1, a2} {
		a.result(a.next(), envelope.ResultSuccess, 0, "", nil)
	}
	if end := waitBatch(t, o, b.ID); end.State != api.BatchSucceeded {
		t.Fatalf("batch ended %s %v", end.State, end.Counts)
	}
	tasks, err := c.List(ctx, api.ListOptions{})
	if err != nil || len(tasks) != 2 {
		t.Fatalf("%d tasks %v", len(tasks), err)
	}
	for _, tk := range tasks {
		if tk.Approval == nil || tk.Approval.State != task.ApprovalApproved {
			t.Fatalf("task %s approval %+v, want the batch's", tk.ID, tk.Approval)
		}
	}

	rejected, err := c.CreateBatch(ctx, api.BatchRequest{ToAgent: envelope.Code, WorkType: "deploy"})
	if err != nil || rejected.State != api.BatchAwaitingApproval {
		t.Fatalf("a deploy batch, code-2 asking approval: %+v %v", rejected, err)
	}
	if got, err := c.DecideBatch(ctx, rejected.ID, false, ""); err != nil || got.State != api.BatchRejected {
		t.Fatalf("rejected: %+v %v", got, err)
	}
	var ae *client.APIError
	if _, err := c.DecideBatch(ctx, rejected.ID, true, ""); !errors.As(err, &ae) || ae.Status != http.StatusConflict {
		t.Fatalf("approving a rejected batch: %v, want 409", err)
	}
	expired, err := c.CreateBatch(ctx, api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	if end := waitBatch(t, o, expired.ID); end.State != api.BatchRejected || end.Approval.State != task.ApprovalExpired {
		t.Fatalf("expired batch: %s %+v", end.State, end.Approval)
	}
	noWork(t, a1, 100*time.Millisecond)
	noWork(t, a2, 10*time.Millisecond)
	if tasks, _ := c.List(ctx, api.ListOptions{}); len(tasks) != 2 {
		t.Fatalf("%d tasks, want the approved batch's 2 only", len(tasks))
	}
	// batch.finished told of each end: succeeded, rejected, rejected (expired).
	ends := map[string]api.BatchState{}
	for range 3 {
		select {
		case d := <-finished:
			ends[d.ID] = d.State
		case <-time.After(wait):
			t.Fatalf("batch.finished deliveries: %v, want 3", ends)
		}
	}
	if ends[b.ID] != api.BatchSucceeded || ends[rejected.ID] != api.BatchRejected || ends[expired.ID] != api.BatchRejected {
		t.Fatalf("batch.finished deliveries %v", ends)
	}
}

// TestUnpinnedWorkAvoidsAgentsAskingApproval: an agent whose config asks
// approval for a work type gets no unpinned task of it: with only that agent, the
// task fails at once saying why; with another agent, it goes there.
func TestUnpinnedWorkAvoidsAgentsAskingApproval(t *testing.T) {
	e := newEnv(t, "code-1", "code-2")
	e.cfg.Agents[0].ApprovalRequired = []string{"deploy"}
	e.cfg.Retry.MaxRetries = -1
	o := e.open()
	a1 := e.fakeAgent("code-1")
	a1.listen()
	a1.registerOffering(4, "deploy")
	ctx := context.Background()
	req := api.SubmitRequest{ToAgent: envelope.Code, WorkType: "deploy"}
	tk, err := o.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	end := waitFinal(t, o, tk.ID)
	if end.State != task.StateError || end.Error == nil || !strings.Contains(end.Error.Message, "requires approval") {
		t.Fatalf("an unpinned deploy with only code-1: %s %+v", end.State, end.Error)
	}
	a2 := e.fakeAgent("code-2")
	a2.listen()
	a2.registerOffering(4, "deploy")
	for range 3 {
		if _, err := o.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
		a2.result(a2.next(), envelope.ResultSuccess, 0, "", nil)
	}
	noWork(t, a1, 100*time.Millisecond)
}

// TestApprovalRequestedIsAWebhookEvent: a receiver of approval.requested gets the
// task as it starts waiting, signed.
func TestApprovalRequestedIsAWebhookEvent(t *testing.T) {
	got := make(chan task.Task, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !webhook.Verify([]byte("s"), body, r.Header.Get(webhook.HeaderSignature)) {
			t.Errorf("a delivery with a wrong signature")
		}
		var d struct {
			Event string
			Data  task.Task
		}
		if err := json.Unmarshal(body, &d); err != nil || d.Event != webhook.ApprovalRequested {
			t.Errorf("delivery %s: %v", body, err)
		}
		got <- d.Data
	}))
	t.Cleanup(srv.Close)
	e, _ := approvalEnv(t, orchestrator.StoreBadger)
	e.cfg.Webhooks = []orchestrator.WebhookConfig{{URL: srv.URL, Events: []string{webhook.ApprovalRequested}, Secret: "s"}}
	o := e.open()
	tk := submit(t, o, nil)
	select {
	case d := <-got:
		if d.ID != tk.ID || d.State != task.StateAwaitingApproval || d.Approval == nil {
			t.Fatalf("approval.requested for %s %s %+v", d.ID, d.State, d.Approval)
		}
	case <-time.After(wait):
		t.Fatal("no approval.requested delivery")
	}
}
