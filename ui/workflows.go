package ui

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/chiffon-dev/chiffon/api"
)

// runListSize is how many runs a workflow's page lists: the newest.
const runListSize = 50

// workflows is the Workflows page: every workflow, with a Run button for
// operators.
func (u *UI) workflows(w http.ResponseWriter, r *http.Request, sess *session) {
	var list []*api.Workflow
	data := map[string]any{}
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/workflows", nil, &list); err != nil {
		data["Problem"] = err.Error()
	}
	data["Workflows"] = list
	u.render(w, http.StatusOK, "workflows", sess, data)
}

// workflow is a workflow's page: its definition, drawn and listed, and its
// newest runs.
func (u *UI) workflow(w http.ResponseWriter, r *http.Request, sess *session) {
	name := r.PathValue("name")
	var wf api.Workflow
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/workflows/"+url.PathEscape(name), nil, &wf); err != nil {
		u.failAPI(w, r, sess, err)
		return
	}
	data := map[string]any{"Workflow": &wf, "Graph": layoutGraph(&wf.WorkflowSpec, nil), "Limit": runListSize}
	var runs []*api.WorkflowRun
	q := url.Values{"workflow": {name}, "limit": {strconv.Itoa(runListSize)}}
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/workflow-runs?"+q.Encode(), nil, &runs); err != nil {
		data["RunsProblem"] = err.Error()
	}
	slices.SortStableFunc(runs, func(a, b *api.WorkflowRun) int { return b.CreatedAt.Compare(a.CreatedAt) })
	data["Runs"] = runs
	u.render(w, http.StatusOK, "workflow", sess, data)
}

// needText says what a step needs: each step, with its condition when it is
// not success.
func needText(n api.WorkflowNeed) string {
	if c := n.Condition(); c != api.NeedSuccess {
		return n.Step + " (" + c + ")"
	}
	return n.Step
}
