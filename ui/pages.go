package ui

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// tailBytes is how much of a task's output its page shows: the last 64 KiB. The
// whole output is a link away, as plain text.
const tailBytes = 64 << 10

// pageSize is how many tasks a page of the task list shows.
const pageSize = 50

// page is what every template gets: where the dashboard is, who is signed in,
// the time, and the page's own data.
type page struct {
	Base    string
	Title   string
	Session *session
	Now     time.Time
	Data    any
}

// CSRF is the session's form token, or "" signed out.
func (p page) CSRF() string {
	if p.Session == nil {
		return ""
	}
	return p.Session.csrf
}

// Operator reports whether the signed-in token may submit, cancel, approve
// and reject.
func (p page) Operator() bool { return p.Session != nil && p.Session.operator() }

// Role is the signed-in token's role.
func (p page) Role() string {
	if p.Session == nil {
		return ""
	}
	return p.Session.role
}

// pageTitles are the titles of the pages whose template's name does not say
// it.
var pageTitles = map[string]string{"runform": "Start a run", "run": "Workflow run"}

func (u *UI) render(w http.ResponseWriter, status int, name string, sess *session, data any) {
	var buf bytes.Buffer
	title := strings.ToUpper(name[:1]) + name[1:]
	if t, ok := pageTitles[name]; ok {
		title = t
	}
	if err := u.pages[name].Execute(&buf, page{Base: u.path, Title: title, Session: sess, Now: time.Now(), Data: data}); err != nil {
		u.log.Error("ui: render", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// fail shows an error page.
func (u *UI) fail(w http.ResponseWriter, _ *http.Request, sess *session, status int, message string) {
	u.render(w, status, "error", sess, map[string]any{"Status": status, "Message": message})
}

// failAPI shows an API call's failure with the API's own status and message.
func (u *UI) failAPI(w http.ResponseWriter, r *http.Request, sess *session, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		msg := ae.message
		if ae.status == http.StatusForbidden {
			msg = "Your token's role (" + sess.role + ") may not do this: " + msg
		}
		u.fail(w, r, sess, ae.status, msg)
		return
	}
	u.fail(w, r, sess, http.StatusInternalServerError, err.Error())
}

// counters are the home page's figures.
type counters struct {
	Online, Offline, BreakersOpen, Running, Queued, Failed24h int
}

func (u *UI) home(w http.ResponseWriter, r *http.Request, sess *session) {
	var agents []api.AgentInfo
	agentsErr := u.call(r.Context(), sess, http.MethodGet, "/api/v1/agents", nil, &agents)
	var tasks []*task.Task
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/tasks?limit=1000", nil, &tasks); err != nil {
		u.failAPI(w, r, sess, err)
		return
	}
	var waiting []*task.Task
	waitingErr := u.call(r.Context(), sess, http.MethodGet,
		"/api/v1/tasks?state="+string(task.StateAwaitingApproval)+"&limit="+strconv.Itoa(approvalListSize), nil, &waiting)
	waitingBatches, waitingBatchesErr := u.waitingBatches(r.Context(), sess)
	var c counters
	for _, a := range agents {
		if a.State == "online" {
			c.Online++
		} else {
			c.Offline++
		}
		if a.Breaker != "closed" {
			c.BreakersOpen++
		}
	}
	var active, finished []*task.Task
	dayAgo := time.Now().Add(-24 * time.Hour)
	for _, t := range tasks {
		switch {
		case t.State == task.StateAwaitingApproval:
			// neither running nor queued: listed apart, until an operator decides
		case t.State == task.StatePending:
			c.Queued++
			active = append(active, t)
		case !t.State.Final():
			c.Running++
			active = append(active, t)
		case len(finished) < 10:
			finished = append(finished, t)
		}
		if (t.State == task.StateFailed || t.State == task.StateError) && t.FinishedAt != nil && t.FinishedAt.After(dayAgo) {
			c.Failed24h++
		}
	}
	slices.Reverse(active)                   // oldest first: the longest running on top
	wts, _ := u.workTypes(r.Context(), sess) // without them, the agents' work types show by name
	data := map[string]any{"Counters": c, "Active": active, "Finished": finished, "Agents": agents,
		"Offered": offeredBy(agents, wts), "Waiting": waiting, "WaitingMore": len(waiting) >= approvalListSize}
	if agentsErr != nil {
		data["AgentsProblem"] = agentsErr.Error()
	}
	if waitingErr != nil {
		data["WaitingProblem"] = waitingErr.Error()
	}
	data["WaitingBatches"] = waitingBatches
	if waitingBatchesErr != nil {
		data["WaitingBatchesProblem"] = waitingBatchesErr.Error()
	}
	u.render(w, http.StatusOK, "home", sess, data)
}

// taskFilter is the task list's filter, from its query.
type taskFilter struct {
	State, AgentType, Agent, WorkType string
	Page                              int
}

func (f taskFilter) query(page int) string {
	q := url.Values{}
	for k, v := range map[string]string{"state": f.State, "agent_type": f.AgentType, "agent": f.Agent, "work_type": f.WorkType} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if page > 1 {
		q.Set("page", strconv.Itoa(page))
	}
	return q.Encode()
}

func (u *UI) tasks(w http.ResponseWriter, r *http.Request, sess *session) {
	q := r.URL.Query()
	f := taskFilter{State: q.Get("state"), AgentType: q.Get("agent_type"), Agent: q.Get("agent"), WorkType: q.Get("work_type"), Page: 1}
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 1 && n <= 2000 {
		f.Page = n
	}
	api := url.Values{}
	for k, v := range map[string]string{"state": f.State, "agent_type": f.AgentType, "agent_id": f.Agent, "work_type": f.WorkType} {
		if v != "" {
			api.Set(k, v)
		}
	}
	api.Set("offset", strconv.Itoa((f.Page-1)*pageSize))
	api.Set("limit", strconv.Itoa(pageSize+1))
	var tasks []*task.Task
	data := map[string]any{"Filter": f, "States": task.States, "AgentTypes": []string{"infra", "desktop", "code", "research"}}
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/tasks?"+api.Encode(), nil, &tasks); err != nil {
		data["Problem"] = err.Error()
	}
	if len(tasks) > pageSize {
		tasks = tasks[:pageSize]
		data["Next"] = f.query(f.Page + 1)
	}
	if f.Page > 1 {
		data["Prev"] = f.query(f.Page - 1)
	}
	data["Tasks"] = tasks
	u.render(w, http.StatusOK, "tasks", sess, data)
}

