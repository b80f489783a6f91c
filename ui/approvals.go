package ui

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// approvalListSize is how many tasks waiting for approval the home page lists:
// the newest.
const approvalListSize = 50

// batchScanSize is how many of the newest batches the home page looks through
// for those waiting for approval: the API lists batches without a state
// filter, and a batch waits for a yes soon after it is made.
const batchScanSize = 200

// waitingBatches are the batches that wait for an operator's approval among
// the newest batchScanSize, newest first.
func (u *UI) waitingBatches(ctx context.Context, sess *session) ([]*api.Batch, error) {
	var list []*api.Batch
	if err := u.call(ctx, sess, http.MethodGet, "/api/v1/batches?limit="+strconv.Itoa(batchScanSize), nil, &list); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list, func(b *api.Batch) bool { return !batchWaits(b) }), nil
}

// decide approves (approve) or rejects the task or batch (kind: "tasks" or
// "batches") the path's {id} names, with the form's note, through the API, and
// goes back to its page.
func (u *UI) decide(kind string, approve bool) func(http.ResponseWriter, *http.Request, *session) {
	op := "/reject"
	if approve {
		op = "/approve"
	}
	return func(w http.ResponseWriter, r *http.Request, sess *session) {
		id := url.PathEscape(r.PathValue("id"))
		req := api.DecisionRequest{Note: strings.TrimSpace(r.PostFormValue("note"))}
		if err := u.call(r.Context(), sess, http.MethodPost, "/api/v1/"+kind+"/"+id+op, req, nil); err != nil {
			var ae *apiError
			if errors.As(err, &ae) && ae.code == "not_awaiting_approval" {
				ae.message += ". Someone decided already, or nobody did in time: its page says which."
			}
			u.failAPI(w, r, sess, err)
			return
		}
		http.Redirect(w, r, u.path+kind+"/"+id, http.StatusSeeOther)
	}
}

// taskWaits reports whether t waits for an operator's approval now.
func taskWaits(t *task.Task) bool {
	return t.State == task.StateAwaitingApproval && t.Approval != nil && t.Approval.State == task.ApprovalWaiting
}

// batchWaits reports whether b waits for an operator's approval now.
func batchWaits(b *api.Batch) bool {
	return b.State == api.BatchAwaitingApproval && b.Approval != nil && b.Approval.State == task.ApprovalWaiting
}

// batchNotes are targetNotes as they read for b: its agents wait for its
// approval, not for room; those a rejection kept from starting were skipped
// for it, not for a failure.
func batchNotes(b *api.Batch) map[string]string {
	notes := targetNotes
	switch {
	case batchWaits(b):
		notes = maps.Clone(targetNotes)
		notes[api.TargetWaiting] = "waits for the batch's approval"
	case b.State == api.BatchRejected:
		notes = maps.Clone(targetNotes)
		notes[api.TargetSkipped] = "not started: the batch was rejected"
	}
	return notes
}

// eventWhat says what an event of a task's history did: its message, its
// error, or its result.
func eventWhat(ev *task.Event) string {
	what := ev.Message
	if e := ev.Error; e != nil {
		if what != "" {
			what += "; "
		}
		what += fmt.Sprintf("%s %d: %s", ev.Type, e.Code, e.Message)
	}
	if r := ev.Result; r != nil && ev.Type == task.EventResult {
		what = fmt.Sprintf("result %s, exit code %d", r.Status, r.ExitCode)
	}
	if what == "" {
		return ev.Type
	}
	return what
}
