package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/api"
)

// runView is what the run page shows of run: the run, its graph, and the
// gates that wait for an operator.
func runView(run *api.WorkflowRun) map[string]any {
	var gates []gateView
	for i := range run.Steps {
		s := &run.Steps[i]
		if gateWaits(run, s) {
			g := gateView{Step: s}
			for _, st := range run.Spec.Steps {
				if st.Name == s.Name && st.Approval != nil {
					g.Note = st.Approval.Note
				}
			}
			gates = append(gates, g)
		}
	}
	return map[string]any{"Run": run, "Graph": layoutGraph(&run.Spec, run), "Gates": gates, "Done": stepsDone(run)}
}

// gateView is a gate that waits: its step and what the workflow tells the
// operator of it.
type gateView struct {
	Step *api.StepRun
	Note string
}

// workflowRun is a run's page: its graph, live.
func (u *UI) workflowRun(w http.ResponseWriter, r *http.Request, sess *session) {
	var run api.WorkflowRun
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/workflow-runs/"+url.PathEscape(r.PathValue("id")), nil, &run); err != nil {
		u.failAPI(w, r, sess, err)
		return
	}
	u.render(w, http.StatusOK, "run", sess, runView(&run))
}

// runEvents relays a run's event stream (a "run" event with the whole run at
// each change, until its end) under the session's cookie, each event's run
// drawn as the page's live part: the page's script puts it in place of what
// it shows.
func (u *UI) runEvents(w http.ResponseWriter, r *http.Request, sess *session) {
	req := apiRequest(r.Context(), sess, http.MethodGet, "/api/v1/workflow-runs/"+url.PathEscape(r.PathValue("id"))+"/events", nil)
	u.relay(w, req, func(block []string) string { return u.runBlock(block, sess) })
}

// runBlock is one event of a run's stream as the run page gets it: a "run"
// event's data, the run, becomes the HTML of the page's live part, one data
// line for each of its lines. Any other event goes as it came.
func (u *UI) runBlock(block []string, sess *session) string {
	var event string
	var data, keep []string
	for _, line := range block {
		switch {
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		default:
			keep = append(keep, line) // id, retry, comments
		}
	}
	var run api.WorkflowRun
	if event != "run" || json.Unmarshal([]byte(strings.Join(data, "\n")), &run) != nil {
		return plainBlock(block)
	}
	html, err := u.fragment("run", "runLive", sess, runView(&run))
	if err != nil {
		u.log.Error("ui: render a run's event", "run", run.ID, "err", err)
		return plainBlock(block)
	}
	var out strings.Builder
	for _, line := range append(keep, "event: run") {
		out.WriteString(line + "\n")
	}
	for line := range strings.Lines(html) {
		out.WriteString("data: " + strings.TrimRight(line, "\r\n") + "\n")
	}
	return out.String()
}

// fragment renders the template block of page name, as the page would.
func (u *UI) fragment(name, block string, sess *session, data any) (string, error) {
	var buf bytes.Buffer
	err := u.pages[name].ExecuteTemplate(&buf, block, page{Base: u.path, Session: sess, Now: time.Now(), Data: data})
	return buf.String(), err
}

// cancelRun asks the API to stop the path's run, and goes back to its page.
func (u *UI) cancelRun(w http.ResponseWriter, r *http.Request, sess *session) {
	id := url.PathEscape(r.PathValue("id"))
	var ae *apiError
	err := u.call(r.Context(), sess, http.MethodPost, "/api/v1/workflow-runs/"+id+"/cancel", nil, nil)
	if err != nil && !(errors.As(err, &ae) && ae.status == http.StatusConflict) { // ended already: its page says how
		u.failAPI(w, r, sess, err)
		return
	}
	http.Redirect(w, r, u.path+"workflow-runs/"+id, http.StatusSeeOther)
}

// decideStep approves (approve) or rejects the path's gate step, with the
// form's note, through the API, and goes back to the run's page.
func (u *UI) decideStep(approve bool) func(http.ResponseWriter, *http.Request, *session) {
	op := "/reject"
	if approve {
		op = "/approve"
	}
	return func(w http.ResponseWriter, r *http.Request, sess *session) {
		id := url.PathEscape(r.PathValue("id"))
		path := "/api/v1/workflow-runs/" + id + "/steps/" + url.PathEscape(r.PathValue("step")) + op
		req := api.DecisionRequest{Note: strings.TrimSpace(r.PostFormValue("note"))}
		if err := u.call(r.Context(), sess, http.MethodPost, path, req, nil); err != nil {
			var ae *apiError
			if errors.As(err, &ae) && ae.code == "not_awaiting_approval" {
				ae.message += ". Someone decided already, or the run moved on: its page says which."
			}
			u.failAPI(w, r, sess, err)
			return
		}
		http.Redirect(w, r, u.path+"workflow-runs/"+id, http.StatusSeeOther)
	}
}
