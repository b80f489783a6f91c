package ui

import (
	"net/http"
	"net/url"

	"github.com/chiffon-dev/chiffon/api"
)

func (u *UI) schedules(w http.ResponseWriter, r *http.Request, sess *session) {
	var list []*api.Schedule
	data := map[string]any{}
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/schedules", nil, &list); err != nil {
		data["Problem"] = err.Error()
	}
	data["Schedules"] = list
	u.render(w, http.StatusOK, "schedules", sess, data)
}

// schedulesAt is the Schedules page at schedule name's row.
func (u *UI) schedulesAt(name string) string {
	return u.path + "schedules#schedule-" + url.PathEscape(name)
}

// pauseSchedule pauses a schedule, or resumes it, and goes back to the list.
func (u *UI) pauseSchedule(pause bool) func(http.ResponseWriter, *http.Request, *session) {
	op := "/resume"
	if pause {
		op = "/pause"
	}
	return func(w http.ResponseWriter, r *http.Request, sess *session) {
		name := r.PathValue("name")
		if err := u.call(r.Context(), sess, http.MethodPost, "/api/v1/schedules/"+url.PathEscape(name)+op, nil, nil); err != nil {
			u.failAPI(w, r, sess, err)
			return
		}
		http.Redirect(w, r, u.schedulesAt(name), http.StatusSeeOther)
	}
}

// removePage asks an operator to confirm a schedule's removal: a page of its
// own, so that it works without JavaScript.
func (u *UI) removePage(w http.ResponseWriter, r *http.Request, sess *session) {
	if !sess.operator() {
		u.fail(w, r, sess, http.StatusForbidden, "Your token's role ("+sess.role+") may not remove schedules.")
		return
	}
	var s api.Schedule
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/schedules/"+url.PathEscape(r.PathValue("name")), nil, &s); err != nil {
		u.failAPI(w, r, sess, err)
		return
	}
	u.render(w, http.StatusOK, "remove", sess, map[string]any{"Schedule": &s})
}

// removeSchedule deletes a schedule (what it made stays) and goes back to the
// list.
func (u *UI) removeSchedule(w http.ResponseWriter, r *http.Request, sess *session) {
	name := r.PathValue("name")
	if err := u.call(r.Context(), sess, http.MethodDelete, "/api/v1/schedules/"+url.PathEscape(name), nil, nil); err != nil {
		u.failAPI(w, r, sess, err)
		return
	}
	http.Redirect(w, r, u.path+"schedules", http.StatusSeeOther)
}