func (u *UI) task(w http.ResponseWriter, r *http.Request, sess *session) {
	id := r.PathValue("id")
	var t task.Task
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id), nil, &t); err != nil {
		u.failAPI(w, r, sess, err)
		return
	}
	rec := &recorder{header: http.Header{}, tail: tailBytes}
	u.api.ServeHTTP(rec, apiRequest(r.Context(), sess, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id)+"/output", nil))
	tail := rec.tailBytes()
	data := map[string]any{"Task": &t, "Tail": string(tail), "TailStart": rec.total - int64(len(tail)),
		"TailEnd": rec.total, "Cut": rec.total > int64(len(tail))}
	if t.Result != nil && len(t.Result.StructuredOutput) > 0 {
		data["Structured"] = indentJSON(t.Result.StructuredOutput)
	}
	data["Waiting"] = taskWaits(&t)
	if wt := u.workType(r.Context(), sess, string(t.ToAgent), t.WorkType); wt != nil {
		data["WorkType"] = wt
	}
	var history []*task.Event
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id)+"/history", nil, &history); err != nil {
		data["HistoryProblem"] = err.Error()
	}
	data["History"] = history
	u.render(w, http.StatusOK, "task", sess, data)
}

// output serves a task's whole output as plain text, from the API.
func (u *UI) output(w http.ResponseWriter, r *http.Request, sess *session) {
	w.Header().Set("Content-Disposition", "inline")
	u.api.ServeHTTP(w, apiRequest(r.Context(), sess, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(r.PathValue("id"))+"/output", nil))
}

func (u *UI) cancel(w http.ResponseWriter, r *http.Request, sess *session) {
	id := r.PathValue("id")
	err := u.call(r.Context(), sess, http.MethodPost, "/api/v1/tasks/"+url.PathEscape(id)+"/cancel",
		map[string]string{"reason": "cancelled from the dashboard"}, nil)
	var ae *apiError
	if err != nil && !(errors.As(err, &ae) && ae.code == "finished") {
		u.failAPI(w, r, sess, err)
		return
	}
	http.Redirect(w, r, u.path+"tasks/"+url.PathEscape(id), http.StatusSeeOther)
}

// rerun submits a new task with the inputs of another.
func (u *UI) rerun(w http.ResponseWriter, r *http.Request, sess *session) {
	var t task.Task
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(r.PathValue("id")), nil, &t); err != nil {
		u.failAPI(w, r, sess, err)
		return
	}
	var created task.Task
	req := api.SubmitRequest{ToAgent: t.ToAgent, WorkType: t.WorkType, Parameters: t.Parameters, Hints: t.Hints}
	if err := u.call(r.Context(), sess, http.MethodPost, "/api/v1/tasks", req, &created); err != nil {
		u.failAPI(w, r, sess, err)
		return
	}
	http.Redirect(w, r, u.path+"tasks/"+url.PathEscape(created.ID), http.StatusSeeOther)
}

func (u *UI) agents(w http.ResponseWriter, r *http.Request, sess *session) {
	var agents []api.AgentInfo
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/agents", nil, &agents); err != nil {
		u.failAPI(w, r, sess, err)
		return
	}
	wts, _ := u.workTypes(r.Context(), sess) // without them, the agents' work types show by name
	u.render(w, http.StatusOK, "agents", sess, map[string]any{"Agents": agents, "Offered": offeredBy(agents, wts)})
}

func (u *UI) agent(w http.ResponseWriter, r *http.Request, sess *session) {
	id := r.PathValue("id")
	var agents []api.AgentInfo
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/agents", nil, &agents); err != nil {
		u.failAPI(w, r, sess, err)
		return
	}
	i := slices.IndexFunc(agents, func(a api.AgentInfo) bool { return a.ID == id })
	if i < 0 {
		u.fail(w, r, sess, http.StatusNotFound, fmt.Sprintf("No agent %q is configured.", id))
		return
	}
	var tasks []*task.Task
	problem := ""
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/tasks?limit=20&agent_id="+url.QueryEscape(id), nil, &tasks); err != nil {
		problem = err.Error()
	}
	wts, _ := u.workTypes(r.Context(), sess) // without them, its work types show by name
	u.render(w, http.StatusOK, "agent", sess, map[string]any{"Agent": agents[i], "Tasks": tasks, "Problem": problem,
		"Offered": offeredBy(agents[i:i+1], wts)[id]})
}

// indentJSON is raw JSON indented for reading, or raw as it is.
func indentJSON(raw []byte) string {
	var b bytes.Buffer
	if err := jsonIndent(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
