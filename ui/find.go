package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// findTask is the task list's search: it jumps to the task that the id typed
// names, its short id, a prefix or its whole id, as the API finds it. When
// several tasks match it lists them; when none does, it says so.
func (u *UI) findTask(w http.ResponseWriter, r *http.Request, sess *session) {
	ref := r.URL.Query().Get("id")
	var t task.Task
	err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(ref), nil, &t)
	if err == nil {
		http.Redirect(w, r, u.path+"tasks/"+url.PathEscape(t.ID), http.StatusSeeOther)
		return
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		u.failAPI(w, r, sess, err)
		return
	}
	data := map[string]any{"Filter": taskFilter{Page: 1}, "States": task.States,
		"AgentTypes": []string{"infra", "desktop", "code", "research"}, "Search": ref}
	switch {
	case ae.code == "ambiguous_id":
		data["Problem"] = fmt.Sprintf("%s names %d tasks: pick one.", ref, len(ae.candidates))
		data["Tasks"] = u.tasksByID(r, sess, ae.candidates)
	case ae.status == http.StatusNotFound:
		data["Problem"] = fmt.Sprintf("No task matches %s.", ref)
	default:
		data["Problem"] = ae.message
	}
	u.render(w, ae.status, "tasks", sess, data)
}

// tasksByID reads the tasks ids names, leaving out those it cannot read.
func (u *UI) tasksByID(r *http.Request, sess *session, ids []string) []*task.Task {
	var out []*task.Task
	for _, id := range ids {
		var t task.Task
		if u.call(r.Context(), sess, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id), nil, &t) == nil {
			out = append(out, &t)
		}
	}
	return out
}
