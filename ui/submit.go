package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// paramRows is how many key/value rows the submit form offers.
const paramRows = 5

// offer is one agent type and the work types its agents offer.
type offer struct {
	Type      string
	WorkTypes []string
}

// submitForm is the submit form's values, kept when it is shown again.
type submitForm struct {
	Target, JSON, MaxDuration, MaxMemory, Pin string
	Keys, Values                              []string
}

func (u *UI) offers(r *http.Request, sess *session) ([]offer, error) {
	var agents []api.AgentInfo
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/agents", nil, &agents); err != nil {
		return nil, err
	}
	byType := map[string][]string{}
	for _, a := range agents {
		for _, wt := range a.WorkTypes {
			if !slices.Contains(byType[string(a.Type)], wt) {
				byType[string(a.Type)] = append(byType[string(a.Type)], wt)
			}
		}
	}
	var out []offer
	for _, typ := range []string{"infra", "desktop", "code", "research"} {
		if wts := byType[typ]; len(wts) > 0 {
			slices.Sort(wts)
			out = append(out, offer{Type: typ, WorkTypes: wts})
		}
	}
	return out, nil
}

func (u *UI) submitPage(w http.ResponseWriter, r *http.Request, sess *session) {
	u.showSubmit(w, r, sess, http.StatusOK, submitForm{Keys: make([]string, paramRows), Values: make([]string, paramRows)}, "")
}

func (u *UI) showSubmit(w http.ResponseWriter, r *http.Request, sess *session, status int, f submitForm, problem string) {
	if !sess.operator() {
		u.fail(w, r, sess, http.StatusForbidden, "Your token's role ("+sess.role+") may not submit tasks.")
		return
	}
	offers, err := u.offers(r, sess)
	if err != nil && problem == "" {
		problem = "The agents could not be listed: " + err.Error()
	}
	u.render(w, status, "submit", sess, map[string]any{"Offers": offers, "Form": f, "Problem": problem})
}

func (u *UI) submit(w http.ResponseWriter, r *http.Request, sess *session) {
	f := submitForm{Target: r.PostFormValue("target"), JSON: strings.TrimSpace(r.PostFormValue("params_json")),
		MaxDuration: strings.TrimSpace(r.PostFormValue("max_duration_seconds")), MaxMemory: strings.TrimSpace(r.PostFormValue("max_memory_mb")),
		Pin: strings.TrimSpace(r.PostFormValue("agent_id")), Keys: r.PostForm["key"], Values: r.PostForm["value"]}
	for len(f.Keys) < paramRows {
		f.Keys = append(f.Keys, "")
	}
	for len(f.Values) < len(f.Keys) {
		f.Values = append(f.Values, "")
	}
	req, err := f.request()
	if err != nil {
		u.showSubmit(w, r, sess, http.StatusBadRequest, f, err.Error())
		return
	}
	var created task.Task
	if err := u.call(r.Context(), sess, http.MethodPost, "/api/v1/tasks", req, &created); err != nil {
		if ae, ok := err.(*apiError); ok && ae.status == http.StatusBadRequest {
			u.showSubmit(w, r, sess, http.StatusBadRequest, f, ae.message)
			return
		}
		u.failAPI(w, r, sess, err)
		return
	}
	http.Redirect(w, r, u.path+"tasks/"+url.PathEscape(created.ID), http.StatusSeeOther)
}

// request builds the task the form asks for: parameters from the JSON object,
// if given, then from the key/value rows (a row's value is a string).
func (f submitForm) request() (api.SubmitRequest, error) {
	typ, workType, ok := strings.Cut(f.Target, "/")
	if !ok || typ == "" || workType == "" {
		return api.SubmitRequest{}, fmt.Errorf("choose an agent type and a work type")
	}
	req := api.SubmitRequest{ToAgent: envelope.AgentType(typ), WorkType: workType, Parameters: map[string]any{}}
	if f.JSON != "" {
		if err := json.Unmarshal([]byte(f.JSON), &req.Parameters); err != nil {
			return req, fmt.Errorf("parameters (JSON): must be one JSON object: %v", err)
		}
	}
	for i, k := range f.Keys {
		if k = strings.TrimSpace(k); k != "" {
			req.Parameters[k] = f.Values[i]
		}
	}
	var hints task.Hints
	for _, h := range []struct {
		name, value string
		to          *int64
	}{{"max duration", f.MaxDuration, &hints.MaxDurationSeconds}, {"memory", f.MaxMemory, &hints.MaxMemoryMB}} {
		if h.value == "" {
			continue
		}
		n, err := strconv.ParseInt(h.value, 10, 64)
		if err != nil || n < 1 {
			return req, fmt.Errorf("%s: must be a whole number above 0", h.name)
		}
		*h.to = n
	}
	hints.AgentID = f.Pin
	if hints != (task.Hints{}) {
		req.Hints = &hints
	}
	return req, nil
}
