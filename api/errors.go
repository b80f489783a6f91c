package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// The orchestrator's refusals that the API answers with a status of their own
// (errors.Is); package orchestrator returns them under the same names.
var (
	// ErrFinished is returned when cancelling a task that has already ended.
	ErrFinished = errors.New("task already finished")
	// ErrNotAwaitingApproval is returned when approving or rejecting a task or a
	// batch that does not wait for it.
	ErrNotAwaitingApproval = task.ErrNotAwaitingApproval
	// ErrBatchNoTargets is returned when no agent matches a new batch.
	ErrBatchNoTargets = errors.New("no agent matches the batch")
	// ErrScheduleExists is returned when adding a schedule whose name is taken.
	ErrScheduleExists = errors.New("a schedule of that name exists")
	// ErrTooManyRuns is returned when a workflow runs max_runs runs already.
	ErrTooManyRuns = errors.New("the workflow runs as many runs as its max_runs allows")
	// ErrWorkflowFromConfig is returned when changing through the API a
	// workflow of the orchestrator's config.
	ErrWorkflowFromConfig = errors.New("the workflow is defined in the orchestrator's config; change it there")
	// ErrRunFinished is returned when cancelling a workflow run that ended.
	ErrRunFinished = errors.New("workflow run already finished")
	// ErrClosed is returned by the calls of a closed orchestrator.
	ErrClosed = errors.New("orchestrator closed")
	// ErrTooLarge is what a task too large for one broker message, or over a
	// max_request_bytes, is.
	ErrTooLarge = errors.New("task too large for one broker message")
)

// WriteError answers w with status and an ErrorBody holding code, field (left
// out when "") and message, as application/json with HTML escaping off: the one
// way every API error is written.
func WriteError(w http.ResponseWriter, status int, code, field, message string) {
	WriteErrorDetail(w, status, APIErrorDetail{Code: code, Field: field, Message: message})
}

// WriteErrorDetail answers w with status and an ErrorBody holding d, as
// WriteError does.
func WriteErrorDetail(w http.ResponseWriter, status int, d APIErrorDetail) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(ErrorBody{Error: d})
}
