package orchestrator_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// sameMinute makes ids with next until two made one after the other begin with
// the same task.MinPrefixLen characters, as ids made in the same minute do (a
// UUIDv7's first 8 hex digits change every 65 s), and returns those two.
func sameMinute(t *testing.T, next func() string) (string, string) {
	t.Helper()
	prev := next()
	for range 3 {
		id := next()
		if id[:task.MinPrefixLen] == prev[:task.MinPrefixLen] {
			return prev, id
		}
		prev = id
	}
	t.Fatalf("no two ids in a row began alike: %s", prev)
	return "", ""
}

// uniquePrefix is the shortest beginning of a that b does not share, of at
// least task.MinPrefixLen characters.
func uniquePrefix(a, b string) string {
	n := 0
	for n < len(a) && a[n] == b[n] {
		n++
	}
	return a[:max(n+1, task.MinPrefixLen)]
}

// wantAPIError checks err is the API's answer status with code; it returns the
// answer.
func wantAPIError(t *testing.T, what string, err error, status int, code string) *client.APIError {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != status || ae.Code != code {
		t.Fatalf("%s: %v, want HTTP %d %s", what, err, status, code)
	}
	return ae
}

// TestTaskRoutesTakeShortIDsAndPrefixes: every task route takes a task's whole
// id, its short id (any case) or a unique prefix; a prefix two tasks share is
// refused 409 ambiguous_id listing both, and acts on neither; an unknown short
// id is 404 and what is no id 400. Approve and cancel act on the task named.
func TestTaskRoutesTakeShortIDsAndPrefixes(t *testing.T) {
	e, _ := approvalEnv(t, orchestrator.StoreBadger)
	o, a := e.openWithAgent("code-1", 2)
	c := e.client(o)
	ctx := context.Background()
	first, second := sameMinute(t, func() string {
		tk, err := c.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"})
		if err != nil {
			t.Fatal(err)
		}
		return tk.ID
	})
	shared, unique := first[:task.MinPrefixLen], uniquePrefix(first, second)
	for _, ref := range []string{first, strings.ToUpper(first), task.ShortID(first), strings.ToUpper(task.ShortID(first)),
		first[len(first)-12:], unique} {
		got, err := c.Get(ctx, ref)
		if err != nil || got.ID != first {
			t.Fatalf("GET %s: %v %v, want task %s", ref, got, err, first)
		}
		if h, err := c.History(ctx, ref); err != nil || len(h) == 0 {
			t.Fatalf("history of %s: %v %v", ref, h, err)
		}
		if _, err := c.Output(ctx, ref, io.Discard); err != nil {
			t.Fatalf("output of %s: %v", ref, err)
		}
	}

	ae := wantAPIError(t, "GET "+shared, get(c, shared), http.StatusConflict, "ambiguous_id")
	if want := slices.Sorted(slices.Values([]string{first, second})); !slices.Equal(ae.Candidates, want) ||
		!strings.Contains(ae.Message, first) || !strings.Contains(ae.Message, second) {
		t.Fatalf("ambiguous answer %+v, want candidates %v", ae, want)
	}
	_, err := c.Cancel(ctx, shared, "")
	wantAPIError(t, "cancel "+shared, err, http.StatusConflict, "ambiguous_id")
	_, err = c.Decide(ctx, shared, true, "")
	wantAPIError(t, "approve "+shared, err, http.StatusConflict, "ambiguous_id")
	wantAPIError(t, "GET deadbeef", get(c, "deadbeef"), http.StatusNotFound, "not_found")
	wantAPIError(t, "GET 1234", get(c, "1234"), http.StatusBadRequest, "invalid_field")
	for _, id := range []string{first, second} {
		if got, err := c.Get(ctx, id); err != nil || got.State != task.StateAwaitingApproval {
			t.Fatalf("after the ambiguous calls, %s: %+v %v", id, got, err)
		}
	}

	if got, err := c.Decide(ctx, unique, true, ""); err != nil || got.ID != first || got.Approval.State != task.ApprovalApproved {
		t.Fatalf("approve %s: %+v %v", unique, got, err)
	}
	if w := a.next(); w.req.TaskID != first {
		t.Fatalf("work_request for %s, want %s", w.req.TaskID, first)
	}
	if got, err := c.Cancel(ctx, strings.ToUpper(task.ShortID(second)), ""); err != nil || got.ID != second {
		t.Fatalf("cancel %s: %+v %v", task.ShortID(second), got, err)
	}
	if end := waitFinal(t, o, second); end.State != task.StateCancelled {
		t.Fatalf("%s ended %s, want cancelled", second, end.State)
	}
}

// get is GET /api/v1/tasks/ref's error.
func get(c *client.Client, ref string) error {
	_, err := c.Get(context.Background(), ref)
	return err
}

// TestBatchRoutesTakeShortIDsAndPrefixes: a batch is found by its short id or a
// unique prefix; a prefix two batches share is 409 ambiguous_id.
func TestBatchRoutesTakeShortIDsAndPrefixes(t *testing.T) {
	e := newEnv(t, "code-1")
	o, _ := e.openWithAgent("code-1", 2)
	c := e.client(o)
	ctx := context.Background()
	first, second := sameMinute(t, func() string {
		b, err := c.CreateBatch(ctx, api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo"})
		if err != nil {
			t.Fatal(err)
		}
		return b.ID
	})
	for _, ref := range []string{task.ShortID(first), uniquePrefix(first, second)} {
		if b, err := c.Batch(ctx, ref); err != nil || b.ID != first {
			t.Fatalf("batch %s: %+v %v, want %s", ref, b, err, first)
		}
	}
	_, err := c.Batch(ctx, first[:task.MinPrefixLen])
	ae := wantAPIError(t, "batch "+first[:task.MinPrefixLen], err, http.StatusConflict, "ambiguous_id")
	if !slices.Contains(ae.Candidates, first) || !slices.Contains(ae.Candidates, second) {
		t.Fatalf("candidates %v, want %s and %s", ae.Candidates, first, second)
	}
	_, err = c.Batch(ctx, "deadbeef")
	wantAPIError(t, "batch deadbeef", err, http.StatusNotFound, "not_found")
}

// TestStandbyTakesShortIDs: a standby finds the task a short id or a prefix
// names in the store, for its reads, and the leader for what it forwards (a
// cancel).
func TestStandbyTakesShortIDs(t *testing.T) {
	e, a, b, ag := newGroup(t)
	ctx := context.Background()
	tk, err := e.client(a).Submit(ctx, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	w := ag.next()
	ag.ack(w)
	cb := e.client(b)
	short, prefix := task.ShortID(tk.ID), tk.ID[:task.MinPrefixLen+5]
	if got, err := cb.Get(ctx, short); err != nil || got.ID != tk.ID {
		t.Fatalf("GET %s through the standby: %+v %v", short, got, err)
	}
	if h, err := cb.History(ctx, prefix); err != nil || len(h) == 0 {
		t.Fatalf("history of %s through the standby: %v %v", prefix, h, err)
	}
	wantAPIError(t, "GET deadbeef through the standby", get(cb, "deadbeef"), http.StatusNotFound, "not_found")
	got, err := cb.Cancel(ctx, short, "")
	if err != nil || got.ID != tk.ID || !got.CancelRequested {
		t.Fatalf("cancel %s through the standby: %+v %v", short, got, err)
	}
	ag.result(w, envelope.ResultCancelled, 130, "", nil)
	if end := waitFinal(t, a, tk.ID); end.State != task.StateCancelled {
		t.Fatalf("ended %s, want cancelled", end.State)
	}
}
